//go:build linux || darwin

package mmapfile

import (
	"os"
	"syscall"
	"unsafe"
)

func mapFile(f *os.File, size int) ([]byte, func() error, bool, error) {
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		d, c, err := readAll(f, size)
		return d, c, false, err
	}
	return data, func() error { return syscall.Munmap(data) }, true, nil
}

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
