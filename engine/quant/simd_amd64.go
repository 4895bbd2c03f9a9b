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
