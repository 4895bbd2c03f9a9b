//go:build windows

package app

import "testing"

// TestWindowsMemAvailable: on Windows the memory check before loading
// the CPU engine beside FastFlowLM reads the free memory, rather than
// allowing any load (it was read on Linux only).
func TestWindowsMemAvailable(t *testing.T) {
	a := &App{}
	n, err := a.memAvailable()
	if err != nil || n <= 0 {
		t.Fatalf("free memory %d, %v", n, err)
	}
}
