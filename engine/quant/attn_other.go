//go:build !amd64

package quant

func attnExp(s *float32, nb int, tail uint64, m float32, sum *float32) { panic("no SIMD") }

func (a *Attn) scoresAsm(sc *AttnScratch, nb, tail, ss int) { panic("no SIMD") }

func (a *Attn) pvAsm(sc *AttnScratch, ss int) { panic("no SIMD") }

func attnExpAVX2(s *float32, nb int, mask *int32, m float32, sum *float32, consts *float32) {
	panic("no SIMD")
}

func (a *Attn) scoresAVX2(sc *AttnScratch, r, nb, ss int) { panic("no SIMD") }

func (a *Attn) pvAVX2(sc *AttnScratch, r, ss int) { panic("no SIMD") }

func swigluAVX512(h, u *float32, n int) { panic("no SIMD") }

func swigluAVX2(h, u *float32, n int, consts *float32) { panic("no SIMD") }
