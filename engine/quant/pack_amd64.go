package quant

// The repacking kernels of pack_amd64.s: group rows starting at src (row
// r at byte idx[r]), rows present in mask (bit r), nb blocks into dst.

//go:noescape
func packQ8_0AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)

//go:noescape
func packQ4_0AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)

//go:noescape
func packQ4_1AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)

// packGroupAVX512 is packGroup in AVX-512 (the same bytes) where the CPU
// has it, and reports whether it ran.
func packGroupAVX512(p *Packed, g int, data []byte, rb int) bool {
	if !vnni || rb > (1<<31-1)/GroupRows {
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
