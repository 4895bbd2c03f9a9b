package engine

import (
	"fmt"
	"sync"

	"github.com/npuchat/npuchat/engine/quant"
)

// matrix is a weight matrix of Rows×Cols values stored row by row in
// Type's block layout (a GGUF tensor of ne = [Cols, Rows]).
type matrix struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	rowBytes   int
}

func newMatrix(t quant.Type, rows, cols int, data []byte) (matrix, error) {
	rb, err := t.RowBytes(cols)
	if err != nil {
		return matrix{}, err
	}
	if len(data) != rows*rb {
		return matrix{}, fmt.Errorf("%d bytes of %s data for a %d×%d matrix, want %d", len(data), t, rows, cols, rows*rb)
	}
	return matrix{Type: t, Rows: rows, Cols: cols, Data: data, rowBytes: rb}, nil
}

// Row returns row i's bytes.
func (m *matrix) Row(i int) []byte { return m.Data[i*m.rowBytes : (i+1)*m.rowBytes] }

// rowFloats dequantizes row i into dst.
func (m *matrix) rowFloats(i int, dst []float32) { quant.Dequantize(m.Type, m.Row(i), dst[:m.Cols]) }

// matvecRef is the plain reference: out[i] = Σ_j dequant(W)[i][j]·x[j].
func matvecRef(out []float32, w *matrix, x []float32) {
	row := make([]float32, w.Cols)
	for i := 0; i < w.Rows; i++ {
		w.rowFloats(i, row)
		var s float32
		for j, v := range row {
			s += v * x[j]
		}
		out[i] = s
	}
}

// matvec computes out = W·x with the fused kernels, splitting the rows
// across threads goroutines.
func matvec(out []float32, w *matrix, x []float32, threads int) {
	x = x[:w.Cols]
	n := w.Rows
	var sums []float32
	switch w.Type {
	case quant.Q4_1, quant.Q4_1BF16, quant.Q4_K:
		sums = make([]float32, w.Cols/32)
		quant.BlockSums(x, sums)
	}
	if threads <= 1 || n < 64 {
		matvecRows(out, w, x, sums, 0, n)
		return
	}
	chunk := (n + threads - 1) / threads
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			matvecRows(out, w, x, sums, lo, hi)
		}()
	}
	wg.Wait()
}

func matvecRows(out []float32, w *matrix, x, sums []float32, lo, hi int) {
	if sums != nil {
		for i := lo; i < hi; i++ {
			out[i] = quant.DotSums(w.Type, w.Data[i*w.rowBytes:(i+1)*w.rowBytes], x, sums)
		}
		return
	}
	for i := lo; i < hi; i++ {
		out[i] = quant.Dot(w.Type, w.Data[i*w.rowBytes:(i+1)*w.rowBytes], x)
	}
}

// quantizeQ8 re-encodes a float matrix as Q8_0, splitting rows across
// threads. Matrices whose columns are not a multiple of 32 stay as they are.
func quantizeQ8(m matrix, threads int) matrix {
	if m.Type == quant.Q8_0 || m.Cols%32 != 0 || (m.Type != quant.F32 && m.Type != quant.F16 && m.Type != quant.BF16) {
		return m
	}
	rb, _ := quant.Q8_0.RowBytes(m.Cols)
	data := make([]byte, m.Rows*rb)
	var wg sync.WaitGroup
	chunk := (m.Rows + threads - 1) / threads
	for lo := 0; lo < m.Rows; lo += chunk {
		hi := min(lo+chunk, m.Rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, m.Cols)
			for i := lo; i < hi; i++ {
				m.rowFloats(i, row)
				quant.QuantizeQ8_0(row, data[i*rb:(i+1)*rb])
			}
		}()
	}
	wg.Wait()
	q, _ := newMatrix(quant.Q8_0, m.Rows, m.Cols, data)
	return q
}
