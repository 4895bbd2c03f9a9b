package testmodel

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// Q4NX packing parameters of FastFlowLM's converter (configs/qwen3.json
// "q4nx_config": row_block_size 32, col_block_size 256, parallel_size 16,
// keep_block_in_2D false).
const (
	Q4NXRowBlock  = 32
	Q4NXColBlock  = 256
	Q4NXParallel  = 16
	Q4NXChunkSize = 2*Q4NXRowBlock*(Q4NXColBlock/QK)*2 + Q4NXRowBlock*Q4NXColBlock/2 // 5120 bytes
)

// FLMVersion is the flm_version written into FLM config.json files, the
// one the MiniCPM5 NPU port's config carries.
const FLMVersion = "0.9.22"

// FLMOptions are the MiniCPM5 NPU port's transformations, applied before
// the weights are written.
type FLMOptions struct {
	// ReplicateKV repeats every KV head this many times (0 or 1: no).
	ReplicateKV int
	// InjectUnitQKNorm adds q_norm and k_norm weights of 1 to every layer.
	InjectUnitQKNorm bool
	// LlamaRows stores q_proj and k_proj rows in llama.cpp's permuted
	// order (PermuteQK), as the converter's qwen3 family leaves them when
	// its input is a llama-architecture GGUF; a reader must then apply
	// interleaved RoPE. By default the rows are in Hugging Face order, as
	// from a qwen3-architecture GGUF (or the llama family, which
	// un-permutes them).
	LlamaRows bool
	// Unquantized stores every matrix as a BF16 [rows, cols] tensor, as
	// the upstream converter does when its input GGUF holds F32, F16 or
	// BF16 matrices (GGUFTensor.unpack returns one tensor and _pack_q4nx
	// returns it as bfloat16).
	Unquantized bool
}

// ForFLM returns the weights WriteFLM stores, before quantization: w with
// opts applied.
func (w *Weights) ForFLM(opts FLMOptions) (*Weights, error) {
	if w.Shape.Arch == ArchMiniCPM {
		return nil, fmt.Errorf("flm: FastFlowLM has no minicpm (muP) family")
	}
	var err error
	c := w
	if opts.ReplicateKV > 1 {
		if c, err = c.ReplicateKV(opts.ReplicateKV); err != nil {
			return nil, err
		}
	}
	if opts.InjectUnitQKNorm && !c.Shape.QKNorm {
		if c, err = c.WithUnitQKNorm(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WriteFLM writes w as a FastFlowLM model folder: config.json in the
// port's form (Qwen3ForCausalLM, model_type qwen3, flm_version),
// tokenizer.json, tokenizer_config.json and model.q4nx.
//
// model.q4nx is what FLM_Q4NX_Converter's qwen3 converter makes from a
// GGUF whose matrices are Q4_1: a safetensors file with Hugging Face
// names; model.embed_tokens.weight in BF16 (unquantized); norms in BF16;
// every matrix, and lm_head.weight (the embedding again when the model is
// tied), quantized Q4_1 as ggml does and packed by PackQ4NX into int8
// [chunks, 5120]. Q/K rows are in Hugging Face order (see
// FLMOptions.LlamaRows). One simplification: the converter stores the
// embedding as bfloat16 of the GGUF's token_embd after dequantization, so
// from an all-Q4_1 GGUF it would hold Q4_1-rounded values; here it holds
// the exact weights (as from a GGUF with a BF16 token_embd and Q4_1
// matrices), which only changes the numbers, not the format.
func WriteFLM(dir string, w *Weights, opts FLMOptions) error {
	m, err := w.ForFLM(opts)
	if err != nil {
		return fmt.Errorf("write flm %s: %w", dir, err)
	}
	if err := m.Shape.Validate(); err != nil {
		return fmt.Errorf("write flm %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write flm: %w", err)
	}
	s := m.Shape
	var tensors []stTensor
	addFloat := func(name string, x []float32, shape ...int) {
		if err != nil {
			return
		}
		var t stTensor
		t, err = floatTensor(name, x, shape, BF16)
		tensors = append(tensors, t)
	}
	addQ := func(name string, x []float32, rowLen int) {
		if err != nil {
			return
		}
		if opts.Unquantized {
			addFloat(name, x, len(x)/rowLen, rowLen)
			return
		}
		var b []byte
		if b, err = PackQ4NX(x, rowLen); err != nil {
			err = fmt.Errorf("tensor %s: %w", name, err)
			return
		}
		tensors = append(tensors, stTensor{name: name, dtype: "I8", shape: []int{len(b) / Q4NXChunkSize, Q4NXChunkSize}, data: b})
	}
	addFloat("model.embed_tokens.weight", m.Embed, s.Vocab, s.Hidden)
	out := m.Output
	if out == nil {
		out = m.Embed
	}
	addQ("lm_head.weight", out, s.Hidden)
	addFloat("model.norm.weight", m.OutputNorm, s.Hidden)
	for i, L := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		addFloat(p+"input_layernorm.weight", L.AttnNorm, s.Hidden)
		q, k := L.Q, L.K
		if opts.LlamaRows {
			q = PermuteQK(q, s.Heads, s.HeadDim, s.Hidden)
			k = PermuteQK(k, s.KVHeads, s.HeadDim, s.Hidden)
		}
		addQ(p+"self_attn.q_proj.weight", q, s.Hidden)
		addQ(p+"self_attn.k_proj.weight", k, s.Hidden)
		addQ(p+"self_attn.v_proj.weight", L.V, s.Hidden)
		addQ(p+"self_attn.o_proj.weight", L.O, s.Heads*s.HeadDim)
		if L.QNorm != nil {
			addFloat(p+"self_attn.q_norm.weight", L.QNorm, s.HeadDim)
			addFloat(p+"self_attn.k_norm.weight", L.KNorm, s.HeadDim)
		}
		addFloat(p+"post_attention_layernorm.weight", L.FFNNorm, s.Hidden)
		addQ(p+"mlp.gate_proj.weight", L.Gate, s.Hidden)
		addQ(p+"mlp.up_proj.weight", L.Up, s.Hidden)
		addQ(p+"mlp.down_proj.weight", L.Down, s.FFN)
	}
	if err != nil {
		return fmt.Errorf("write flm %s: %w", dir, err)
	}
	cfg := hfConfig(m, BF16)
	cfg["architectures"], cfg["model_type"] = []string{"Qwen3ForCausalLM"}, "qwen3"
	cfg["flm_version"] = FLMVersion
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeTokenizerFiles(dir, m.Vocab); err != nil {
		return err
	}
	return writeSafetensors(filepath.Join(dir, "model.q4nx"), tensors, nil)
}

// q4nxBlocks quantizes row-major x (rows of rowLen) to Q4_1 as ggml's
// quantize_row_q4_1_ref does and returns, per row and 32-column group, the
// scale and min as the converter stores them (float16 converted to
// bfloat16) and the unsigned nibble of every element.
func q4nxBlocks(x []float32, rowLen int) (d, m []uint16, q []uint8) {
	n := len(x) / QK
	d, m, q = make([]uint16, n), make([]uint16, n), make([]uint8, 0, len(x))
	for b := 0; b < n; b++ {
		d16, m16, qb := quantizeQ4_1(x[b*QK : (b+1)*QK])
		d[b], m[b] = f32ToBF16(f16ToF32(d16)), f32ToBF16(f16ToF32(m16))
		q = append(q, qb...)
	}
	return d, m, q
}

// PackQ4NX quantizes a row-major matrix (rows of rowLen) to Q4_1 and packs
// it as FLM_Q4NX_Converter's _pack_q4nx does with keep_block_in_2D false.
// Columns are zero-padded to a multiple of 256; rows must be a multiple of
// 32. The result is chunks of 5120 bytes, one per 32x256 block, ordered
// row-block-major (chunk = rowBlock*colBlocks + colBlock). Each chunk holds
//
//   - 256 bfloat16 scales, index c*32+r (column group c of 8, row r of 32),
//   - 256 bfloat16 mins in the same order,
//   - 4096 bytes of nibbles, index g*2048 + col*8 + k (row group g of 2,
//     column col of 256, k of 8), the byte holding row g*16+2k in its low
//     nibble and row g*16+2k+1 in its high nibble.
func PackQ4NX(x []float32, rowLen int) ([]byte, error) {
	if rowLen%QK != 0 || len(x)%rowLen != 0 {
		return nil, fmt.Errorf("q4nx: %d values are not rows of a multiple of %d", len(x), QK)
	}
	rows := len(x) / rowLen
	if rows%Q4NXRowBlock != 0 {
		return nil, fmt.Errorf("q4nx: %d rows are not a multiple of %d", rows, Q4NXRowBlock)
	}
	d, m, q := q4nxBlocks(x, rowLen)
	groups := rowLen / QK
	padCols := (rowLen + Q4NXColBlock - 1) / Q4NXColBlock * Q4NXColBlock
	colBlocks := padCols / Q4NXColBlock
	get := func(r, c int) (uint8, bool) { // nibble, present (not padding)
		if c >= rowLen {
			return 0, false
		}
		return q[r*rowLen+c], true
	}
	scale := func(t []uint16, r, g int) uint16 {
		if g >= groups {
			return 0
		}
		return t[r*groups+g]
	}
	out := make([]byte, 0, rows/Q4NXRowBlock*colBlocks*Q4NXChunkSize)
	le := binary.LittleEndian
	const gpc = Q4NXColBlock / QK // groups per chunk: 8
	for p := 0; p < rows/Q4NXRowBlock; p++ {
		for cb := 0; cb < colBlocks; cb++ {
			for _, t := range [][]uint16{d, m} {
				for c := 0; c < gpc; c++ {
					for r := 0; r < Q4NXRowBlock; r++ {
						out = le.AppendUint16(out, scale(t, p*Q4NXRowBlock+r, cb*gpc+c))
					}
				}
			}
			for g := 0; g < Q4NXRowBlock/Q4NXParallel; g++ {
				for col := 0; col < Q4NXColBlock; col++ {
					for k := 0; k < Q4NXParallel/2; k++ {
						row := p*Q4NXRowBlock + g*Q4NXParallel + 2*k
						lo, _ := get(row, cb*Q4NXColBlock+col)
						hi, _ := get(row+1, cb*Q4NXColBlock+col)
						out = append(out, lo&0x0f|hi<<4)
					}
				}
			}
		}
	}
	return out, nil
}

// UnpackQ4NX decodes PackQ4NX's layout back to a row-major matrix of rows x
// rowLen values w = d*q + m, computed in float32 from the bfloat16 d and m.
func UnpackQ4NX(b []byte, rows, rowLen int) ([]float32, error) {
	padCols := (rowLen + Q4NXColBlock - 1) / Q4NXColBlock * Q4NXColBlock
	colBlocks := padCols / Q4NXColBlock
	if rows%Q4NXRowBlock != 0 || len(b) != rows/Q4NXRowBlock*colBlocks*Q4NXChunkSize {
		return nil, fmt.Errorf("q4nx: %d bytes do not hold %dx%d", len(b), rows, rowLen)
	}
	out := make([]float32, rows*rowLen)
	le := binary.LittleEndian
	const gpc = Q4NXColBlock / QK
	for p := 0; p < rows/Q4NXRowBlock; p++ {
		for cb := 0; cb < colBlocks; cb++ {
			chunk := b[(p*colBlocks+cb)*Q4NXChunkSize:]
			nib := chunk[2*2*gpc*Q4NXRowBlock:]
			for r := 0; r < Q4NXRowBlock; r++ {
				row := p*Q4NXRowBlock + r
				g, k, hi := r/Q4NXParallel, (r%Q4NXParallel)/2, r%2 == 1
				for col := 0; col < Q4NXColBlock; col++ {
					c := cb*Q4NXColBlock + col
					if c >= rowLen {
						break
					}
					si := (col/QK)*Q4NXRowBlock + r
					d := bf16ToF32(le.Uint16(chunk[2*si:]))
					m := bf16ToF32(le.Uint16(chunk[2*gpc*Q4NXRowBlock+2*si:]))
					v := nib[g*Q4NXColBlock*Q4NXParallel/2+col*Q4NXParallel/2+k]
					if hi {
						v >>= 4
					}
					out[row*rowLen+c] = float32(v&0x0f)*d + m
				}
			}
		}
	}
	return out, nil
}

// FLMEquivalent returns the weights a correct reader of WriteFLM(w, opts)'s
// model.q4nx computes with: opts applied, every matrix replaced by its
// dequantized q4nx value (d*q + m with bfloat16 d and m), the output
// projection untied (lm_head is stored quantized even for a tied model,
// while the embedding stays exact), Q/K rows in Hugging Face order
// whatever opts.LlamaRows says (quantization is per row, so the order does
// not change the values). Written as an F32 GGUF it gives llama.cpp the
// same model the q4nx holds.
func (w *Weights) FLMEquivalent(opts FLMOptions) (*Weights, error) {
	m, err := w.ForFLM(opts)
	if err != nil {
		return nil, err
	}
	c := m.Clone()
	if c.Output == nil {
		c.Output = append([]float32(nil), c.Embed...)
		c.Shape.Tied = false
	}
	c.eachMatrix(func(name string, x *[]float32, rowLen int) {
		if err != nil || name == "model.embed_tokens.weight" || opts.Unquantized {
			return
		}
		var b []byte
		if b, err = PackQ4NX(*x, rowLen); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
			return
		}
		if *x, err = UnpackQ4NX(b, len(*x)/rowLen, rowLen); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
	})
	return c, err
}
