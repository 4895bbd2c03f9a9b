//go:build !amd64

package quant

// Off amd64 simd.Host has only the none level, so no level that reaches
// these stubs can be resolved (mustHave panics first).

func dotQ8_0Q8x1(w *byte, qs *int8, d *float32, nb int) float32                 { panic("no SIMD") }
func dotQ4_0Q8x1(w *byte, qs *int8, d *float32, nb int) float32                 { panic("no SIMD") }
func dotQ4_1Q8x1(w *byte, qs *int8, d, s *float32, nb int) float32              { panic("no SIMD") }
func dotQ4_1BF16Q8x1(w *byte, qs *int8, d, s *float32, nb int) float32          { panic("no SIMD") }
func dotQ8_0Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)     { panic("no SIMD") }
func dotQ4_0Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)     { panic("no SIMD") }
func dotQ4_1Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)     { panic("no SIMD") }
func dotQ4_1BF16Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32) { panic("no SIMD") }
func dotF32AVX2(a, b *float32, n int) float32                                   { panic("no SIMD") }
func axpyF32AVX2(y, x *float32, a float32, n int)                               { panic("no SIMD") }

func gemmQ4_0VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1BF16VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ8_0VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}

func gemmQ4_0AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1BF16AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ8_0AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_0AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1BF16AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ8_0AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_0VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ4_1BF16VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func gemmQ8_0VNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32) {
	panic("no SIMD")
}
func dotF16AVX2(a *float32, b *uint16, n int) float32                          { panic("no SIMD") }
func axpyF16AVX2(y *float32, x *uint16, a float32, n int)                      { panic("no SIMD") }
func quantizeQ8AVX2(x *float32, nb int, qs *int8, d, s *float32, sum *int32)   { panic("no SIMD") }
func quantizeQ8AVX512(x *float32, nb int, qs *int8, d, s *float32, sum *int32) { panic("no SIMD") }
