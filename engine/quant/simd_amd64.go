package quant

import "golang.org/x/sys/cpu"

// simdQ8 selects the AVX2+FMA kernels of simd_amd64.s (every x86-64 CPU
// since Haswell and AMD Zen; F16C, which they use for float16 scales,
// comes with all of them). It is fixed at start-up from CPUID.
var simdQ8 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// SIMD names the kernels DotQ8 and DotF32 use on this CPU: "avx2" or
// "none" (plain Go).
func SIMD() string {
	if simdQ8 {
		return "avx2"
	}
	return "none"
}

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

// vnni selects the AVX-512 VNNI kernels (F, BW, VL and VNNI; Intel since
// Ice Lake / Cascade Lake, AMD since Zen 4), fixed at start-up from CPUID.
var vnni = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI && simdQ8

// HasVNNI reports whether this CPU runs the AVX-512 VNNI kernels of
// Packed.MulQ8.
func HasVNNI() bool { return vnni }

// avxvnni selects the AVX-VNNI kernels of avxvnni_amd64.s (VEX-encoded
// 256-bit VPDPBUSD: Intel Alder Lake and later client cores, AMD Zen 5),
// with AVX2, FMA and F16C, fixed at start-up from CPUID (x/sys/cpu sets
// HasAVXVNNI only when the OS saves the YMM state).
var avxvnni = cpu.X86.HasAVXVNNI && cpu.X86.HasF16C && simdQ8

// HasAVXVNNI reports whether this CPU runs the AVX-VNNI kernels of
// Packed.MulQ8 (PackedAVXVNNI).
func HasAVXVNNI() bool { return avxvnni }

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

// quantizeQ8AVX2 is quantizeQ8AVX512 for AVX2 and F16C (simdQ8).
//
//go:noescape
func quantizeQ8AVX2(x *float32, nb int, qs *int8, d, s *float32, sum *int32)

// quantizeQ8AVX512 is Q8Vector.Quantize's loop for nb blocks (AVX-512F
// with BW/VL, which vnni implies).
//
//go:noescape
func quantizeQ8AVX512(x *float32, nb int, qs *int8, d, s *float32, sum *int32)
