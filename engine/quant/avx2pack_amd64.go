package quant

import "golang.org/x/sys/cpu"

// avx2Packed selects the AVX2 kernels of avx2pack_amd64.s for Packed
// matrices (AVX2, FMA and F16C: every x86-64 CPU since Haswell and AMD
// Zen), fixed at start-up from CPUID.
var avx2Packed = simdQ8 && cpu.X86.HasF16C

// The AVX2 kernels of avx2pack_amd64.s, with the arguments of the
// AVX-512 ones (see Packed.MulQ8).

//go:noescape
func gemmQ4_0AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1BF16AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ8_0AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_0AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ4_1BF16AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

//go:noescape
func gemmQ8_0AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

// HasAVX2 reports whether this CPU runs the AVX2 kernels of
// Packed.MulQ8 (PackedAVX2) and of DotQ8.
func HasAVX2() bool { return avx2Packed }
