package engine

import "syscall"

// adviseHuge asks Linux to back b with transparent huge pages (2 MB)
// when they are first touched. The weights are read from end to end for
// every token: with 4 KB pages that is a TLB miss (a page walk, twice as
// deep in a virtual machine) every 4 KB. Where the system's setting is
// "never", or b is already touched, it changes nothing.
func adviseHuge(b []byte) {
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // only advice: nothing to do if refused
}
