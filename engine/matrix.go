package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/npuchat/npuchat/engine/quant"
)

// matrix is a weight matrix of Rows×Cols values stored row by row in
// Type's block layout (a GGUF tensor of ne = [Cols, Rows]).
type matrix struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	rowBytes   int
	// kern is how products with the matrix compute, chosen once at load
	// (Model.prepare); packed is its weights rearranged for kernPacked.
	kern   kernel
	packed *quant.Packed
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

// arith says how a model's matrix products compute.
type arith struct {
	// floatAct multiplies quantized weights by the float32 activations
	// (the engine's exact arithmetic) instead of by activations rounded
	// to 8 bits as llama.cpp does (quant.Q8Vector, quant.DotQ8).
	floatAct bool
}

// mulTask is one matrix times a batch of vectors, outs[t] = W·xs[t],
// split by rows across a pool. Its buffers are reused from product to
// product, so a token allocates nothing.
type mulTask struct {
	w        *matrix
	outs, xs [][]float32
	q8       quant.Q8Batch // xs rounded to 8 bits (integer kernels)
	sums     [][]float32   // 32-value block sums of xs (Q4_1, Q4_K float path)
	tiles    [][]float32   // per pool part: a packed group's results (kernPacked)
	// next is the first unit (row, or 16-row group of a packed matrix)
	// no thread has taken yet: threads take chunks of units until none
	// are left, so a thread slowed by other work on the machine takes
	// fewer (each row's result does not depend on which thread computes
	// it).
	next  atomic.Int64
	units int
	chunk int
}

// mul sets outs[t] = W·xs[t] for every t, on pool p, with the kernel
// chosen for W when the model was loaded.
func (k *mulTask) mul(p *pool, outs [][]float32, w *matrix, xs [][]float32) {
	k.w, k.outs, k.xs = w, outs, xs
	k.units = w.Rows
	switch w.kern {
	case kernPacked, kernQ8AVX2, kernQ8Ref:
		k.q8.Prepare(len(xs), w.Cols)
		if len(xs) >= 4 {
			p.run(quantizeTask{k}) // prefill: round the batch's vectors in parallel
		} else {
			for t, x := range xs {
				k.q8.Vecs[t].Quantize(x[:w.Cols])
			}
		}
		if w.kern == kernPacked {
			k.units = w.packed.Groups()
			for len(k.tiles) < p.threads {
				k.tiles = append(k.tiles, nil)
			}
		}
	case kernSums:
		for len(k.sums) < len(xs) {
			k.sums = append(k.sums, nil)
		}
		for t, x := range xs {
			if cap(k.sums[t]) < w.Cols/32 {
				k.sums[t] = make([]float32, w.Cols/32)
			}
			k.sums[t] = k.sums[t][:w.Cols/32]
			quant.BlockSums(x[:w.Cols], k.sums[t])
		}
	}
	k.next.Store(0)
	k.chunk = max(1, k.units/(16*p.threads))
	if w.kern != kernPacked {
		k.chunk = max(16, k.chunk)
	}
	if w.Rows*len(xs) < 64 {
		k.part(0, 1)
	} else {
		p.run(k)
	}
	k.w, k.outs, k.xs = nil, nil, nil
}

// part takes chunks of units until none are left and computes them for
// every vector: each weight row is read from memory once and used for
// the whole batch.
func (k *mulTask) part(i, _ int) {
	for {
		lo := int(k.next.Add(int64(k.chunk))) - k.chunk
		if lo >= k.units {
			return
		}
		hi := min(lo+k.chunk, k.units)
		if k.w.kern == kernPacked {
			k.groups(i, lo, hi)
		} else {
			k.rows(lo, hi)
		}
	}
}

// groups computes the 16-row groups [lo, hi) of a packed matrix for every
// vector, in tile i's buffer.
func (k *mulTask) groups(i, lo, hi int) {
	n := len(k.outs)
	size := k.w.packed.TileLen(n)
	if cap(k.tiles[i]) < size {
		k.tiles[i] = make([]float32, size)
	}
	tile := k.tiles[i][:size]
	for g := lo; g < hi; g++ {
		k.w.packed.MulQ8(true, g, &k.q8, 0, n, tile)
		r0 := g * quant.GroupRows
		rows := min(quant.GroupRows, k.w.Rows-r0)
		for t, out := range k.outs {
			copy(out[r0:r0+rows], tile[t*quant.GroupRows:])
		}
	}
}

// rows computes rows [lo, hi) for every vector, four vectors at a time
// where there is a kernel for that.
func (k *mulTask) rows(lo, hi int) {
	w := k.w
	var four [4]float32
	for r := lo; r < hi; r++ {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		t := 0
		if w.kern == kernQ8AVX2 {
			for ; t+4 <= len(k.outs); t += 4 {
				quant.DotQ8x4(w.Type, row, &k.q8, t, &four)
				for j, v := range four {
					k.outs[t+j][r] = v
				}
			}
		}
		for ; t < len(k.outs); t++ {
			out := k.outs[t]
			switch w.kern {
			case kernQ8AVX2:
				out[r] = quant.DotQ8(w.Type, row, &k.q8.Vecs[t])
			case kernQ8Ref:
				out[r] = quant.DotQ8Ref(w.Type, row, &k.q8.Vecs[t])
			case kernSums:
				out[r] = quant.DotSums(w.Type, row, k.xs[t][:w.Cols], k.sums[t])
			case kernF32:
				out[r] = quant.DotF32Row(row, k.xs[t][:w.Cols])
			default:
				out[r] = quant.Dot(w.Type, row, k.xs[t][:w.Cols])
			}
		}
	}
}

// quantizeTask rounds a mulTask's vectors to 8 bits, split by vector.
type quantizeTask struct{ k *mulTask }

func (q quantizeTask) part(i, n int) {
	lo, hi := share(i, n, len(q.k.xs))
	for t := lo; t < hi; t++ {
		q.k.q8.Vecs[t].Quantize(q.k.xs[t][:q.k.w.Cols])
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
