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
