package quant

// The AVX2 kernels of avx2pack_amd64.s are the avx2 level's packed
// kernels (packedFuncs; AVX2, FMA and F16C: every x86-64 CPU since
// Haswell and AMD Zen).

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
