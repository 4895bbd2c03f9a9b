package mmapfile

import (
	"os"
	"syscall"
	"unsafe"
)

// release drops the whole pages inside b from the process's resident set.
func release(b []byte) {
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := (p + page - 1) &^ (page - 1)
	hi := (p + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	off := lo - p
	syscall.Madvise(b[off:off+(hi-lo)], syscall.MADV_DONTNEED) // advice only: an error changes nothing
}
