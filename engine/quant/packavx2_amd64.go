package quant

// The AVX2 repacking kernels of packavx2_amd64.s: a full group's 16 rows
// starting at src (row r at byte idx[r]), nb blocks into dst.

//go:noescape
func packQ8_0AVX2(src *byte, idx *[16]int32, dst *byte, nb int)

//go:noescape
func packQ4_0AVX2(src *byte, idx *[16]int32, dst *byte, nb int)

//go:noescape
func packQ4_1AVX2(src *byte, idx *[16]int32, dst *byte, nb int)

// packGroupAVX2 is packGroup in AVX2 (the same bytes; the caller runs
// it at the avx2 level and above) for a full group, and reports whether
// it ran (not for the last, partial group, nor rows too long for its
// 32-bit offsets).
func packGroupAVX2(p *Packed, g int, data []byte, rb int) bool {
	if (g+1)*GroupRows > p.Rows || rb > (1<<31-1)/GroupRows {
		return false
	}
	f := packQ8_0AVX2
	switch p.Type {
	case Q4_0:
		f = packQ4_0AVX2
	case Q4_1, Q4_1BF16:
		f = packQ4_1AVX2
	}
	var idx [GroupRows]int32
	for r := range idx {
		idx[r] = int32(r * rb)
	}
	dst := p.group(g)
	f(&data[g*GroupRows*rb], &idx, &dst[0], p.Cols/32)
	return true
}
