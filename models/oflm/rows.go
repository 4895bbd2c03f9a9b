package oflm

import (
	"encoding/binary"

	"github.com/npuchat/npuchat/engine/q4nx"
)

// Row moves inside Q4NX chunks. A packed rows×cols matrix is cut into
// 32×256 chunks, row-block-major; inside a chunk a row r (0..31) owns
//
//   - scales[c·32 + r] and mins[c·32 + r] (bf16) for its 8 column groups c,
//   - for each of the 256 columns k, one nibble of byte
//     1024 + (r/16)·2048 + k·8 + (r%16)/2: the low nibble for even r, the
//     high nibble for odd r.
//
// (docs/q4nx.md derives this from FLM_Q4NX_Converter's _pack_q4nx.)
// Quantization is per row and per 32-column group, so moving every byte
// and nibble a row owns moves the row exactly: the Q4_1 values are not
// touched.

const (
	minsOff = q4nx.RowBlock * (q4nx.ColBlock / q4nx.Group) * 2 // 512
	nibOff  = 2 * minsOff                                      // 1024
	half    = q4nx.Parallel / 2                                // 8: bytes per column in a 16-row half
)

// gatherRows returns a packed matrix of len(from) rows whose row i is row
// from[i] of the packed rows×cols matrix src. len(from) must be a
// multiple of 32.
func gatherRows(src []byte, cols int, from []int) []byte {
	cpr := q4nx.PaddedCols(cols) / q4nx.ColBlock // chunks per row block
	out := make([]byte, q4nx.PackedBytes(len(from), cols))
	for dr, sr := range from {
		copyRow(out, dr, src, sr, cpr)
	}
	return out
}

// copyRow copies row sr of packed src into row dr of packed dst, both with
// cpr chunks per row block.
func copyRow(dst []byte, dr int, src []byte, sr int, cpr int) {
	const cb = q4nx.ChunkBytes
	sp, sq := sr/q4nx.RowBlock, sr%q4nx.RowBlock
	dp, dq := dr/q4nx.RowBlock, dr%q4nx.RowBlock
	sNib := nibOff + (sq/q4nx.Parallel)*(q4nx.ColBlock*half) + (sq%q4nx.Parallel)/2
	dNib := nibOff + (dq/q4nx.Parallel)*(q4nx.ColBlock*half) + (dq%q4nx.Parallel)/2
	sShift, dShift := uint(sq%2)*4, uint(dq%2)*4
	dMask := byte(0x0f) << dShift
	for q := 0; q < cpr; q++ {
		s := src[(sp*cpr+q)*cb:][:cb]
		d := dst[(dp*cpr+q)*cb:][:cb]
		for c := 0; c < q4nx.ColBlock/q4nx.Group; c++ {
			si, di := (c*q4nx.RowBlock+sq)*2, (c*q4nx.RowBlock+dq)*2
			copy(d[di:di+2], s[si:si+2])                     // scale
			copy(d[minsOff+di:minsOff+di+2], s[minsOff+si:]) // min
		}
		for k := 0; k < q4nx.ColBlock; k++ {
			v := (s[sNib+k*half] >> sShift) & 0x0f
			b := &d[dNib+k*half]
			*b = *b&^dMask | v<<dShift
		}
	}
}

// qkRows returns, for a q_proj or k_proj of heads heads of headDim rows
// stored in llama.cpp's permuted order, the source row of each output row
// when the output holds the rows in Hugging Face order and every head
// repeated rep times in a row (repeat_interleave: head h becomes heads
// h·rep … h·rep+rep−1).
//
// convert_hf_to_gguf's permute puts Hugging Face row h·D + a·D/2 + b
// (a ∈ {0,1}, b < D/2) at h·D + 2b + a; FLM_Q4NX_Converter's llama family
// undoes it with '(g p q) c -> (g q p) c', p = D/2, q = 2. So output
// row a·D/2 + b of a head reads stored row 2b + a. With permuted false
// the rows are taken as they are (only replicated).
func qkRows(heads, headDim, rep int, permuted bool) []int {
	out := make([]int, 0, heads*rep*headDim)
	h2 := headDim / 2
	for h := 0; h < heads; h++ {
		for r := 0; r < rep; r++ {
			for j := 0; j < headDim; j++ {
				src := j
				if permuted {
					src = 2*(j%h2) + j/h2
				}
				out = append(out, h*headDim+src)
			}
		}
	}
	return out
}

// tiledRows is a deliberately wrong replication (heads repeated as a
// whole: 0,1,0,1,… instead of 0,0,…,1,1,…), for the tests that show a
// wrong KV head mapping changes the model.
func tiledRows(heads, headDim, rep int, permuted bool) []int {
	one := qkRows(heads, headDim, 1, permuted)
	out := make([]int, 0, len(one)*rep)
	for r := 0; r < rep; r++ {
		out = append(out, one...)
	}
	return out
}

// allMinsZero reports whether every min of a packed tensor is ±0: what
// the converter writes from a Q4_0 GGUF (two's-complement nibbles, m = 0),
// which FLM's and oflm's kernels read as unsigned nibbles (garbage).
func allMinsZero(chunk []byte) bool {
	for i := minsOff; i < nibOff; i += 2 {
		if binary.LittleEndian.Uint16(chunk[i:])&0x7fff != 0 {
			return false
		}
	}
	return true
}
