package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/simd"
)

// matrix is a weight matrix of Rows×Cols values stored row by row in
// Type's block layout (a GGUF tensor of ne = [Cols, Rows]).
type matrix struct {
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	rowBytes   int
	// kern is how products with the matrix compute and simd the level
	// whose kernels they use (the model's), chosen once at load
	// (Model.prepare); packed is its weights rearranged for kernPacked.
	kern   kernel
	simd   simd.Level
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

// product is one matrix of a mulTask and where its results go.
type product struct {
	outs [][]float32
	w    *matrix
}

// maxProducts is how many matrices one mulTask multiplies by the same
// vectors (q, k and v).
const maxProducts = 3

// mulTask is up to three matrices times one batch of vectors,
// outs[t] = W·xs[t] for each, split by rows across a pool in one pass:
// the vectors are rounded to 8 bits once for all of them. Its buffers
// are reused from product to product, so a token allocates nothing.
type mulTask struct {
	prods [maxProducts]product
	n     int // products in use
	// end[i] is one past product i's last unit (row, or 16-row group
	// of a packed matrix), counting the products' units one after the
	// other
	end     [maxProducts]int
	chunk   int // the fewest units a thread takes at a time
	threads int // of the pool the task runs on
	xs      [][]float32
	q8      quant.Q8Batch // xs rounded to 8 bits (integer kernels)
	// round is the level whose loop rounds xs to 8 bits: the matrices'
	// (all roundings give the same bits)
	round simd.Level
	sums  [][]float32 // 32-value block sums of xs (Q4_1, Q4_K float path)
	tiles [][]float32 // per pool part: a packed group's results (kern.packed())
	// next is the first unit no thread has taken yet: threads take
	// chunks of units until none are left, so a thread slowed by other
	// work on the machine takes fewer (each row's result does not depend
	// on which thread computes it). Chunks shrink as the units run out
	// (guided scheduling): large ones first, few atomic operations, and
	// small ones last, so that the threads finish together.
	next atomic.Int64
	glu  gluTask // the SwiGLU between the feed-forward products
}

// gluTask is SwiGLU over a batch of rows, split by ranges of values,
// with the model's kernels (quant.SwiGLU at level l).
type gluTask struct {
	h, u [][]float32
	l    simd.Level
}

func (g *gluTask) part(k, n int) {
	size := len(g.h[0])
	lo, hi := share(k, n, len(g.h)*size)
	for lo < hi {
		t, i := lo/size, lo%size
		e := min(size, i+hi-lo)
		quant.SwiGLU(g.l, g.h[t][i:e], g.u[t][i:e])
		lo += e - i
	}
}

// swiglu sets h[t][i] = silu(h[t][i]) · u[t][i] for every row t, on
// pool pl with level l's kernels (the exp of 6144 values a layer is too
// much to leave to one thread between two products).
func (k *mulTask) swiglu(pl *pool, l simd.Level, h, u [][]float32) {
	k.glu = gluTask{h, u, l}
	pl.run(&k.glu)
	k.glu = gluTask{}
}

// mul sets p.outs[t] = p.w·xs[t] for every product p and vector t, on
// pool pl, with the kernel chosen for each matrix when the model was
// loaded. The matrices all have len(xs[t]) columns.
func (k *mulTask) mul(pl *pool, xs [][]float32, prods ...product) {
	if len(prods) > maxProducts {
		panic("engine: too many products in one task")
	}
	k.n = copy(k.prods[:], prods)
	k.xs = xs
	cols := prods[0].w.Cols
	var q8, sums bool
	k.round = prods[0].w.simd
	units, work := 0, 0
	k.chunk = 0
	for i, p := range prods {
		w := p.w
		if w.Cols != cols || w.simd != k.round {
			panic("engine: products of one task differ in columns or level")
		}
		u := w.Rows
		switch w.kern {
		case kernPacked:
			u = w.packed.Groups()
			q8 = true
		case kernQ8:
			q8 = true
		case kernSums:
			sums = true
		}
		c := 1 // a 16-row group
		if !w.kern.packed() {
			c = 16 // rows
		}
		units += u
		k.end[i] = units
		if k.chunk == 0 || c < k.chunk {
			k.chunk = c
		}
		work += w.Rows * len(xs)
	}
	if q8 {
		k.q8.Prepare(len(xs), cols)
		if len(xs) >= 4 {
			pl.run(quantizeTask{k}) // prefill: round the batch's vectors in parallel
		} else {
			for t, x := range xs {
				k.quantize(t, x[:cols])
			}
		}
		for len(k.tiles) < pl.threads {
			k.tiles = append(k.tiles, nil)
		}
	}
	if sums {
		for len(k.sums) < len(xs) {
			k.sums = append(k.sums, nil)
		}
		for t, x := range xs {
			if cap(k.sums[t]) < cols/32 {
				k.sums[t] = make([]float32, cols/32)
			}
			k.sums[t] = k.sums[t][:cols/32]
			quant.BlockSums(x[:cols], k.sums[t])
		}
	}
	k.next.Store(0)
	k.threads = pl.threads
	if work < 64 {
		k.part(0, 1)
	} else {
		pl.run(k)
	}
	k.prods = [maxProducts]product{}
	k.xs = nil
}

// part takes chunks of units until none are left and computes them for
// every vector: each weight row is read from memory once and used for
// the whole batch. A chunk may span two products.
func (k *mulTask) part(i, _ int) {
	total := k.end[k.n-1]
	for {
		lo := int(k.next.Load())
		if lo >= total {
			return
		}
		hi := min(total, lo+max(k.chunk, (total-lo)/(2*k.threads)))
		if !k.next.CompareAndSwap(int64(lo), int64(hi)) {
			continue // another thread took it
		}
		start := 0
		for p := 0; p < k.n && lo < hi; p++ {
			if lo < k.end[p] {
				e := min(hi, k.end[p])
				if k.prods[p].w.kern.packed() {
					k.groups(i, k.prods[p], lo-start, e-start)
				} else {
					k.rows(k.prods[p], lo-start, e-start)
				}
				lo = e
			}
			start = k.end[p]
		}
	}
}

// groups computes the 16-row groups [lo, hi) of a packed matrix for every
// vector, in tile i's buffer.
func (k *mulTask) groups(i int, p product, lo, hi int) {
	w := p.w
	n := len(p.outs)
	size := w.packed.TileLen(n)
	if cap(k.tiles[i]) < size {
		k.tiles[i] = make([]float32, size)
	}
	tile := k.tiles[i][:size]
	for g := lo; g < hi; g++ {
		w.packed.MulQ8(w.simd, g, &k.q8, 0, n, tile)
		r0 := g * quant.GroupRows
		rows := min(quant.GroupRows, w.Rows-r0)
		for t, out := range p.outs {
			copy(out[r0:r0+rows], tile[t*quant.GroupRows:])
		}
	}
}

// rows computes rows [lo, hi) of p's matrix for every vector, four
// vectors at a time where there is a kernel for that.
func (k *mulTask) rows(p product, lo, hi int) {
	w := p.w
	outs := p.outs
	var four [4]float32
	for r := lo; r < hi; r++ {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		t := 0
		if w.kern == kernQ8 { // the level's row kernels (quant.DotQ8x4, DotQ8)
			for ; t+4 <= len(outs); t += 4 {
				quant.DotQ8x4(w.simd, w.Type, row, &k.q8, t, &four)
				for j, v := range four {
					outs[t+j][r] = v
				}
			}
		}
		for ; t < len(outs); t++ {
			out := outs[t]
			switch {
			case w.kern == kernQ8:
				out[r] = quant.DotQ8(w.simd, w.Type, row, &k.q8.Vecs[t])
			case w.kern == kernSums:
				out[r] = quant.DotSums(w.Type, row, k.xs[t][:w.Cols], k.sums[t])
			case w.kern == kernF32:
				out[r] = quant.DotF32Row(w.simd, row, k.xs[t][:w.Cols])
			default:
				out[r] = quant.Dot(w.Type, row, k.xs[t][:w.Cols])
			}
		}
	}
}

// quantize rounds vector t into k.q8.
func (k *mulTask) quantize(t int, x []float32) {
	k.q8.Vecs[t].Quantize(k.round, x)
}

// quantizeTask rounds a mulTask's vectors to 8 bits, split by vector.
type quantizeTask struct{ k *mulTask }

func (q quantizeTask) part(i, n int) {
	lo, hi := share(i, n, len(q.k.xs))
	cols := q.k.prods[0].w.Cols
	for t := lo; t < hi; t++ {
		q.k.quantize(t, q.k.xs[t][:cols])
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
