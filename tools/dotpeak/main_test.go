package main

import (
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
)

// TestLoopsSum: every loop this CPU runs does all its multiply-adds: the
// accumulators hold iters × 4 × u×s per lane for several byte values,
// including the signed extremes (VPMADDUBSW saturates int16 pairs at
// 255 × 127 × 2 = 64770 > 32767, so the avx2 loop is checked only where
// it cannot saturate, as its kernels are used).
func TestLoopsSum(t *testing.T) {
	cases := []struct {
		u     uint8
		s     int8
		avx2  bool // within VPMADDUBSW's int16 range
		iters int
	}{
		{3, -2, true, 1},
		{3, -2, true, 1000},
		{1, 1, true, 7},
		{200, 80, true, 33},
		{255, -128, false, 5},
		{0, 127, true, 9},
	}
	for _, l := range simd.Levels() {
		macs, run, ok := loopFor(l)
		if !ok || !simd.Host().Has(l) {
			t.Logf("%s: not run on this CPU", l)
			continue
		}
		for _, c := range cases {
			if l == simd.AVX2 && !c.avx2 {
				continue
			}
			u := uint32(c.u) * 0x01010101
			s := uint32(uint8(c.s)) * 0x01010101
			if got, want := run(c.iters, u, s), expected(macs, c.iters, int32(c.u), int32(c.s)); got != want {
				t.Errorf("%s u=%d s=%d iters=%d: sum %d, want %d", l, c.u, c.s, c.iters, got, want)
			}
		}
		if got := run(0, 0x03030303, 0xFEFEFEFE); got != 0 {
			t.Errorf("%s: 0 iterations summed %d", l, got)
		}
	}
}

// TestMeasure: a short measurement at each level runs, checks its sums
// and reports a positive rate; an unknown level is refused.
func TestMeasure(t *testing.T) {
	levels, err := levelsToRun("", func(string) string { return "" })
	if err != nil || len(levels) == 0 || levels[len(levels)-1] != simd.None {
		t.Fatalf("levelsToRun: %v, %v (want every level down to none)", levels, err)
	}
	for _, l := range levels {
		if g, err := measure(l, 2, 1000, 1); err != nil || !(g > 0) {
			t.Errorf("%s: %v GMAC/s, %v", l, g, err)
		}
	}
	capped, err := levelsToRun("", func(k string) string {
		if k == simd.EnvCeiling {
			return "avx2"
		}
		return ""
	})
	if err != nil || len(capped) == 0 || capped[0] > simd.AVX2 {
		t.Errorf("under the avx2 ceiling: %v, %v", capped, err)
	}
	if _, err := levelsToRun("sse9", func(string) string { return "" }); err == nil {
		t.Error("an unknown level was accepted")
	}
}
