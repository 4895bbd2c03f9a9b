package engine

import (
	"syscall"
	"unsafe"
)

// adviseHuge asks Linux to back b with transparent huge pages (2 MB)
// when they are first touched. The weights are read from end to end for
// every token: with 4 KB pages that is a TLB miss (a page walk, twice as
// deep in a virtual machine) every 4 KB. Where the system's setting is
// "never", or b is already touched, it changes nothing.
func adviseHuge(b []byte) {
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // only advice: nothing to do if refused
}

// populate backs b with memory now, in one system call rather than a
// page fault per 4 KB page as it is first written (MADV_POPULATE_WRITE,
// Linux 5.14; elsewhere, or if refused, the pages fault in as written).
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	const madvPopulateWrite = 23
	syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), madvPopulateWrite) // advice only
}
