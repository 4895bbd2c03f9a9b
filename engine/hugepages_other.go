//go:build !linux

package engine

// adviseHuge does nothing outside Linux (see hugepages_linux.go).
func adviseHuge([]byte) {}

// populate does nothing outside Linux: pages fault in as written.
func populate([]byte) {}
