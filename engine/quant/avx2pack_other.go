//go:build !amd64

package quant

// avx2Packed is false off amd64.
const avx2Packed = false

func gemmQ4_0AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1BF16AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ8_0AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_0AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1BF16AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ8_0AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}

// HasAVX2 reports whether this CPU runs the AVX2 kernels: never off amd64.
func HasAVX2() bool { return false }
