package main

// sumAsm is sum in assembly, with software prefetching (read_amd64.s).
//
//go:noescape
func sumAsm(p *uint64, n int) uint64

// sumFast adds up b (a multiple of 32 values) as fast as this CPU reads.
func sumFast(b []uint64) uint64 {
	if len(b) == 0 {
		return 0
	}
	return sumAsm(&b[0], len(b))
}
