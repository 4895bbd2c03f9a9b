package quant

// avx2PackedFuncs[packedIndex(type)] is the AVX2 many-vector kernel and
// one-vector (decode) kernel for Packed matrices (avx2pack_amd64.s),
// for CPUs with AVX2 but neither AVX-512 nor AVX-VNNI.
var avx2PackedFuncs = [4][2]packedFunc{
	{gemmQ4_0AVX2, gemmQ4_0AVX2x1},
	{gemmQ4_1AVX2, gemmQ4_1AVX2x1},
	{gemmQ4_1BF16AVX2, gemmQ4_1BF16AVX2x1},
	{gemmQ8_0AVX2, gemmQ8_0AVX2x1},
}

// mulQ8Asm is MulQ8 with the assembly kernels fs (a many-vector and a
// one-vector kernel of one type), its arguments checked by the caller.
func (p *Packed) mulQ8Asm(fs *[2]packedFunc, g int, b *Q8Batch, first, n int, out []float32) {
	nb := p.Cols / 32
	f := fs[0]
	if n == 1 {
		f = fs[1] // decode: out is only written
	} else {
		clear(out[:p.TileLen(n)])
	}
	v := &b.Vecs[first]
	w := p.group(g)
	qstride := len(b.qs) / len(b.Vecs)
	f(&w[0], nb, &v.Qs[0], qstride, &v.D[0], &v.Sum[0], &v.S[0], 4*nb, n, &out[0])
	if p.Type == Q4_1 || p.Type == Q4_1BF16 {
		// per vector: 16 dot sums, then 16 minimum sums; in place, each
		// write lands on values already read
		for t := range n {
			for r := range GroupRows {
				out[t*GroupRows+r] = out[2*t*GroupRows+r] + out[(2*t+1)*GroupRows+r]
			}
		}
	}
}
