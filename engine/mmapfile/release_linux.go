package mmapfile

import (
	"os"
	"syscall"
	"unsafe"
)

// pageRange is the whole pages inside b.
func pageRange(b []byte) []byte {
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := (p + page - 1) &^ (page - 1)
	hi := (p + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return nil
	}
	off := lo - p
	return b[off : off+(hi-lo)]
}

// willNeed starts reading the pages of b ahead (the mapping's pages
// around b's ends included).
func willNeed(b []byte) {
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := p &^ (page - 1) // the mapping starts on a page boundary
	// advice only: an error changes nothing
	syscall.Syscall(syscall.SYS_MADVISE, lo, p-lo+uintptr(len(b)), syscall.MADV_WILLNEED)
}

// release drops the whole pages inside b from the process's resident set.
func release(b []byte) {
	if w := pageRange(b); len(w) > 0 {
		syscall.Madvise(w, syscall.MADV_DONTNEED) // advice only: an error changes nothing
	}
}
