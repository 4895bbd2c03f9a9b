package quant

import (
	"math"
	"unsafe"

	"github.com/npuchat/npuchat/engine/simd"
)

// Q8Vector is an activation vector rounded to 8 bits per value in blocks
// of 32, as ggml rounds activations before a quantized matrix product
// (quantize_row_q8_0 and quantize_row_q8_1 of ggml-cpu on x86): per
// block, d = max|x|/127 stored as float16, q = round-half-even(x·127/max).
// The integer dot products of DotQ8 then multiply stored weight blocks by
// q exactly, and scale once per block.
type Q8Vector struct {
	Qs []int8    // the rounded values
	D  []float32 // per block: the scale d, rounded to float16 (as ggml stores it)
	// S is per block float16(d·Σq), the sum ggml's Q8_1 blocks carry for
	// weights with a per-block minimum (Q4_1).
	S []float32
	// Sum is per block Σq exactly, which the packed kernels (Packed) use
	// to take out the offsets they store weights with.
	Sum []int32
}

// QuantizePlain is Quantize at level none (plain Go).
func (v *Q8Vector) QuantizePlain(x []float32) { v.Quantize(simd.None, x) }

// roundings is the rounding loop of each level of the ladder (AVX-VNNI
// has none of its own: AVX2's). All give the same bits.
var roundings = [simd.NumLevels]func(x *float32, nb int, qs *int8, d, s *float32, sum *int32){
	simd.AVX2: quantizeQ8AVX2, simd.AVXVNNI: quantizeQ8AVX2, simd.AVX512: quantizeQ8AVX512,
}

// Quantize rounds x (a whole number of 32-value blocks) into v, reusing
// v's storage, with level l's rounding loop (roundings; the CPU must
// have l: simd.Resolve; a model rounds with its own level's). Every
// level gives the same bits as QuantizePlain.
func (v *Q8Vector) Quantize(l simd.Level, x []float32) {
	n := len(x)
	nb := n / 32
	if cap(v.Qs) < n || cap(v.Sum) < nb {
		v.Qs = make([]int8, n)
		v.D = make([]float32, nb)
		v.S = make([]float32, nb)
		v.Sum = make([]int32, nb)
	}
	v.Qs, v.D, v.S, v.Sum = v.Qs[:n], v.D[:nb], v.S[:nb], v.Sum[:nb]
	mustHave("Q8Vector.Quantize", l)
	switch f := roundings[l]; {
	case nb == 0:
	case f != nil:
		f(&x[0], nb, &v.Qs[0], &v.D[0], &v.S[0], &v.Sum[0])
	default:
		v.quantizeRef(x)
	}
}

// quantizeRef is Quantize in plain Go: the reference the AVX-512 loop is
// and AVX2 loops are tested against, bit for bit.
func (v *Q8Vector) quantizeRef(x []float32) {
	nb := len(x) / 32
	for b := 0; b < nb; b++ {
		xs := x[b*32 : b*32+32]
		qs := v.Qs[b*32 : b*32+32]
		var amax float32
		for _, f := range xs {
			amax = max(amax, abs32(f))
		}
		d := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var sum int32
		for j, f := range xs {
			q := int32(roundEven(f * id))
			qs[j] = int8(q)
			sum += q
		}
		v.D[b] = F16ToF32(F32ToF16(d))
		v.S[b] = F16ToF32(F32ToF16(d * float32(sum)))
		v.Sum[b] = sum
	}
}

// roundEven rounds |f| ≤ 2²² to the nearest integer, ties to even (as
// math.RoundToEven, and as x86's default rounding in ggml's
// _mm256_round_ps): adding 1.5·2²³ leaves no fraction bits in float32.
func roundEven(f float32) float32 {
	const magic = 1.5 * (1 << 23)
	return (f + magic) - magic
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// HasQ8Kernel reports whether DotQ8 computes rows of type t: Q8_0, Q4_0,
// Q4_1 and Q4_1BF16. Other types use Dot with float activations.
func HasQ8Kernel(t Type) bool {
	switch t {
	case Q8_0, Q4_0, Q4_1, Q4_1BF16:
		return true
	}
	return false
}

// DotQ8 returns the dot product of a row of type t (HasQ8Kernel) with the
// quantized vector x, as ggml's ggml_vec_dot_q8_0_q8_0, _q4_0_q8_0 and
// _q4_1_q8_1 compute it: per block an exact integer sum of weight × q,
// times the weight scale × d (plus the weight minimum × S for Q4_1).
// Level l chooses the kernel: the AVX2 one at avx2 and above (avxvnni
// and avx512 have no row kernels of their own: they run theirs on
// Packed matrices), DotQ8Ref at none; both give the same block sums and
// differ only in float summation order. The CPU must have l
// (simd.Resolve).
func DotQ8(l simd.Level, t Type, row []byte, x *Q8Vector) float32 {
	nb := len(x.D)
	mustHave("DotQ8", l)
	if l >= simd.AVX2 && nb > 0 {
		bb := t.BlockBytes()
		_ = row[nb*bb-1]
		switch t {
		case Q8_0:
			return dotQ8_0Q8x1(&row[0], &x.Qs[0], &x.D[0], nb)
		case Q4_0:
			return dotQ4_0Q8x1(&row[0], &x.Qs[0], &x.D[0], nb)
		case Q4_1:
			return dotQ4_1Q8x1(&row[0], &x.Qs[0], &x.D[0], &x.S[0], nb)
		case Q4_1BF16:
			return dotQ4_1BF16Q8x1(&row[0], &x.Qs[0], &x.D[0], &x.S[0], nb)
		}
	}
	return DotQ8Ref(t, row, x)
}

// Q8Batch is several activation vectors rounded as Q8Vector does, stored
// back to back so that DotQ8x4 can multiply one weight row by four of
// them at once (batched prefill).
type Q8Batch struct {
	Vecs []Q8Vector // views into the arrays below, one per vector
	qs   []int8
	d, s []float32
	sum  []int32
}

// Quantize rounds each of xs (n values, a whole number of blocks) into
// b.Vecs with level l's rounding (Q8Vector.Quantize), reusing b's
// storage.
func (b *Q8Batch) Quantize(l simd.Level, xs [][]float32, n int) {
	b.Prepare(len(xs), n)
	for i, x := range xs {
		b.Vecs[i].Quantize(l, x[:n])
	}
}

// Prepare sizes b for count vectors of n values; b.Vecs[i].Quantize can
// then fill each vector, concurrently for different i.
func (b *Q8Batch) Prepare(count, n int) {
	nb := n / 32
	if cap(b.qs) < count*n {
		b.qs = make([]int8, count*n)
		b.d = make([]float32, count*nb)
		b.s = make([]float32, count*nb)
		b.sum = make([]int32, count*nb)
	}
	b.qs, b.d, b.s, b.sum = b.qs[:count*n], b.d[:count*nb], b.s[:count*nb], b.sum[:count*nb]
	b.Vecs = b.Vecs[:0]
	for i := range count {
		b.Vecs = append(b.Vecs, Q8Vector{Qs: b.qs[i*n : (i+1)*n : (i+1)*n],
			D: b.d[i*nb : (i+1)*nb : (i+1)*nb], S: b.s[i*nb : (i+1)*nb : (i+1)*nb],
			Sum: b.sum[i*nb : (i+1)*nb : (i+1)*nb]})
	}
}

// DotQ8x4 sets out[i] = DotQ8(l, t, row, &b.Vecs[first+i]) for i < 4,
// bit for bit, reading and unpacking each weight block once for the four
// vectors (at avx2 and above; at none it is four DotQ8Ref).
func DotQ8x4(l simd.Level, t Type, row []byte, b *Q8Batch, first int, out *[4]float32) {
	v := b.Vecs[first : first+4]
	nb := len(v[0].D)
	mustHave("DotQ8x4", l)
	if l >= simd.AVX2 && nb > 0 {
		_ = row[nb*t.BlockBytes()-1]
		switch t {
		case Q8_0:
			dotQ8_0Q8x4(&row[0], &v[0].Qs[0], &v[0].D[0], &v[0].S[0], nb, out)
			return
		case Q4_0:
			dotQ4_0Q8x4(&row[0], &v[0].Qs[0], &v[0].D[0], &v[0].S[0], nb, out)
			return
		case Q4_1:
			dotQ4_1Q8x4(&row[0], &v[0].Qs[0], &v[0].D[0], &v[0].S[0], nb, out)
			return
		case Q4_1BF16:
			dotQ4_1BF16Q8x4(&row[0], &v[0].Qs[0], &v[0].D[0], &v[0].S[0], nb, out)
			return
		}
	}
	for i := range out {
		out[i] = DotQ8Ref(t, row, &v[i])
	}
}

// DotQ8Ref is the plain-Go DotQ8: the reference the SIMD kernels are
// tested against, and what level none runs.
func DotQ8Ref(t Type, row []byte, x *Q8Vector) float32 {
	// Explicit float32 conversions keep every product and sum a separate
	// rounding (no fused multiply-add), as the packed kernels compute.
	// Q4_1's minimum terms are summed apart and added at the end, as
	// ggml does.
	var sum, mins float32
	for b := range x.D {
		q := x.Qs[b*32 : b*32+32]
		switch t {
		case Q8_0:
			blk := row[b*34 : b*34+34]
			var s int32
			for j := 0; j < 32; j++ {
				s += int32(int8(blk[2+j])) * int32(q[j])
			}
			sum += float32(F16ToF32(le16(blk)) * x.D[b] * float32(s))
		case Q4_0:
			blk := row[b*18 : b*18+18]
			var s int32
			for j := 0; j < 16; j++ {
				s += (int32(blk[2+j]&0x0f) - 8) * int32(q[j])
				s += (int32(blk[2+j]>>4) - 8) * int32(q[j+16])
			}
			sum += float32(F16ToF32(le16(blk)) * x.D[b] * float32(s))
		case Q4_1, Q4_1BF16:
			blk := row[b*20 : b*20+20]
			var s int32
			for j := 0; j < 16; j++ {
				s += int32(blk[4+j]&0x0f) * int32(q[j])
				s += int32(blk[4+j]>>4) * int32(q[j+16])
			}
			d, m := q41Scales(t, blk)
			sum += float32(d * x.D[b] * float32(s))
			mins += float32(m * x.S[b])
		default:
			panic("quant.DotQ8Ref: no integer kernel for " + t.String())
		}
	}
	return sum + mins
}

// DotF32 returns Σ a[i]·b[i] over len(a) float32 values, with level l's
// kernel: AVX2 at avx2 and above, a plain loop at none (the order of the
// float additions differs, so results agree within float32 rounding, not
// bit for bit). The CPU must have l.
func DotF32(l simd.Level, a, b []float32) float32 {
	b = b[:len(a)]
	n := len(a)
	var s float32
	i := 0
	mustHave("DotF32", l)
	if l >= simd.AVX2 && n >= 8 {
		i = n &^ 7
		s = dotF32AVX2(&a[0], &b[0], i)
	}
	for ; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// AxpyF32 sets y[i] += a·x[i] over len(y) values, with level l's kernel
// as DotF32 (at avx2 and above a fused multiply-add: each result may
// differ from y + a·x computed in two roundings by one float32
// rounding).
func AxpyF32(l simd.Level, y []float32, a float32, x []float32) {
	x = x[:len(y)]
	n := len(y)
	i := 0
	mustHave("AxpyF32", l)
	if l >= simd.AVX2 && n >= 8 {
		i = n &^ 7
		axpyF32AVX2(&y[0], &x[0], a, i)
	}
	for ; i < n; i++ {
		y[i] += a * x[i]
	}
}

// DotF32Row is Dot for an F32 row (its bytes), with DotF32 at level l.
func DotF32Row(l simd.Level, row []byte, x []float32) float32 {
	if len(x) == 0 {
		return 0
	}
	_ = row[4*len(x)-1]
	return DotF32(l, unsafe.Slice((*float32)(unsafe.Pointer(&row[0])), len(x)), x)
}

// DotF16 returns Σ a[i]·b[i] over len(a) values, b stored as float16
// (the F16 KV cache), with level l's kernel as DotF32 (summation order as
// DotF32's).
func DotF16(l simd.Level, a []float32, b []uint16) float32 {
	b = b[:len(a)]
	n := len(a)
	var s float32
	i := 0
	mustHave("DotF16", l)
	if l >= simd.AVX2 && n >= 8 {
		i = n &^ 7
		s = dotF16AVX2(&a[0], &b[0], i)
	}
	for ; i < n; i++ {
		s += a[i] * F16ToF32(b[i])
	}
	return s
}

// AxpyF16 sets y[i] += a·x[i] over len(y) values, x stored as float16,
// with level l's kernel (as AxpyF32).
func AxpyF16(l simd.Level, y []float32, a float32, x []uint16) {
	x = x[:len(y)]
	n := len(y)
	i := 0
	mustHave("AxpyF16", l)
	if l >= simd.AVX2 && n >= 8 {
		i = n &^ 7
		axpyF16AVX2(&y[0], &x[0], a, i)
	}
	for ; i < n; i++ {
		y[i] += a * F16ToF32(x[i])
	}
}
