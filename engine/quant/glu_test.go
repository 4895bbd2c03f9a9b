package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
)

// TestSiLU: silu is x·σ(x) within a few float32 ulps wherever that is
// at least 1e-30 in size (below it, and where it is 0, silu must be
// under 1e-30 too), and exact at the range's ends (−0 for very negative
// x, x for very large x, Inf, NaN).
func TestSiLU(t *testing.T) {
	ref := func(x float32) float64 { return float64(x) / (1 + math.Exp(-float64(x))) }
	cases := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-6, -1e-6, 5, -5, 20, -20, 80, -80, 87, -87, 88, -88, 100, -100, 1e4, -1e4}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		cases = append(cases, float32(rng.NormFloat64()*8))
	}
	worst := 0.0
	for _, x := range cases {
		got, want := silu(x), ref(x)
		if math.IsNaN(float64(got)) || math.IsInf(float64(got), 0) {
			t.Fatalf("silu(%v) = %v", x, got)
		}
		if want == 0 && got != 0 && math.Abs(float64(got)) > 1e-30 {
			t.Errorf("silu(%v) = %v, want 0", x, got)
		}
		ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
		if want == 0 || ulp == 0 || math.Abs(want) < 1e-30 {
			continue
		}
		worst = max(worst, math.Abs(float64(got)-want)/ulp)
	}
	if worst > 4 {
		t.Errorf("silu within %.2f ulps of x/(1+exp(-x)), want ≤ 4", worst)
	}
	t.Logf("silu within %.2f ulps", worst)
	for _, c := range []struct{ x, want float32 }{
		{float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))},
		{-1e30, float32(math.Copysign(0, -1))},
		{-math.MaxFloat32, float32(math.Copysign(0, -1))},
		{1e30, 1e30},
		{math.MaxFloat32, math.MaxFloat32},
		{float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := silu(c.x); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("silu(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := silu(float32(math.NaN())); !math.IsNaN(float64(got)) {
		t.Errorf("silu(NaN) = %v", got)
	}
}

// TestSwiGLUKernels: every level's SwiGLU gives swigluGo's bits, for
// lengths around the kernels' 8 and 16 values (their tails), with the
// branches' special values, and writes nothing past len(h).
func TestSwiGLUKernels(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, l simd.Level) {
		rng := rand.New(rand.NewPCG(9, uint64(l)))
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 6144} {
			h := make([]float32, n+16)
			u := make([]float32, n+16)
			for i := range h {
				h[i] = float32(rng.NormFloat64() * 6)
				u[i] = float32(rng.NormFloat64())
			}
			// the branches' and the range's edges, at the start and
			// again in the last values (the kernels' tails)
			specials := []float32{0, float32(math.Copysign(0, -1)), -87, -87.5, -88, 88, -1e4, 1e4, 1e-6,
				-1e30, 1e30, math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
			for i := range min(n, len(specials)) {
				h[i] = specials[i]
				h[n-1-i] = specials[i]
			}
			want := append([]float32(nil), h...)
			swigluGo(want[:n], u[:n])
			got := append([]float32(nil), h...)
			SwiGLU(l, got[:n], u[:n])
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					if i >= n {
						t.Fatalf("n=%d: value %d past the end changed: %v, was %v", n, i, got[i], want[i])
					}
					t.Fatalf("n=%d: h[%d] = silu(%v)·%v = %v, want %v (swigluGo)", n, i, h[i], u[i], got[i], want[i])
				}
			}
		}
	})
}
