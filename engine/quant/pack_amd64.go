package quant

// The repacking kernels of pack_amd64.s: group rows starting at src (row
// r at byte idx[r]), rows present in mask (bit r), nb blocks into dst.

//go:noescape
func packQ8_0AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)

//go:noescape
func packQ4_0AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)

//go:noescape
func packQ4_1AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)

// packGroupAVX512 is packGroup in AVX-512 (the same bytes; the caller
// runs it at the avx512 level only), and reports whether it ran (not for
// rows too long for its 32-bit offsets).
func packGroupAVX512(p *Packed, g int, data []byte, rb int) bool {
	if rb > (1<<31-1)/GroupRows {
		return false
	}
	f := packQ8_0AVX512
	switch p.Type {
	case Q4_0:
		f = packQ4_0AVX512
	case Q4_1, Q4_1BF16:
		f = packQ4_1AVX512
	}
	rows := min(GroupRows, p.Rows-g*GroupRows)
	var idx [GroupRows]int32
	for r := range rows {
		idx[r] = int32(r * rb)
	}
	dst := p.group(g)
	f(&data[g*GroupRows*rb], &idx, 1<<rows-1, &dst[0], p.Cols/32)
	return true
}
