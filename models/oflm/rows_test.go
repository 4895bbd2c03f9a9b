package oflm

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

func randomMatrix(r *rand.Rand, rows, cols int) []float32 {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestGatherRowsMovesWholeRows: a row gather inside the packed chunks
// gives byte for byte what packing the gathered float rows gives (Q4_1
// quantization is per row, so that is the same Q4_1 blocks), padding
// columns included, for row maps that cross 32-row blocks and repeat rows.
func TestGatherRowsMovesWholeRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name       string
		rows, cols int
		from       func(rows int) []int
	}{
		{"identity", 64, 256, func(n int) []int { return identity(n) }},
		{"reversed, padded columns", 96, 288, func(n int) []int { x := identity(n); slices.Reverse(x); return x }},
		{"shuffled", 128, 512, func(n int) []int {
			x := identity(n)
			r.Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
			return x
		}},
		{"repeated rows", 32, 256, func(n int) []int { return append(append(identity(n), identity(n)...), identity(n)...) }},
		{"llama.cpp rows of head_dim 128, KV ×4", 256, 256, func(n int) []int { return qkRows(2, 128, 4, true) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := randomMatrix(r, c.rows, c.cols)
			src, err := testmodel.PackQ4NX(x, c.cols)
			if err != nil {
				t.Fatal(err)
			}
			from := c.from(c.rows)
			var gathered []float32
			for _, i := range from {
				gathered = append(gathered, x[i*c.cols:(i+1)*c.cols]...)
			}
			want, err := testmodel.PackQ4NX(gathered, c.cols)
			if err != nil {
				t.Fatal(err)
			}
			got := gatherRows(src, c.cols, from)
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("byte %d of %d (chunk %d, offset %d) is %#x, want %#x", i, len(got), i/5120, i%5120, got[i], want[i])
					}
				}
				t.Fatalf("%d bytes, want %d", len(got), len(want))
			}
		})
	}
}

func identity(n int) []int {
	x := make([]int, n)
	for i := range x {
		x[i] = i
	}
	return x
}

// TestQKRowsUndoesLlamaCppPermute: the row map undoes convert_hf_to_gguf's
// permute (testmodel.PermuteQK, written from llama.cpp) and repeats each
// head rep times in a row; the tiled map of the mutation tests differs.
func TestQKRowsUndoesLlamaCppPermute(t *testing.T) {
	for _, c := range []struct{ heads, headDim, rep int }{{2, 16, 1}, {2, 16, 4}, {8, 128, 1}, {2, 128, 4}, {1, 2, 1}} {
		rows := c.heads * c.headDim
		hf := make([]float32, rows) // one column: row i holds i
		for i := range hf {
			hf[i] = float32(i)
		}
		stored := testmodel.PermuteQK(hf, c.heads, c.headDim, 1)
		from := qkRows(c.heads, c.headDim, c.rep, true)
		if len(from) != rows*c.rep {
			t.Fatalf("%+v: %d rows, want %d", c, len(from), rows*c.rep)
		}
		for i, s := range from {
			head, j := i/c.headDim, i%c.headDim
			if want := float32((head/c.rep)*c.headDim + j); stored[s] != want {
				t.Fatalf("%+v: output row %d reads Hugging Face row %v, want %v", c, i, stored[s], want)
			}
		}
		plain := qkRows(c.heads, c.headDim, c.rep, false)
		for i, s := range plain {
			if want := (i/c.headDim/c.rep)*c.headDim + i%c.headDim; s != want {
				t.Fatalf("%+v: unpermuted output row %d reads row %d, want %d", c, i, s, want)
			}
		}
		if c.rep > 1 && c.heads > 1 && slices.Equal(tiledRows(c.heads, c.headDim, c.rep, true), from) {
			t.Errorf("%+v: the tiled map equals the right one", c)
		}
	}
}
