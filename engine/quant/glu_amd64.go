package quant

// The kernels of glu_amd64.s (their twin is swigluGo).

// swigluAVX512 is SwiGLU on n values (a last partial 16 masked).
//
//go:noescape
func swigluAVX512(h, u *float32, n int)

// swigluAVX2 is SwiGLU on n values, a multiple of 8; consts is
// attnConsts (expf's constants, 8 copies each).
//
//go:noescape
func swigluAVX2(h, u *float32, n int, consts *float32)
