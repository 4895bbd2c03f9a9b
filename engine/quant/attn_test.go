package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
)

// attnCase is random attention input in the cache layout: keys in blocks
// of 16 positions (dimension-major) and values position-major, both with
// other KV heads' data interleaved (strides larger than one head), and
// the lanes of the last block past N filled with large garbage that must
// not reach the result.
type attnCase struct {
	a    Attn
	q    []float32
	keys [][]float32 // keys[t][d], for the reference
	vals [][]float32
}

func newAttnCase(rng *rand.Rand, rows, hd, n int, f16 bool) attnCase {
	const kvHeads = 2
	nb := (n + AttnBlock - 1) / AttnBlock
	kstride := kvHeads * hd * AttnBlock
	vstride := kvHeads * hd
	k := make([]float32, nb*kstride)
	v := make([]float32, n*vstride)
	for i := range k {
		k[i] = 1e4 // garbage where no position is
	}
	c := attnCase{q: make([]float32, rows*hd)}
	for i := range c.q {
		c.q[i] = float32(rng.NormFloat64()) * 2
	}
	for t := range n {
		kt, vt := make([]float32, hd), make([]float32, hd)
		for d := range hd {
			kt[d] = float32(rng.NormFloat64())
			vt[d] = float32(rng.NormFloat64())
			if f16 { // the values the float16 cache holds
				kt[d], vt[d] = F16ToF32(F32ToF16(kt[d])), F16ToF32(F32ToF16(vt[d]))
			}
			k[(t/AttnBlock)*kstride+d*AttnBlock+t%AttnBlock] = kt[d]
			v[t*vstride+d] = vt[d]
		}
		c.keys, c.vals = append(c.keys, kt), append(c.vals, vt)
	}
	c.a = Attn{HeadDim: hd, N: n, Scale: float32(1 / math.Sqrt(float64(hd))), KStride: kstride, VStride: vstride}
	if f16 {
		c.a.K16, c.a.V16 = make([]uint16, len(k)), make([]uint16, len(v))
		for i, x := range k {
			c.a.K16[i] = F32ToF16(x)
		}
		for i, x := range v {
			c.a.V16[i] = F32ToF16(x)
		}
	} else {
		c.a.K, c.a.V = k, v
	}
	return c
}

// reference is the attention in float64.
func (c *attnCase) reference() []float64 {
	hd := c.a.HeadDim
	out := make([]float64, len(c.q))
	for r := range len(c.q) / hd {
		s := make([]float64, c.a.N)
		m := math.Inf(-1)
		for t := range s {
			for d := range hd {
				s[t] += float64(c.q[r*hd+d]) * float64(c.keys[t][d])
			}
			s[t] /= math.Sqrt(float64(hd))
			m = max(m, s[t])
		}
		sum := 0.0
		for t := range s {
			s[t] = math.Exp(s[t] - m)
			sum += s[t]
		}
		for t := range s {
			for d := range hd {
				out[r*hd+d] += s[t] / sum * float64(c.vals[t][d])
			}
		}
	}
	return out
}

// TestAttnKernel: every level's attention kernels (AVX-512; AVX2, which
// the AVX-VNNI level uses too) equal their plain-Go twin bit for bit
// (rows of a partial group of 8, several groups, context lengths not a
// multiple of 16, both cache types), and the twin (level none) is
// attention: it agrees with a float64 reference within float32 rounding.
func TestAttnKernel(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, l simd.Level) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, tc := range []struct{ rows, hd, n int }{
			{8, 128, 1}, {8, 128, 16}, {8, 128, 17}, {8, 128, 333}, {1, 16, 5}, {3, 32, 40},
			{16, 16, 31}, {12, 64, 100}, {4, 64, 2}, {8, 16, 1000}, {2, 48, 7},
		} {
			for _, f16 := range []bool{false, true} {
				c := newAttnCase(rng, tc.rows, tc.hd, tc.n, f16)
				var sc1 AttnScratch
				plain := make([]float32, len(c.q))
				c.a.Run(plain, c.q, &sc1, simd.None)
				if l == simd.None {
					ref := c.reference()
					for i := range plain {
						if d := math.Abs(float64(plain[i]) - ref[i]); d > 1e-5*(1+math.Abs(ref[i])) || math.IsNaN(d) {
							t.Fatalf("%+v f16 %v: out[%d] = %v, float64 reference %v", tc, f16, i, plain[i], ref[i])
						}
					}
					continue
				}
				var sc2 AttnScratch
				fast := make([]float32, len(c.q))
				c.a.Run(fast, c.q, &sc2, l)
				for i := range plain {
					if math.Float32bits(fast[i]) != math.Float32bits(plain[i]) {
						t.Fatalf("%+v f16 %v: out[%d] %s %v, plain Go %v", tc, f16, i, l, fast[i], plain[i])
					}
				}
			}
		}
	})
}

// TestAttnExp: expf is within 2 ulps of exp on [-87, 0] and 0 far
// below, and each level's exp kernel (avx512's attnExp, avx2's
// attnExpAVX2, which avxvnni runs too) equals expf bit for bit,
// including the zeroed lanes past the tail and the lane sums.
func TestAttnExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	maxUlps := 0.0
	for range 20000 {
		x := -float32(rng.Float64()) * 87
		if rng.IntN(4) == 0 {
			x = -float32(rng.Float64()) * 2
		}
		got, want := float64(expf(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), 2)) - float64(float32(want))
		maxUlps = max(maxUlps, math.Abs(got-want)/ulp)
	}
	if maxUlps > 2 {
		t.Errorf("expf within %.2f ulps of exp, want ≤ 2", maxUlps)
	}
	if e := expf(-1000); e > 1e-37 {
		t.Errorf("expf(-1000) = %v", e)
	}
	if e := expf(0); e != 1 {
		t.Errorf("expf(0) = %v", e)
	}
	t.Logf("expf within %.2f ulps", maxUlps)
	simdtest.Run(t, []simd.Level{simd.AVX2, simd.AVX512}, func(t *testing.T, l simd.Level) {
		testAttnExpKernel(t, l, rng)
	})
}

func testAttnExpKernel(t *testing.T, l simd.Level, rng *rand.Rand) {
	for _, n := range []int{1, 15, 16, 17, 100, 1024} {
		nb := (n + 15) / 16
		s := make([]float32, nb*16)
		for i := range s {
			s[i] = float32(rng.NormFloat64()) * 30
		}
		s[0] = 0
		if n > 1 {
			s[1] = float32(math.Copysign(0, -1))
		}
		m := float32(3)
		want := append([]float32(nil), s[:n]...)
		var wsum [16]float32
		expRowGo(want, m, &wsum)
		var gsum [16]float32
		tail := n - (nb-1)*16
		if l == simd.AVX512 {
			attnExp(&s[0], nb, uint64(1)<<tail-1, m, &gsum[0])
		} else {
			var mask [AttnBlock]int32
			for i := range tail {
				mask[i] = -1
			}
			attnExpAVX2(&s[0], nb, &mask[0], m, &gsum[0], &attnConsts[0])
		}
		for i := range s {
			w := float32(0)
			if i < n {
				w = want[i]
			}
			if math.Float32bits(s[i]) != math.Float32bits(w) {
				t.Fatalf("n %d: exp[%d] = %v, expf %v", n, i, s[i], w)
			}
		}
		if gsum != wsum {
			t.Fatalf("n %d: lane sums %v, want %v", n, gsum, wsum)
		}
	}
}

// BenchmarkAttn is one unit of MiniCPM5-2B's attention (8 query heads of
// a KV group, head dimension 128) over 1000 positions: the AVX-512
// kernels, their plain-Go twin, and the per-head loop the engine had
// before (a DotF32 per position, float64 softmax, an AxpyF32 per position).
func BenchmarkAttn(b *testing.B) {
	const rows, hd, n = 8, 128, 1000
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f16 := range []bool{false, true} {
		c := newAttnCase(rng, rows, hd, n, f16)
		out := make([]float32, rows*hd)
		name := "f32"
		if f16 {
			name = "f16"
		}
		for _, l := range []simd.Level{simd.AVX512, simd.AVX2, simd.None} {
			if !simd.Host().Has(l) {
				continue
			}
			b.Run(name+"/"+l.String(), func(b *testing.B) {
				var sc AttnScratch
				for b.Loop() {
					c.a.Run(out, c.q, &sc, l)
				}
			})
		}
		// the old layout: position t's keys and values of both KV heads
		kvDim := 2 * hd
		keys, vals := make([]float32, n*kvDim), make([]float32, n*kvDim)
		keys16, vals16 := make([]uint16, n*kvDim), make([]uint16, n*kvDim)
		for t := range n {
			copy(keys[t*kvDim:], c.keys[t])
			copy(vals[t*kvDim:], c.vals[t])
			for d := range hd {
				keys16[t*kvDim+d], vals16[t*kvDim+d] = F32ToF16(c.keys[t][d]), F32ToF16(c.vals[t][d])
			}
		}
		old := simd.Host().Best(simd.AVX2)
		b.Run(name+"/old", func(b *testing.B) {
			att := make([]float32, n)
			inv := float32(1 / math.Sqrt(hd))
			for b.Loop() {
				for h := range rows {
					q := c.q[h*hd : (h+1)*hd]
					for t := range att {
						if f16 {
							att[t] = DotF16(old, q, keys16[t*kvDim:t*kvDim+hd]) * inv
						} else {
							att[t] = DotF32(old, q, keys[t*kvDim:t*kvDim+hd]) * inv
						}
					}
					mx := att[0]
					for _, v := range att {
						mx = max(mx, v)
					}
					var sum float64
					for t, v := range att {
						e := float32(math.Exp(float64(v - mx)))
						att[t] = e
						sum += float64(e)
					}
					for t := range att {
						att[t] *= float32(1 / sum)
					}
					o := out[h*hd : (h+1)*hd]
					clear(o)
					for t, p := range att {
						if f16 {
							AxpyF16(old, o, p, vals16[t*kvDim:t*kvDim+hd])
						} else {
							AxpyF32(old, o, p, vals[t*kvDim:t*kvDim+hd])
						}
					}
				}
			}
		})
	}
}
