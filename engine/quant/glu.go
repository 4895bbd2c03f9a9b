package quant

import (
	"math"

	"github.com/npuchat/npuchat/engine/simd"
)

// SwiGLU sets h[i] = silu(h[i]) · u[i] (len(u) ≥ len(h)): the gate of a
// feed-forward layer, with level l's kernels (the CPU must have l:
// simd.Resolve). Every level computes the same bits as the plain-Go
// twin (swigluGo): silu(x) = x / (1 + e) for x ≥ 0 and x·e / (1 + e) for
// x < 0, e = expf(−|x|), so that exp's argument is never positive (expf
// is the attention kernels' Cephes exp, a couple of ulps from e^x; ggml
// too computes SiLU with an approximate exp), in float32 operations each
// rounded as they come (no fused multiply-add), e taken as 0 where −|x|
// is below expf's range. Vectorized, it replaced float64 math.Exp,
// which was 3-4 % of decode.
func SwiGLU(l simd.Level, h, u []float32) {
	u = u[:len(h)]
	mustHave("SwiGLU", l)
	n := 0
	switch {
	case len(h) == 0:
		return
	case l >= simd.AVX512:
		swigluAVX512(&h[0], &u[0], len(h))
		return
	case l >= simd.AVX2:
		n = len(h) &^ 7
		if n > 0 {
			swigluAVX2(&h[0], &u[0], n, &attnConsts[0])
		}
	}
	swigluGo(h[n:], u[n:])
}

// swigluGo is the kernels' twin.
func swigluGo(h, u []float32) {
	u = u[:len(h)]
	for i, x := range h {
		h[i] = float32(silu(x) * u[i])
	}
}

// silu is x·σ(x) in the kernels' operations (−|x| by setting the sign
// bit, as they do). Below expLo e^−|x| is under float32's normal range,
// where expf would stop at e^expLo: e is 0 there, so that silu(x) is
// −0 for very negative x and x for very large x.
func silu(x float32) float32 {
	a := math.Float32frombits(math.Float32bits(x) | 1<<31)
	e := expf(a)
	if a < expLo {
		e = 0
	}
	num := x
	if x < 0 {
		num = float32(x * e)
	}
	return num / float32(1+e)
}
