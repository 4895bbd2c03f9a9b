package engine

import "bytes"

// foldKV finds the largest factor r such that, in every layer, each run of
// r consecutive KV heads of k_proj and v_proj (and their biases) holds
// bit-identical weights, and keeps one head per run. A port that repeated
// each KV head r times (repeat_interleave, as MiniCPM5-2B-NPU2 does for
// 2 → 8) computes exactly the same attention as the original, so folding
// restores the original model and a quarter of the KV cache.
func foldKV(m *Model) {
	c := &m.cfg
	for r := c.KVHeads; r > 1; r-- {
		if c.KVHeads%r != 0 || !replicated(m, r) {
			continue
		}
		for i := range m.layers {
			w := &m.layers[i]
			w.wk = keepHeads(w.wk, c.HeadDim, r)
			w.wv = keepHeads(w.wv, c.HeadDim, r)
			w.bk = keepHeadFloats(w.bk, c.HeadDim, r)
			w.bv = keepHeadFloats(w.bv, c.HeadDim, r)
		}
		c.KVHeads /= r
		return
	}
}

// replicated reports whether every run of r consecutive KV heads is
// identical in every layer.
func replicated(m *Model, r int) bool {
	c := &m.cfg
	for i := range m.layers {
		w := &m.layers[i]
		for _, mat := range []*matrix{&w.wk, &w.wv} {
			if mat.Rows != c.KVHeads*c.HeadDim {
				return false
			}
			headBytes := c.HeadDim * mat.rowBytes
			for h := 0; h < c.KVHeads; h++ {
				first := h - h%r
				if h == first {
					continue
				}
				if !bytes.Equal(mat.Data[h*headBytes:(h+1)*headBytes], mat.Data[first*headBytes:(first+1)*headBytes]) {
					return false
				}
			}
		}
		for _, b := range [][]float32{w.bk, w.bv} {
			for h := 0; b != nil && h < c.KVHeads; h++ {
				first := h - h%r
				for j := 0; j < c.HeadDim; j++ {
					if b[h*c.HeadDim+j] != b[first*c.HeadDim+j] {
						return false
					}
				}
			}
		}
	}
	return true
}

func keepHeads(m matrix, headDim, r int) matrix {
	headBytes := headDim * m.rowBytes
	heads := m.Rows / headDim
	data := make([]byte, 0, heads/r*headBytes)
	for h := 0; h < heads; h += r {
		data = append(data, m.Data[h*headBytes:(h+1)*headBytes]...)
	}
	m.Data = data
	m.Rows = heads / r * headDim
	return m
}

func keepHeadFloats(b []float32, headDim, r int) []float32 {
	if b == nil {
		return nil
	}
	var out []float32
	for h := 0; h < len(b)/headDim; h += r {
		out = append(out, b[h*headDim:(h+1)*headDim]...)
	}
	return out
}
