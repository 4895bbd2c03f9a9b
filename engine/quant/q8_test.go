package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
)

var q8Types = []Type{Q8_0, Q4_0, Q4_1, Q4_1BF16}

// randomQ8 quantizes n Gaussian values.
func randomQ8(r *rand.Rand, n int) *Q8Vector {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var v Q8Vector
	v.QuantizePlain(x) // every level's rounding gives these bits (TestQuantizeMatchesReference)
	return &v
}

// shifted copies b into a fresh buffer at byte offset off, so kernels see
// unaligned rows.
func shifted(b []byte, off int) []byte {
	buf := make([]byte, len(b)+off)
	copy(buf[off:], b)
	return buf[off:]
}

// TestDotQ8MatchesReference: at each level DotQ8 equals the plain-Go
// reference within float32 summation-order rounding (at none, bit for
// bit: it is the reference), on random blocks (all byte values,
// including -128 quants), odd and even block counts, and unaligned rows
// and activations.
func TestDotQ8MatchesReference(t *testing.T) {
	simdtest.Each(t, testDotQ8MatchesReference)
}

func testDotQ8MatchesReference(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range q8Types {
		for _, nb := range []int{1, 2, 3, 4, 5, 7, 64, 65, 193} {
			for off := 0; off < 3; off++ {
				row := shifted(randomRow(r, typ, 32*nb), off)
				x := randomQ8(r, 32*nb+32*off)
				x.Qs, x.D, x.S = x.Qs[32*off:], x.D[off:], x.S[off:] // activations not at the start of their arrays
				x.Qs = x.Qs[:32*nb]
				want := DotQ8Ref(typ, row, x)
				got := DotQ8(l, typ, row, x)
				if l == simd.None && math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s, %d blocks: none ran %v, not the reference's %v", typ, nb, got, want)
				}
				// bound the rounding by the magnitude of the terms
				var mag float64
				for b := 0; b < nb; b++ {
					mag += math.Abs(float64(DotQ8Ref(typ, row[b*typ.BlockBytes():(b+1)*typ.BlockBytes()], &Q8Vector{Qs: x.Qs[b*32 : b*32+32], D: x.D[b : b+1], S: x.S[b : b+1]})))
				}
				if d := math.Abs(float64(got - want)); d > 1e-5*mag+1e-30 {
					t.Errorf("%s, %d blocks, offset %d: SIMD %g, reference %g (difference %g, terms %g)", typ, nb, off, got, want, d, mag)
				}
			}
		}
	}
}

// TestDotQ8IntegerSumsExact: with unit scales every partial sum is a
// small integer, so any summation order gives the same float: each
// level's integer block sums must equal the reference's bit for bit.
func TestDotQ8IntegerSumsExact(t *testing.T) {
	simdtest.Each(t, testDotQ8IntegerSumsExact)
}

func testDotQ8IntegerSumsExact(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range q8Types {
		for _, nb := range []int{1, 2, 3, 8, 33} {
			row := randomRow(r, typ, 32*nb)
			bb := typ.BlockBytes()
			for b := 0; b < nb; b++ {
				switch typ {
				case Q4_1BF16:
					put16(row[b*bb:], F32ToBF16(1))
					put16(row[b*bb+2:], F32ToBF16(-2))
				case Q4_1:
					put16(row[b*bb:], F32ToF16(1))
					put16(row[b*bb+2:], F32ToF16(-2))
				default:
					put16(row[b*bb:], F32ToF16(1))
				}
			}
			x := randomQ8(r, 32*nb)
			for b := range x.D {
				x.D[b] = 1
				x.S[b] = float32(b%7 - 3)
			}
			if got, want := DotQ8(l, typ, row, x), DotQ8Ref(typ, row, x); got != want {
				t.Errorf("%s, %d blocks: SIMD %v, reference %v", typ, nb, got, want)
			}
		}
	}
}

// TestDotQ8Reference checks the reference itself against the float
// definition: Σ dequant(w)·(d·q) over the blocks (with S = d·Σq for Q4_1).
func TestDotQ8Reference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range q8Types {
		row := randomRow(r, typ, 256)
		x := randomQ8(r, 256)
		w := make([]float32, 256)
		Dequantize(typ, row, w)
		var want, mag float64
		for i, q := range x.Qs {
			d := float64(x.D[i/32])
			want += float64(w[i]) * d * float64(q)
			mag += math.Abs(float64(w[i]) * d * float64(q))
		}
		if typ == Q4_1 || typ == Q4_1BF16 {
			// S is d·Σq rounded to float16, not exact: use it as the kernel does
			want = 0
			for b := 0; b < 8; b++ {
				var sq float64
				for j := 0; j < 32; j++ {
					sq += float64(x.Qs[b*32+j])
				}
				d, m := q41Scales(typ, row[b*20:])
				var s float64
				for j := 0; j < 32; j++ {
					s += float64(w[b*32+j]-m) * float64(x.Qs[b*32+j])
				}
				want += float64(x.D[b])*s + float64(m)*float64(x.S[b])
				_ = d
			}
		}
		if got := DotQ8Ref(typ, row, x); math.Abs(float64(got)-want) > 1e-5*mag {
			t.Errorf("%s: reference %g, float definition %g", typ, got, want)
		}
	}
}

// TestQuantizeQ8 checks ggml's rounding at each level: d = max|x|/127
// as float16, q = round-half-even(x·127/max), S = float16(d·Σq), and
// zero blocks.
func TestQuantizeQ8(t *testing.T) {
	simdtest.Each(t, testQuantizeQ8)
}

func testQuantizeQ8(t *testing.T, l simd.Level) {
	x := make([]float32, 64)
	for i := range 32 {
		x[i] = float32(i) - 12.7 // max |x| = 19.3 at i = 31... and -12.7 at 0
	}
	x[5] = 0.5 * 19.3 / 127 * 3 // 1.5 steps: ties go to even (2)
	var v Q8Vector
	v.Quantize(l, x)
	amax := float32(31 - 12.7)
	if want := F16ToF32(F32ToF16(amax / 127)); v.D[0] != want {
		t.Errorf("d = %v, want %v", v.D[0], want)
	}
	var sum int32
	for i := range 32 {
		want := int8(math.RoundToEven(float64(x[i] * (127 / amax))))
		if v.Qs[i] != want {
			t.Errorf("q[%d] = %d, want %d", i, v.Qs[i], want)
		}
		sum += int32(v.Qs[i])
	}
	if v.Qs[31] != 127 || v.Qs[5] != 2 {
		t.Errorf("q[31] = %d (want 127), q[5] = %d (want 2, ties to even)", v.Qs[31], v.Qs[5])
	}
	if want := F16ToF32(F32ToF16(amax / 127 * float32(sum))); v.S[0] != want {
		t.Errorf("s = %v, want %v", v.S[0], want)
	}
	if v.D[1] != 0 || v.S[1] != 0 || v.Qs[40] != 0 {
		t.Errorf("zero block: d %v, s %v, q %d", v.D[1], v.S[1], v.Qs[40])
	}
}

// TestDotF32 checks each level's float kernel against a float64 sum at
// every length up to 80 and at unaligned starts.
func TestDotF32(t *testing.T) {
	simdtest.Each(t, testDotF32)
}

func testDotF32(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(9, 10))
	for n := 0; n <= 80; n++ {
		for off := 0; off < 2; off++ {
			a := make([]float32, n+off)
			b := make([]float32, n+off)
			for i := range a {
				a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			a, b = a[off:], b[off:]
			var want, mag float64
			for i := range a {
				want += float64(a[i]) * float64(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
			}
			if got := DotF32(l, a, b); math.Abs(float64(got)-want) > 1e-6*mag {
				t.Errorf("n %d, offset %d: %g, want %g", n, off, got, want)
			}
		}
	}
}

// TestRoundEven checks the float32 rounding trick against math.RoundToEven
// on ties, near-ties and random values in the quantizer's range.
func TestRoundEven(t *testing.T) {
	vals := []float32{0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, -126.5, 127, -127, 0.49999997, 60.500004, -23.5}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		vals = append(vals, float32(r.Float64()*254-127))
	}
	for _, v := range vals {
		if got, want := roundEven(v), float32(math.RoundToEven(float64(v))); got != want {
			t.Errorf("roundEven(%v) = %v, want %v", v, got, want)
		}
	}
}

// TestDotQ8x4 checks that at each level the four-vector kernels give
// exactly DotQ8's results at that level (bit for bit: the same
// operations in the same order), for every type, odd and even block
// counts, unaligned rows and batches whose four vectors start anywhere.
func TestDotQ8x4(t *testing.T) {
	simdtest.Each(t, testDotQ8x4)
}

func testDotQ8x4(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range q8Types {
		for _, nb := range []int{1, 2, 3, 8, 65} {
			xs := make([][]float32, 6)
			for i := range xs {
				xs[i] = make([]float32, 32*nb)
				for j := range xs[i] {
					xs[i][j] = float32(r.NormFloat64())
				}
			}
			var b Q8Batch
			b.Quantize(l, xs, 32*nb)
			for off := 0; off < 3; off++ {
				row := shifted(randomRow(r, typ, 32*nb), off)
				for first := 0; first+4 <= len(xs); first++ {
					var out [4]float32
					DotQ8x4(l, typ, row, &b, first, &out)
					for i, got := range out {
						if want := DotQ8(l, typ, row, &b.Vecs[first+i]); got != want {
							t.Errorf("%s, %d blocks, offset %d, vector %d: x4 %v, x1 %v", typ, nb, off, first+i, got, want)
						}
						if ref := DotQ8Ref(typ, row, &b.Vecs[first+i]); math.Abs(float64(got-ref)) > 1e-3*math.Abs(float64(ref))+1e-3 {
							t.Errorf("%s, %d blocks, vector %d: x4 %v, reference %v", typ, nb, first+i, got, ref)
						}
					}
				}
			}
		}
	}
}

// TestAxpyF32 checks each level's y += a·x against float64 at every
// length up to 80 and at unaligned starts.
func TestAxpyF32(t *testing.T) {
	simdtest.Each(t, testAxpyF32)
}

func testAxpyF32(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(13, 14))
	for n := 0; n <= 80; n++ {
		for off := 0; off < 2; off++ {
			x, y := make([]float32, n+off), make([]float32, n+off)
			for i := range x {
				x[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			x, y = x[off:], y[off:]
			a := float32(r.NormFloat64())
			want := make([]float64, n)
			for i := range want {
				want[i] = float64(y[i]) + float64(a)*float64(x[i])
			}
			AxpyF32(l, y, a, x)
			for i := range y {
				if d := math.Abs(float64(y[i]) - want[i]); d > 1e-6*(math.Abs(want[i])+math.Abs(float64(a*x[i]))) {
					t.Fatalf("n %d, offset %d, i %d: %v, want %v", n, off, i, y[i], want[i])
				}
			}
		}
	}
}

// TestDotF16: at each level the float16 dot and axpy equal the float32
// ones on the converted values (within summation-order rounding), and
// the float64 sum, for every length around the SIMD widths.
func TestDotF16(t *testing.T) {
	simdtest.Each(t, testDotF16)
}

func testDotF16(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 64, 127, 128, 300} {
		a, b16, bf := make([]float32, n), make([]uint16, n), make([]float32, n)
		var mag float64
		for i := range a {
			a[i] = float32(r.NormFloat64())
			b16[i] = F32ToF16(float32(r.NormFloat64()))
			bf[i] = F16ToF32(b16[i])
			mag += math.Abs(float64(a[i] * bf[i]))
		}
		var exact float64
		for i := range a {
			exact += float64(a[i]) * float64(bf[i])
		}
		if got, want := DotF16(l, a, b16), DotF32(l, a, bf); math.Abs(float64(got-want)) > 1e-5*mag || math.Abs(float64(got)-exact) > 1e-5*mag {
			t.Errorf("n %d: DotF16 %v, DotF32 %v, float64 %v", n, got, want, exact)
		}
		y1, y2 := append([]float32(nil), a...), append([]float32(nil), a...)
		AxpyF16(l, y1, 0.7, b16)
		AxpyF32(l, y2, 0.7, bf)
		for i := range y1 {
			if math.Abs(float64(y1[i]-y2[i])) > 1e-6*(1+math.Abs(float64(y2[i]))) {
				t.Fatalf("n %d: AxpyF16[%d] %v, AxpyF32 %v", n, i, y1[i], y2[i])
			}
		}
	}
}

// TestQuantizeMatchesReference: each level's rounding of activations
// (AVX-512, AVX2, which the AVX-VNNI level uses too) gives the plain-Go
// loop's bytes, scales, sums and block sums exactly, on Gaussian values,
// outliers, all-zero and constant blocks, ties (x·127/max = k+½) and
// tiny and huge magnitudes.
func TestQuantizeMatchesReference(t *testing.T) {
	simdtest.Run(t, []simd.Level{simd.AVX2, simd.AVXVNNI, simd.AVX512}, func(t *testing.T, l simd.Level) {
		if roundings[l] == nil {
			t.Fatalf("level %s has no rounding loop of its own", l)
		}
		testQuantizeMatches(t, l)
	})
}

func testQuantizeMatches(t *testing.T, rounding simd.Level) {
	r := rand.New(rand.NewPCG(13, 14))
	for trial := range 200 {
		nb := 1 + r.IntN(70)
		x := make([]float32, 32*nb)
		for i := range x {
			switch trial % 5 {
			case 0:
				x[i] = float32(r.NormFloat64())
			case 1:
				x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-6)))
			case 2:
				x[i] = float32(r.IntN(255)-127) / 2 // many exact ties after scaling
			case 3:
				if i/32%2 == 0 {
					x[i] = 0
				} else {
					x[i] = 3
				}
			case 4:
				x[i] = float32(r.NormFloat64() * 1e30)
			}
		}
		var got, want Q8Vector
		got.Quantize(rounding, x)
		want.QuantizePlain(x)
		for i := range want.Qs {
			if got.Qs[i] != want.Qs[i] {
				t.Fatalf("trial %d value %d (%g): q %d, reference %d", trial, i, x[i], got.Qs[i], want.Qs[i])
			}
		}
		for b := range want.D {
			if math.Float32bits(got.D[b]) != math.Float32bits(want.D[b]) || math.Float32bits(got.S[b]) != math.Float32bits(want.S[b]) || got.Sum[b] != want.Sum[b] {
				t.Fatalf("trial %d block %d: d %g s %g sum %d, reference %g %g %d", trial, b, got.D[b], got.S[b], got.Sum[b], want.D[b], want.S[b], want.Sum[b])
			}
		}
	}
}

// TestKernelsFollowLevel: each row and float entry point runs the kernel
// of the level it is given, and no other: at avx2 and above the AVX2
// assembly, at none the plain-Go loop, told apart by their last bits on
// inputs where the two orders of float additions (or a fused
// multiply-add) round differently. (Q8Vector.Quantize cannot be told
// apart this way: every level gives the same bits, checked by
// TestQuantizeMatchesReference.)
func TestKernelsFollowLevel(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const n = 32 * 37
	a, b, y := make([]float32, n), make([]float32, n), make([]float32, n)
	b16 := make([]uint16, n)
	for i := range a {
		a[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		b16[i] = F32ToF16(float32(r.NormFloat64()))
		b[i] = F16ToF32(b16[i])
	}
	row := randomRow(r, Q4_0, n)
	x := randomQ8(r, n)
	// what each kernel gives, by kernel: "asm" (the AVX2 assembly) and "go"
	type result struct{ dotq8, dotf32, dotf16 float32 }
	var want [2]result
	var wantAxpy, wantAxpy16 [2][]float32
	want[1] = result{DotQ8Ref(Q4_0, row, x), goDot(a, b), goDot(a, b)}
	wantAxpy[1], wantAxpy16[1] = goAxpy(y, 0.7, b), goAxpy(y, 0.7, b)
	if simd.Host().Has(simd.AVX2) {
		want[0] = result{dotQ4_0Q8x1(&row[0], &x.Qs[0], &x.D[0], n/32), dotF32AVX2(&a[0], &b[0], n), dotF16AVX2(&a[0], &b16[0], n)}
		wantAxpy[0] = append([]float32(nil), y...)
		axpyF32AVX2(&wantAxpy[0][0], &b[0], 0.7, n)
		wantAxpy16[0] = append([]float32(nil), y...)
		axpyF16AVX2(&wantAxpy16[0][0], &b16[0], 0.7, n)
		if want[0] == want[1] || equalBits(wantAxpy[0], wantAxpy[1]) || equalBits(wantAxpy16[0], wantAxpy16[1]) {
			t.Fatalf("the inputs do not tell the kernels apart: asm %v, go %v", want[0], want[1])
		}
	}
	simdtest.Each(t, func(t *testing.T, l simd.Level) {
		k, name := 0, "the AVX2 assembly"
		if l == simd.None {
			k, name = 1, "plain Go"
		}
		got := result{DotQ8(l, Q4_0, row, x), DotF32(l, a, b), DotF16(l, a, b16)}
		if got != want[k] {
			t.Errorf("DotQ8, DotF32, DotF16 at %s: %v, %s gives %v", l, got, name, want[k])
		}
		ya := append([]float32(nil), y...)
		AxpyF32(l, ya, 0.7, b)
		yh := append([]float32(nil), y...)
		AxpyF16(l, yh, 0.7, b16)
		if !equalBits(ya, wantAxpy[k]) || !equalBits(yh, wantAxpy16[k]) {
			t.Errorf("AxpyF32, AxpyF16 at %s: not what %s gives", l, name)
		}
	})
}

// goDot and goAxpy are DotF32's and AxpyF32's plain loops.
func goDot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func goAxpy(y []float32, a float32, x []float32) []float32 {
	y = append([]float32(nil), y...)
	for i := range y {
		y[i] += a * x[i]
	}
	return y
}

func equalBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}
