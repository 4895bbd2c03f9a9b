package testmodel

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// GGUF value types (gguf_type).
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
)

// ggufAlignment is the default general.alignment.
const ggufAlignment = 32

type ggufKV struct {
	key string
	val any // uint32, int32, float32, bool, string, []string, []int32
}

type ggufTensor struct {
	name string
	dims []uint64 // ne0 (row length) first
	typ  TensorType
	data []byte
}

// WriteGGUF writes w as a GGUF v3 file at path. Every matrix (embedding and
// output included) is encoded as t; norm weights are F32. For the llama
// and minicpm architectures the Q and K rows are permuted per head as
// llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) does, so that
// llama.cpp's interleaved RoPE computes Hugging Face's rotate_half RoPE.
func WriteGGUF(path string, w *Weights, t TensorType) error {
	if err := w.Shape.Validate(); err != nil {
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	kvs := ggufMetadata(w, t)
	tensors, err := ggufTensors(w, t)
	if err != nil {
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	return writeAtomic(path, func(f *bufio.Writer) error { return encodeGGUF(f, kvs, tensors) })
}

func ggufMetadata(w *Weights, t TensorType) []ggufKV {
	s := w.Shape
	a := string(s.Arch)
	kvs := []ggufKV{
		{"general.architecture", a},
		{"general.name", "testmodel " + a},
		{"general.file_type", t.fileType()},
		{a + ".vocab_size", uint32(s.Vocab)},
		{a + ".context_length", uint32(s.ContextLength)},
		{a + ".embedding_length", uint32(s.Hidden)},
		{a + ".block_count", uint32(s.Layers)},
		{a + ".feed_forward_length", uint32(s.FFN)},
		{a + ".attention.head_count", uint32(s.Heads)},
		{a + ".attention.head_count_kv", uint32(s.KVHeads)},
		{a + ".attention.key_length", uint32(s.HeadDim)},
		{a + ".attention.value_length", uint32(s.HeadDim)},
		{a + ".attention.layer_norm_rms_epsilon", s.NormEps},
		{a + ".rope.freq_base", s.RopeTheta},
		{a + ".rope.dimension_count", uint32(s.HeadDim)},
	}
	if s.Arch == ArchMiniCPM {
		kvs = append(kvs,
			ggufKV{a + ".embedding_scale", s.ScaleEmb},
			ggufKV{a + ".residual_scale", float32(float64(s.ScaleDepth) / math.Sqrt(float64(s.Layers)))},
			ggufKV{a + ".logit_scale", float32(float64(s.Hidden) / float64(s.DimModelBase))},
		)
	}
	v := w.Vocab
	kvs = append(kvs,
		ggufKV{"tokenizer.ggml.model", "gpt2"},
		ggufKV{"tokenizer.ggml.pre", "qwen2"},
		ggufKV{"tokenizer.ggml.tokens", v.Tokens},
		ggufKV{"tokenizer.ggml.token_type", v.Types},
		ggufKV{"tokenizer.ggml.merges", v.Merges},
		ggufKV{"tokenizer.ggml.bos_token_id", uint32(v.BOS)},
		ggufKV{"tokenizer.ggml.eos_token_id", uint32(v.EOS)},
		ggufKV{"tokenizer.ggml.padding_token_id", uint32(v.EOT)},
		ggufKV{"tokenizer.ggml.add_bos_token", false},
	)
	return kvs
}

func ggufTensors(w *Weights, t TensorType) ([]ggufTensor, error) {
	s := w.Shape
	var out []ggufTensor
	var err error
	add := func(name string, x []float32, rowLen int, typ TensorType) {
		if err != nil {
			return
		}
		var b []byte
		if b, err = Encode(typ, x, rowLen); err != nil {
			err = fmt.Errorf("tensor %s: %w", name, err)
			return
		}
		dims := []uint64{uint64(rowLen)}
		if len(x) != rowLen {
			dims = append(dims, uint64(len(x)/rowLen))
		}
		out = append(out, ggufTensor{name: name, dims: dims, typ: typ, data: b})
	}
	permute := s.Arch == ArchLlama || s.Arch == ArchMiniCPM
	add("token_embd.weight", w.Embed, s.Hidden, t)
	add("output_norm.weight", w.OutputNorm, s.Hidden, F32)
	if w.Output != nil {
		add("output.weight", w.Output, s.Hidden, t)
	}
	for i, L := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		q, k := L.Q, L.K
		if permute {
			q = PermuteQK(q, s.Heads, s.HeadDim, s.Hidden)
			k = PermuteQK(k, s.KVHeads, s.HeadDim, s.Hidden)
		}
		add(p+"attn_norm.weight", L.AttnNorm, s.Hidden, F32)
		add(p+"attn_q.weight", q, s.Hidden, t)
		add(p+"attn_k.weight", k, s.Hidden, t)
		add(p+"attn_v.weight", L.V, s.Hidden, t)
		add(p+"attn_output.weight", L.O, s.Heads*s.HeadDim, t)
		if L.QNorm != nil {
			add(p+"attn_q_norm.weight", L.QNorm, s.HeadDim, F32)
			add(p+"attn_k_norm.weight", L.KNorm, s.HeadDim, F32)
		}
		add(p+"ffn_norm.weight", L.FFNNorm, s.Hidden, F32)
		add(p+"ffn_gate.weight", L.Gate, s.Hidden, t)
		add(p+"ffn_up.weight", L.Up, s.Hidden, t)
		add(p+"ffn_down.weight", L.Down, s.FFN, t)
	}
	return out, err
}

// PermuteQK reorders the rows of a Hugging Face q_proj or k_proj weight
// (heads*headDim rows of rowLen) the way convert_hf_to_gguf.py's
// LlamaModel.permute does: within each head, row j*headDim/2+i moves to
// row 2*i+j (j = 0, 1), turning rotate_half pairs (i, i+headDim/2) into
// adjacent pairs (2i, 2i+1).
func PermuteQK(x []float32, heads, headDim, rowLen int) []float32 {
	out := make([]float32, len(x))
	half := headDim / 2
	for h := 0; h < heads; h++ {
		for j := 0; j < 2; j++ {
			for i := 0; i < half; i++ {
				src := (h*headDim + j*half + i) * rowLen
				dst := (h*headDim + 2*i + j) * rowLen
				copy(out[dst:dst+rowLen], x[src:src+rowLen])
			}
		}
	}
	return out
}

// UnpermuteQK is the inverse of PermuteQK.
func UnpermuteQK(x []float32, heads, headDim, rowLen int) []float32 {
	out := make([]float32, len(x))
	half := headDim / 2
	for h := 0; h < heads; h++ {
		for j := 0; j < 2; j++ {
			for i := 0; i < half; i++ {
				dst := (h*headDim + j*half + i) * rowLen
				src := (h*headDim + 2*i + j) * rowLen
				copy(out[dst:dst+rowLen], x[src:src+rowLen])
			}
		}
	}
	return out
}

func encodeGGUF(f *bufio.Writer, kvs []ggufKV, tensors []ggufTensor) error {
	le := binary.LittleEndian
	var hdr []byte
	hdr = append(hdr, "GGUF"...)
	hdr = le.AppendUint32(hdr, 3)
	hdr = le.AppendUint64(hdr, uint64(len(tensors)))
	hdr = le.AppendUint64(hdr, uint64(len(kvs)))
	str := func(b []byte, s string) []byte {
		b = le.AppendUint64(b, uint64(len(s)))
		return append(b, s...)
	}
	for _, kv := range kvs {
		hdr = str(hdr, kv.key)
		switch v := kv.val.(type) {
		case uint32:
			hdr = le.AppendUint32(le.AppendUint32(hdr, ggufUint32), v)
		case int32:
			hdr = le.AppendUint32(le.AppendUint32(hdr, ggufInt32), uint32(v))
		case float32:
			hdr = le.AppendUint32(le.AppendUint32(hdr, ggufFloat32), math.Float32bits(v))
		case bool:
			hdr = le.AppendUint32(hdr, ggufBool)
			if v {
				hdr = append(hdr, 1)
			} else {
				hdr = append(hdr, 0)
			}
		case string:
			hdr = str(le.AppendUint32(hdr, ggufString), v)
		case []string:
			hdr = le.AppendUint32(hdr, ggufArray)
			hdr = le.AppendUint32(hdr, ggufString)
			hdr = le.AppendUint64(hdr, uint64(len(v)))
			for _, s := range v {
				hdr = str(hdr, s)
			}
		case []int32:
			hdr = le.AppendUint32(hdr, ggufArray)
			hdr = le.AppendUint32(hdr, ggufInt32)
			hdr = le.AppendUint64(hdr, uint64(len(v)))
			for _, x := range v {
				hdr = le.AppendUint32(hdr, uint32(x))
			}
		default:
			return fmt.Errorf("gguf key %s: unsupported value type %T", kv.key, kv.val)
		}
	}
	var off uint64
	for _, t := range tensors {
		hdr = str(hdr, t.name)
		hdr = le.AppendUint32(hdr, uint32(len(t.dims)))
		for _, d := range t.dims {
			hdr = le.AppendUint64(hdr, d)
		}
		hdr = le.AppendUint32(hdr, uint32(t.typ))
		hdr = le.AppendUint64(hdr, off)
		off = alignUp(off+uint64(len(t.data)), ggufAlignment)
	}
	hdr = append(hdr, make([]byte, alignUp(uint64(len(hdr)), ggufAlignment)-uint64(len(hdr)))...)
	if _, err := f.Write(hdr); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := f.Write(t.data); err != nil {
			return err
		}
		pad := alignUp(uint64(len(t.data)), ggufAlignment) - uint64(len(t.data))
		if _, err := f.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// writeAtomic writes a file through a temporary file in the same folder
// and renames it into place, so a reader never sees half a file.
func writeAtomic(path string, write func(*bufio.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
