package engine

import (
	"bytes"

	"github.com/npuchat/npuchat/engine/quant"
)

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
			data, headBytes, ok := mat.heads(c.HeadDim)
			if !ok {
				return false
			}
			for h := 0; h < c.KVHeads; h++ {
				first := h - h%r
				if h == first {
					continue
				}
				if !bytes.Equal(data[h*headBytes:(h+1)*headBytes], data[first*headBytes:(first+1)*headBytes]) {
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

// heads returns the bytes holding m's rows and the size of one head's
// rows in them: m.Data, or the packed groups when m is packed (whole
// groups per head only: headDim a multiple of 16).
func (m *matrix) heads(headDim int) (data []byte, headBytes int, ok bool) {
	if m.packed == nil {
		return m.Data, headDim * m.rowBytes, true
	}
	if headDim%quant.GroupRows != 0 {
		return nil, 0, false
	}
	return m.packed.Data, headDim / quant.GroupRows * m.packed.GroupBytes(), true
}

func keepHeads(m matrix, headDim, r int) matrix {
	src, headBytes, _ := m.heads(headDim)
	heads := m.Rows / headDim
	data := make([]byte, 0, heads/r*headBytes)
	for h := 0; h < heads; h += r {
		data = append(data, src[h*headBytes:(h+1)*headBytes]...)
	}
	m.Rows = heads / r * headDim
	if m.packed != nil {
		m.packed, _ = quant.NewPacked(m.Type, m.Rows, m.Cols, data) // whole groups: the size is right
		return m
	}
	m.Data = data
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
