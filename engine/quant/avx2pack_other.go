//go:build !amd64

package quant

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
