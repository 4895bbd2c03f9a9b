// Package q4nx reads FastFlowLM's model.q4nx weights: a safetensors file
// whose matrices are packed in FLM's NPU chunk layout, and unpacks those
// matrices into ordinary row-major blocks (quant.Q4_1BF16).
//
// The layout was derived from the packing code itself
// (FastFlowLM/FLM_Q4NX_Converter, q4nx/model_converter.py _pack_q4nx,
// q4nx/gguf_tensor.py unpack_q4_1/unpack_q4_0, configs/qwen3.json); the
// derivation is written down in docs/q4nx.md. In short, for the language
// model families (row_block_size 32, col_block_size 256, parallel_size
// 16, group 32):
//
//   - a rows×cols matrix is cut into 32×256 chunks (columns zero-padded
//     to a multiple of 256), chunk n = rowBlock·(paddedCols/256) + colBlock;
//   - each chunk is 5120 bytes: 256 bf16 scales d, 256 bf16 mins m, each
//     indexed [group c (8)][row r (32)], then 4096 bytes of nibbles
//     indexed [row half g (2)][column k (256)][row pair (8)], a byte
//     holding row 16g+2i in its low nibble and row 16g+2i+1 in its high;
//   - a weight is d·q + m with q the unsigned nibble (Q4_1). A tensor
//     converted from Q4_0 instead holds two's-complement nibbles q−8 and
//     all-zero mins; Unpack recognises that and keeps the exact values.
package q4nx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/safetensors"
)

// The converter's q4nx_config for the language families.
const (
	RowBlock   = 32  // rows per chunk (row_block_size)
	ColBlock   = 256 // columns per chunk (col_block_size)
	Parallel   = 16  // rows interleaved per nibble run (parallel_size)
	Group      = 32  // values sharing one scale and min (Q4 group)
	ChunkBytes = 2*RowBlock*(ColBlock/Group)*2 + RowBlock*ColBlock/2
)

const (
	scalesOff = 0
	minsOff   = RowBlock * (ColBlock / Group) * 2 // 512
	nibOff    = 2 * minsOff                       // 1024
)

// PaddedCols is cols rounded up to a whole chunk.
func PaddedCols(cols int) int { return (cols + ColBlock - 1) / ColBlock * ColBlock }

// PackedBytes is the size of a packed rows×cols matrix.
func PackedBytes(rows, cols int) int {
	return rows / RowBlock * PaddedCols(cols) / ColBlock * ChunkBytes
}

// Unpack converts the packed bytes of a rows×cols matrix into row-major
// quant.Q4_1BF16 rows. signed reports that the tensor came from Q4_0
// (two's-complement nibbles, zero mins); its values are kept exact by
// rewriting each block as q' = q xor 8 with m = −8d.
func Unpack(packed []byte, rows, cols int) (out []byte, signed bool, err error) {
	return UnpackThreads(packed, rows, cols, 1)
}

// UnpackThreads is Unpack with the row blocks split across threads
// goroutines.
func UnpackThreads(packed []byte, rows, cols, threads int) (out []byte, signed bool, err error) {
	return UnpackInto(nil, packed, rows, cols, threads)
}

// UnpackInto is UnpackThreads writing into dst's storage when it is large
// enough (dst's contents are overwritten), so that a loader can reuse one
// buffer for every matrix.
func UnpackInto(dst, packed []byte, rows, cols, threads int) (out []byte, signed bool, err error) {
	if rows <= 0 || cols <= 0 || rows%RowBlock != 0 || cols%Group != 0 {
		return nil, false, fmt.Errorf("a %d×%d matrix cannot be Q4NX-packed (rows must be a multiple of %d, columns of %d)", rows, cols, RowBlock, Group)
	}
	if want := PackedBytes(rows, cols); len(packed) != want {
		return nil, false, fmt.Errorf("packed data is %d bytes, a %d×%d matrix needs %d", len(packed), rows, cols, want)
	}
	signed = allMinsZero(packed)
	chunksPerRow := PaddedCols(cols) / ColBlock
	groups := cols / Group
	rowBytes := groups * 20
	if cap(dst) >= rows*rowBytes {
		out = dst[:rows*rowBytes]
	} else {
		out = make([]byte, rows*rowBytes)
	}
	blocks := rows / RowBlock
	threads = max(1, min(threads, blocks))
	if threads == 1 {
		for p := 0; p < blocks; p++ {
			unpackRowBlock(out, packed, p, chunksPerRow, groups, rowBytes, signed)
		}
		return out, signed, nil
	}
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := t; p < blocks; p += threads {
				unpackRowBlock(out, packed, p, chunksPerRow, groups, rowBytes, signed)
			}
		}()
	}
	wg.Wait()
	return out, signed, nil
}

// unpackRowBlock unpacks the chunks of row block p. Rows come in pairs
// (one nibble byte holds rows 2i and 2i+1 of a 16-row half at one column),
// so each pass writes the blocks of two rows.
func unpackRowBlock(out, packed []byte, p, chunksPerRow, groups, rowBytes int, signed bool) {
	const stride = Parallel / 2 // bytes between consecutive columns
	var flip byte
	if signed {
		flip = 0x88
	}
	for q := 0; q < chunksPerRow; q++ {
		chunk := packed[(p*chunksPerRow+q)*ChunkBytes:][:ChunkBytes]
		for c := 0; c < ColBlock/Group; c++ {
			G := q*(ColBlock/Group) + c
			if G >= groups {
				break // zero padding
			}
			for r := 0; r < RowBlock; r += 2 {
				b0 := out[(p*RowBlock+r)*rowBytes+G*20:][:20]
				b1 := out[(p*RowBlock+r+1)*rowBytes+G*20:][:20]
				for i, blk := range [2][]byte{b0, b1} {
					si := (c*RowBlock + r + i) * 2
					d := binary.LittleEndian.Uint16(chunk[scalesOff+si:])
					m := binary.LittleEndian.Uint16(chunk[minsOff+si:])
					if signed {
						m = quant.F32ToBF16(-8 * quant.BF16ToF32(d))
					}
					binary.LittleEndian.PutUint16(blk, d)
					binary.LittleEndian.PutUint16(blk[2:], m)
				}
				nib := chunk[nibOff+(r/Parallel)*(ColBlock*stride)+(r%Parallel)/2+c*Group*stride:]
				for j := 0; j < 16; j++ {
					lo := nib[j*stride] ^ flip      // column j: row r low, row r+1 high
					hi := nib[(j+16)*stride] ^ flip // column j+16
					b0[4+j] = lo&0x0f | hi<<4
					b1[4+j] = lo>>4 | hi&0xf0
				}
			}
		}
	}
}

// allMinsZero reports whether every min in every chunk is ±0, which only a
// Q4_0 source produces.
func allMinsZero(packed []byte) bool {
	for n := 0; n < len(packed)/ChunkBytes; n++ {
		mins := packed[n*ChunkBytes+minsOff : n*ChunkBytes+nibOff]
		for i := 0; i < len(mins); i += 2 {
			if binary.LittleEndian.Uint16(mins[i:])&0x7fff != 0 {
				return false
			}
		}
	}
	return true
}

// File is a parsed model.q4nx.
type File struct {
	*safetensors.File
}

// Parse reads model.q4nx and checks that every tensor is either packed
// (I8 or U8, last dimension ChunkBytes) or a plain float tensor.
func Parse(data []byte) (*File, error) {
	st, err := safetensors.Parse(data)
	if err != nil {
		return nil, err
	}
	if len(st.Tensors) == 0 {
		return nil, errors.New("no tensors")
	}
	for _, name := range st.Names() {
		t := st.Tensors[name]
		switch t.DType {
		case "I8", "U8":
			if len(t.Shape) < 2 || t.Shape[len(t.Shape)-1] != ChunkBytes {
				return nil, fmt.Errorf("tensor %s: packed tensor of shape %v, want [chunks, %d]", name, t.Shape, ChunkBytes)
			}
		case "BF16", "F16", "F32":
		default:
			return nil, fmt.Errorf("tensor %s: dtype %s is not used by Q4NX language models", name, t.DType)
		}
	}
	return &File{st}, nil
}

// IsPacked reports whether a tensor holds Q4NX chunks.
func IsPacked(t safetensors.Tensor) bool { return t.DType == "I8" || t.DType == "U8" }
