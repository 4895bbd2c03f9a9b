package engine

import (
	"fmt"

	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/mmapfile"
	"github.com/npuchat/npuchat/engine/quant"
)

// ggufSource reads tensors of a parsed GGUF file in place (no copy).
type ggufSource struct {
	f    *gguf.File
	data []byte
}

// ggufType reports whether a GGUF tensor may have type t: the types
// quant computes (the README's list) but Q4_1BF16, which is the engine's
// own form of q4nx rows, not a ggml type (its number, 1000, is no ggml
// type's).
func ggufType(t quant.Type) bool { return t.Supported() && t != quant.Q4_1BF16 }

func (s ggufSource) has(name string) bool { _, ok := s.f.Tensor(name); return ok }

func (s ggufSource) matrix(name string, rows, cols int) (matrix, error) {
	t, ok := s.f.Tensor(name)
	if !ok {
		return matrix{}, missing(name)
	}
	if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) {
		return matrix{}, fmt.Errorf("tensor %s: shape %s, the config needs [%d %d]", name, shapeString(t.Dims), cols, rows)
	}
	if !ggufType(t.Type) {
		return matrix{}, fmt.Errorf("tensor %s: type %s is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", name, t.Type)
	}
	data, err := s.f.Data(s.data, t)
	if err != nil {
		return matrix{}, err
	}
	mat, err := newMatrix(t.Type, rows, cols, data)
	if err != nil {
		return matrix{}, fmt.Errorf("tensor %s: %w", name, err)
	}
	return mat, nil
}

func (s ggufSource) vector(name string, n int) ([]float32, error) {
	t, ok := s.f.Tensor(name)
	if !ok {
		return nil, missing(name)
	}
	if t.Elements() != uint64(n) || t.Dims[0] != uint64(n) {
		return nil, fmt.Errorf("tensor %s: shape %s, the config needs [%d]", name, shapeString(t.Dims), n)
	}
	if !ggufType(t.Type) || t.Type.BlockSize() != 1 && n%t.Type.BlockSize() != 0 {
		return nil, fmt.Errorf("tensor %s: type %s is not supported for a vector", name, t.Type)
	}
	data, err := s.f.Data(s.data, t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	quant.Dequantize(t.Type, data, out)
	return out, nil
}

// ggufArchs are the architectures the engine computes, with llama.cpp's
// RoPE pairing for each (llama_model_rope_type).
var ggufArchs = map[string]RopeLayout{
	"llama": RopeNormal, "minicpm": RopeNormal, "qwen2": RopeNeox, "qwen3": RopeNeox,
}

func loadGGUF(path string, opts LoadOptions) (*Model, error) {
	mf, err := mmapfile.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := loadGGUFData(mf.Data, opts, mf)
	if err != nil {
		mf.Close()
		return nil, err
	}
	return m, nil
}

// loadGGUFData loads a GGUF file's bytes, the data of mf when mf is not nil.
func loadGGUFData(data []byte, opts LoadOptions, mf *mmapfile.File) (*Model, error) {
	f, err := gguf.Parse(data)
	if err != nil {
		return nil, err
	}
	arch, _ := f.String("general.architecture")
	layout, ok := ggufArchs[arch]
	if !ok {
		return nil, fmt.Errorf("architecture %q is not supported (supported: llama, minicpm, qwen2, qwen3)", arch)
	}
	key := func(k string) string { return arch + "." + k }
	need := func(k string) (int, error) {
		v, ok := f.Uint(key(k))
		if !ok {
			return 0, fmt.Errorf("metadata %s is missing or not an integer", key(k))
		}
		if v > 1<<31 {
			return 0, fmt.Errorf("metadata %s = %d is absurd", key(k), v)
		}
		return int(v), nil
	}
	c := Config{Arch: arch, Format: "gguf", RopeLayout: layout, BOS: -1}
	for _, p := range []struct {
		dst *int
		k   string
	}{
		{&c.Hidden, "embedding_length"}, {&c.Layers, "block_count"}, {&c.FFN, "feed_forward_length"},
		{&c.Heads, "attention.head_count"},
	} {
		if *p.dst, err = need(p.k); err != nil {
			return nil, err
		}
	}
	c.KVHeads = c.Heads
	if _, ok := f.Metadata[key("attention.head_count_kv")]; ok {
		if c.KVHeads, err = need("attention.head_count_kv"); err != nil {
			return nil, err
		}
	}
	if c.Heads == 0 {
		return nil, fmt.Errorf("metadata %s is 0", key("attention.head_count"))
	}
	c.HeadDim = c.Hidden / c.Heads
	if _, ok := f.Metadata[key("attention.key_length")]; ok {
		if c.HeadDim, err = need("attention.key_length"); err != nil {
			return nil, err
		}
	}
	c.RopeDim = c.HeadDim
	if _, ok := f.Metadata[key("rope.dimension_count")]; ok {
		if c.RopeDim, err = need("rope.dimension_count"); err != nil {
			return nil, err
		}
	}
	if _, ok := f.Metadata[key("context_length")]; ok {
		if c.ContextLength, err = need("context_length"); err != nil {
			return nil, err
		}
	}
	c.RopeTheta = 10000
	if v, ok := f.Float(key("rope.freq_base")); ok {
		c.RopeTheta = v
	}
	var okEps bool
	if c.NormEps, okEps = f.Float(key("attention.layer_norm_rms_epsilon")); !okEps {
		return nil, fmt.Errorf("metadata %s is missing", key("attention.layer_norm_rms_epsilon"))
	}
	if st, ok := f.String(key("rope.scaling.type")); ok && st != "none" {
		if st != "linear" {
			return nil, fmt.Errorf("RoPE scaling %q is not supported (only linear)", st)
		}
		factor, ok := f.Float(key("rope.scaling.factor"))
		if !ok || factor <= 0 {
			return nil, fmt.Errorf("metadata %s is missing", key("rope.scaling.factor"))
		}
		c.RopeScale = 1 / factor
	}
	if arch == "minicpm" {
		for _, p := range []struct {
			dst *float64
			k   string
		}{{&c.EmbedScale, "embedding_scale"}, {&c.ResidualScale, "residual_scale"}, {&c.LogitScale, "logit_scale"}} {
			if *p.dst, ok = f.Float(key(p.k)); !ok {
				return nil, fmt.Errorf("metadata %s is missing", key(p.k))
			}
		}
	}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, missing("token_embd.weight")
	}
	if len(embd.Dims) != 2 {
		return nil, fmt.Errorf("tensor token_embd.weight: shape %s is not a matrix", shapeString(embd.Dims))
	}
	c.VocabSize = int(embd.Dims[1])
	if v, ok := f.Uint(key("vocab_size")); ok && v != embd.Dims[1] {
		return nil, fmt.Errorf("metadata %s = %d but token_embd.weight has %d rows", key("vocab_size"), v, embd.Dims[1])
	}
	if v, ok := f.Uint("tokenizer.ggml.bos_token_id"); ok {
		c.BOS = int(v)
	}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if v, ok := f.Uint(k); ok && !contains(c.EOS, int(v)) {
			c.EOS = append(c.EOS, int(v))
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: c, meta: f.Metadata}
	if mf != nil {
		m.files = []*mmapfile.File{mf}
	}
	src := ggufSource{f: f, data: data}
	if err := m.build(src, ggufNames); err != nil {
		return nil, err
	}
	if src.has("rope_freqs.weight") {
		if m.ropeFactors, err = src.vector("rope_freqs.weight", c.RopeDim/2); err != nil {
			return nil, err
		}
	}
	if err := m.finish(opts); err != nil {
		return nil, err
	}
	return m, nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
