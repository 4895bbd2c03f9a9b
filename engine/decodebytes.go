package engine

// DecodeBytes is how many bytes of weights one decoded token reads:
// every product matrix (the output matrix included) as its kernels read
// it, packed or as stored. The token embedding's one row, the norms and
// the KV cache are left out. scripts/bench divides decode tok/s times
// this by the machine's read bandwidth: the memory ceiling.
func (m *Model) DecodeBytes() int64 {
	n := matrixBytes(&m.output)
	for i := range m.layers {
		w := &m.layers[i]
		for _, mat := range []*matrix{&w.wq, &w.wk, &w.wv, &w.wo, &w.gate, &w.up, &w.down} {
			n += matrixBytes(mat)
		}
	}
	return n
}

// matrixBytes is the size of m's weights as its kernel reads them.
func matrixBytes(m *matrix) int64 {
	if m.packed != nil {
		return int64(len(m.packed.Data))
	}
	return int64(len(m.Data))
}

// PrefillMACs is how many multiply-adds one prompt token costs in the
// layers' product matrices (rows × columns of each: int8 by int8 in the
// quantized kernels). The output matrix is left out (a prompt's logits
// are computed for its last token only), and so are attention's scores
// (small beside the matrices at the bench's prompt lengths). scripts/bench
// divides prefill tok/s times this by tools/dotpeak's int8 peak: the
// arithmetic ceiling, as DecodeBytes gives the memory ceiling.
func (m *Model) PrefillMACs() int64 {
	var n int64
	for i := range m.layers {
		w := &m.layers[i]
		for _, mat := range []*matrix{&w.wq, &w.wk, &w.wv, &w.wo, &w.gate, &w.up, &w.down} {
			n += int64(mat.Rows) * int64(mat.Cols)
		}
	}
	return n
}
