package quant

// The ladder's avx2 level (AVX2, FMA and F16C: every x86-64 CPU since
// Haswell and AMD Zen) runs the row kernels here; which level runs is
// the caller's simd.Level, never CPUID (level.go).

// The kernels of simd_amd64.s. nb is the number of 32-value blocks (> 0);
// w points at the row's first block, qs, d, s at a Q8Vector's arrays (x4:
// at the first of four vectors stored back to back, as in a Q8Batch).

//go:noescape
func dotQ8_0Q8x1(w *byte, qs *int8, d *float32, nb int) float32

//go:noescape
func dotQ4_0Q8x1(w *byte, qs *int8, d *float32, nb int) float32

//go:noescape
func dotQ4_1Q8x1(w *byte, qs *int8, d, s *float32, nb int) float32

//go:noescape
func dotQ4_1BF16Q8x1(w *byte, qs *int8, d, s *float32, nb int) float32

//go:noescape
func dotQ8_0Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)

//go:noescape
func dotQ4_0Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)

//go:noescape
func dotQ4_1Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)

//go:noescape
func dotQ4_1BF16Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)

// dotF32AVX2 returns Σ a[i]·b[i] for n values, n a multiple of 8.
//
//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

// axpyF32AVX2 sets y[i] += a·x[i] for n values, n a multiple of 8.
//
//go:noescape
func axpyF32AVX2(y, x *float32, a float32, n int)

// The AVX-512 VNNI kernels of vnni_amd64.s (see Packed.MulQ8): w is a
// group's packed blocks, qs/d/sum/s vector 0's arrays (qstride bytes and
// dstride bytes to the next vector's), out ntok×16 accumulators.

//go:noescape
func gemmQ4_0VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1BF16VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ8_0VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

// The AVX-VNNI kernels of avxvnni_amd64.s, with the arguments of the
// AVX-512 ones.

//go:noescape
func gemmQ4_0AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1BF16AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ8_0AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_0AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1BF16AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ8_0AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_0VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1BF16VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ8_0VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

// dotF16AVX2 returns Σ a[i]·b[i] for n values (b float16), n a multiple of 8.
//
//go:noescape
func dotF16AVX2(a *float32, b *uint16, n int) float32

// axpyF16AVX2 sets y[i] += a·x[i] for n values (x float16), n a multiple of 8.
//
//go:noescape
func axpyF16AVX2(y *float32, x *uint16, a float32, n int)

// quantizeQ8AVX2 is quantizeQ8AVX512 for AVX2 and F16C (the avx2 level).
//
//go:noescape
func quantizeQ8AVX2(x *float32, nb int, qs *int8, d, s *float32, sum *int32)

// quantizeQ8AVX512 is Q8Vector.Quantize's loop for nb blocks (AVX-512F
// with BW/VL: the avx512 level).
//
//go:noescape
func quantizeQ8AVX512(x *float32, nb int, qs *int8, d, s *float32, sum *int32)
