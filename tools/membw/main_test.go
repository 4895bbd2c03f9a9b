package main

import "testing"

// TestSumFast: the assembly read loop adds up what the Go loop does.
func TestSumFast(t *testing.T) {
	for _, n := range []int{0, 32, 64, 32 * 1001} {
		b := make([]uint64, n)
		for i := range b {
			b[i] = uint64(i)*0x9E3779B97F4A7C15 + 1
		}
		if got, want := sumFast(b), sum(b); got != want {
			t.Errorf("%d values: sumFast %#x, sum %#x", n, got, want)
		}
	}
	if gbs := measure(1, 1<<20, 2); !(gbs > 0) {
		t.Errorf("measure: %v GB/s", gbs)
	}
}
