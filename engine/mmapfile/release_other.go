//go:build !linux

package mmapfile

// release does nothing off Linux (the mapping's pages stay resident until
// the system needs them).
func release(b []byte) {}

// willNeed does nothing off Linux.
func willNeed(b []byte) {}
