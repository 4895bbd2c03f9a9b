// Package simdtest runs a test once per SIMD level, as a subtest named
// after the level, and skips visibly (t.Skipf, with the reason) each
// level this CPU lacks or $NPUCHAT_CPU_CEILING takes away. Tests of the
// engine and its kernels use it instead of looping over levels
// themselves, so that a level the CPU lacks shows as SKIP, never as a
// PASS that tested nothing.
package simdtest

import (
	"os"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
)

// CPU is this CPU as the tests see it: CPUID capped at
// $NPUCHAT_CPU_CEILING, read through simd.Env. A ceiling that is not a
// level's name fails the test.
func CPU(t testing.TB) simd.CPU {
	t.Helper()
	_, ceiling := simd.Env(os.Getenv)
	c, err := simd.Resolve(simd.Request{Ceiling: ceiling, CeilingBy: "$" + simd.EnvCeiling}, simd.Host())
	if err != nil {
		t.Fatal(err)
	}
	return c.CPU
}

// Run runs f as a subtest for each of levels (named "none", "avx2", …),
// skipping each level CPU(t) lacks with "CPU lacks avx512: it lacks
// AVX-512F, …" (or "it is capped at avx2 (CPU ceiling)").
func Run(t *testing.T, levels []simd.Level, f func(t *testing.T, l simd.Level)) {
	t.Helper()
	cpu := CPU(t)
	for _, l := range levels {
		t.Run(l.String(), func(t *testing.T) {
			if !cpu.Has(l) {
				t.Skipf("CPU lacks %s: it %s", l, cpu.Lacks(l))
			}
			f(t, l)
		})
	}
}

// Each is Run over every level, lowest first.
func Each(t *testing.T, f func(t *testing.T, l simd.Level)) { Run(t, simd.Levels(), f) }
