package quant

import "math"

// The kernels of attn_amd64.s (see their twins in attn.go). Strides are
// in bytes.

//go:noescape
func attnScores8F32(qt *float32, hd int, k *float32, kstride int, nb int, tail uint64, scale float32, s *float32, sstride int, mx *float32)

//go:noescape
func attnScores8F16(qt *float32, hd int, k *uint16, kstride int, nb int, tail uint64, scale float32, s *float32, sstride int, mx *float32)

//go:noescape
func attnScores8Q8(qt *float32, hd int, k *int8, kstride int, nb int, tail uint64, scale float32, s *float32, sstride int, mx *float32, d *uint16, dstride int)

//go:noescape
func attnPV8x32Q8(p *float32, pstride int, n int, v *int8, vstride int, hd int, o *float32, d *uint16, dstride int)

//go:noescape
func attnScores4Q8AVX2(qt *float32, hd int, k *int8, kstride int, nb int, mask *int32, scale float32, s *float32, sstride int, mx *float32, d *uint16, dstride int)

//go:noescape
func attnPV4Q8AVX2(p *float32, pstride int, n int, v *int8, vstride int, hd int, o *float32, d *uint16, dstride int)

//go:noescape
func attnExp(s *float32, nb int, tail uint64, m float32, sum *float32)

//go:noescape
func attnPV8F32(p *float32, pstride int, n int, v *float32, vstride int, hd int, o *float32)

//go:noescape
func attnPV8x32F32(p *float32, pstride int, n int, v *float32, vstride int, hd int, o *float32)

//go:noescape
func attnPV8x32F16(p *float32, pstride int, n int, v *uint16, vstride int, hd int, o *float32)

//go:noescape
func attnPV8F16(p *float32, pstride int, n int, v *uint16, vstride int, hd int, o *float32)

// scoresAsm is scoresGo for all 8 rows with attnScores8, plus the lane
// maxima of the valid positions in sc.mx.
func (a *Attn) scoresAsm(sc *AttnScratch, nb, tail, ss int) {
	hd := a.HeadDim
	mask := uint64(1)<<tail - 1
	if a.K8 != nil {
		_ = a.K8[(nb-1)*a.KStride+hd*AttnBlock-1]
		_ = a.KD[(nb-1)*a.KDStride+hd/KVBlock8*AttnBlock-1]
		attnScores8Q8(&sc.qt[0], hd, &a.K8[0], a.KStride, nb, mask, a.Scale, &sc.s[0], 4*ss, &sc.mx[0], &a.KD[0], 2*a.KDStride)
		return
	}
	if a.K16 != nil {
		_ = a.K16[(nb-1)*a.KStride+hd*AttnBlock-1]
		attnScores8F16(&sc.qt[0], hd, &a.K16[0], 2*a.KStride, nb, mask, a.Scale, &sc.s[0], 4*ss, &sc.mx[0])
		return
	}
	_ = a.K[(nb-1)*a.KStride+hd*AttnBlock-1]
	attnScores8F32(&sc.qt[0], hd, &a.K[0], 4*a.KStride, nb, mask, a.Scale, &sc.s[0], 4*ss, &sc.mx[0])
}

// pvAsm is pvGo for all 8 rows with attnPV8 (32 dimensions at a time
// when HeadDim allows, else 16).
func (a *Attn) pvAsm(sc *AttnScratch, ss int) {
	hd := a.HeadDim
	if a.V8 != nil { // HeadDim a multiple of 32 (Run)
		_ = a.V8[(a.N-1)*a.VStride+hd-1]
		_ = a.VD[(a.N-1)*a.VDStride+hd/KVBlock8-1]
		attnPV8x32Q8(&sc.s[0], 4*ss, a.N, &a.V8[0], a.VStride, hd, &sc.o[0], &a.VD[0], 2*a.VDStride)
		return
	}
	if a.V16 != nil {
		_ = a.V16[(a.N-1)*a.VStride+hd-1]
		if hd%32 == 0 {
			attnPV8x32F16(&sc.s[0], 4*ss, a.N, &a.V16[0], 2*a.VStride, hd, &sc.o[0])
			return
		}
		attnPV8F16(&sc.s[0], 4*ss, a.N, &a.V16[0], 2*a.VStride, hd, &sc.o[0])
		return
	}
	_ = a.V[(a.N-1)*a.VStride+hd-1]
	if hd%32 == 0 {
		attnPV8x32F32(&sc.s[0], 4*ss, a.N, &a.V[0], 4*a.VStride, hd, &sc.o[0])
		return
	}
	attnPV8F32(&sc.s[0], 4*ss, a.N, &a.V[0], 4*a.VStride, hd, &sc.o[0])
}

//go:noescape
func attnScores4F32AVX2(qt *float32, hd int, k *float32, kstride int, nb int, mask *int32, scale float32, s *float32, sstride int, mx *float32)

//go:noescape
func attnScores4F16AVX2(qt *float32, hd int, k *uint16, kstride int, nb int, mask *int32, scale float32, s *float32, sstride int, mx *float32)

//go:noescape
func attnExpAVX2(s *float32, nb int, mask *int32, m float32, sum *float32, consts *float32)

//go:noescape
func attnPV4F32AVX2(p *float32, pstride int, n int, v *float32, vstride int, hd int, o *float32)

//go:noescape
func attnPV4F16AVX2(p *float32, pstride int, n int, v *uint16, vstride int, hd int, o *float32)

// scoresAVX2 is scoresGo for the first r rows (rounded up to 4) with
// attnScores4…AVX2, plus the lane maxima of the valid positions in sc.mx.
func (a *Attn) scoresAVX2(sc *AttnScratch, r, nb, ss int) {
	hd := a.HeadDim
	for i := range sc.mx {
		sc.mx[i] = float32(math.Inf(-1))
	}
	switch {
	case a.K8 != nil:
		_ = a.K8[(nb-1)*a.KStride+hd*AttnBlock-1]
		_ = a.KD[(nb-1)*a.KDStride+hd/KVBlock8*AttnBlock-1]
	case a.K16 != nil:
		_ = a.K16[(nb-1)*a.KStride+hd*AttnBlock-1]
	default:
		_ = a.K[(nb-1)*a.KStride+hd*AttnBlock-1]
	}
	for h := 0; h < r; h += 4 {
		if a.K8 != nil {
			attnScores4Q8AVX2(&sc.qt[h], hd, &a.K8[0], a.KStride, nb, &sc.mask[0], a.Scale, &sc.s[h*ss], 4*ss, &sc.mx[h*AttnBlock], &a.KD[0], 2*a.KDStride)
		} else if a.K16 != nil {
			attnScores4F16AVX2(&sc.qt[h], hd, &a.K16[0], 2*a.KStride, nb, &sc.mask[0], a.Scale, &sc.s[h*ss], 4*ss, &sc.mx[h*AttnBlock])
		} else {
			attnScores4F32AVX2(&sc.qt[h], hd, &a.K[0], 4*a.KStride, nb, &sc.mask[0], a.Scale, &sc.s[h*ss], 4*ss, &sc.mx[h*AttnBlock])
		}
	}
}

// pvAVX2 is pvGo for the first r rows (rounded up to 4) with attnPV4…AVX2.
func (a *Attn) pvAVX2(sc *AttnScratch, r, ss int) {
	hd := a.HeadDim
	switch {
	case a.V8 != nil:
		_ = a.V8[(a.N-1)*a.VStride+hd-1]
		_ = a.VD[(a.N-1)*a.VDStride+hd/KVBlock8-1]
	case a.V16 != nil:
		_ = a.V16[(a.N-1)*a.VStride+hd-1]
	default:
		_ = a.V[(a.N-1)*a.VStride+hd-1]
	}
	for h := 0; h < r; h += 4 {
		if a.V8 != nil {
			attnPV4Q8AVX2(&sc.s[h*ss], 4*ss, a.N, &a.V8[0], a.VStride, hd, &sc.o[h*hd], &a.VD[0], 2*a.VDStride)
		} else if a.V16 != nil {
			attnPV4F16AVX2(&sc.s[h*ss], 4*ss, a.N, &a.V16[0], 2*a.VStride, hd, &sc.o[h*hd])
		} else {
			attnPV4F32AVX2(&sc.s[h*ss], 4*ss, a.N, &a.V[0], 4*a.VStride, hd, &sc.o[h*hd])
		}
	}
}
