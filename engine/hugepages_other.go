//go:build !linux

package engine

// adviseHuge does nothing outside Linux (see hugepages_linux.go).
func adviseHuge([]byte) {}
