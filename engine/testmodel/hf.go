package testmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// HFOptions chooses how WriteHF stores the weights.
type HFOptions struct {
	DType  TensorType // F32 or BF16 (default BF16)
	Shards int        // number of safetensors files; 0 or 1 writes model.safetensors
}

// WriteHF writes w as a Hugging Face model folder: config.json
// (LlamaForCausalLM, Qwen3ForCausalLM or MiniCPMForCausalLM fields),
// tokenizer.json, tokenizer_config.json and the weights with Hugging Face
// tensor names and un-permuted Q/K rows, in model.safetensors or, with
// Shards > 1, in model-0000i-of-0000n.safetensors plus
// model.safetensors.index.json.
func WriteHF(dir string, w *Weights, opts HFOptions) error {
	if err := w.Shape.Validate(); err != nil {
		return fmt.Errorf("write hf %s: %w", dir, err)
	}
	if opts.DType == 0 {
		opts.DType = BF16
	}
	if opts.DType != F32 && opts.DType != BF16 {
		return fmt.Errorf("write hf %s: dtype %s: only F32 and BF16", dir, opts.DType)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write hf: %w", err)
	}
	tensors, err := hfTensors(w, opts.DType)
	if err != nil {
		return fmt.Errorf("write hf %s: %w", dir, err)
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), hfConfig(w, opts.DType)); err != nil {
		return err
	}
	if err := writeTokenizerFiles(dir, w.Vocab); err != nil {
		return err
	}
	meta := map[string]string{"format": "pt"}
	if opts.Shards <= 1 {
		return writeSafetensors(filepath.Join(dir, "model.safetensors"), tensors, meta)
	}
	n := min(opts.Shards, len(tensors))
	weightMap := map[string]string{}
	total := 0
	for i := 0; i < n; i++ {
		part := tensors[i*len(tensors)/n : (i+1)*len(tensors)/n]
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		for _, t := range part {
			weightMap[t.name] = name
			total += len(t.data)
		}
		if err := writeSafetensors(filepath.Join(dir, name), part, meta); err != nil {
			return err
		}
	}
	return writeJSON(filepath.Join(dir, "model.safetensors.index.json"), map[string]any{
		"metadata": map[string]any{"total_size": total}, "weight_map": weightMap})
}

func hfTensors(w *Weights, dtype TensorType) ([]stTensor, error) {
	s := w.Shape
	var out []stTensor
	var err error
	add := func(name string, x []float32, shape ...int) {
		if err != nil {
			return
		}
		var t stTensor
		t, err = floatTensor(name, x, shape, dtype)
		out = append(out, t)
	}
	qd, kd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	add("model.embed_tokens.weight", w.Embed, s.Vocab, s.Hidden)
	for i, L := range w.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", L.AttnNorm, s.Hidden)
		add(p+"self_attn.q_proj.weight", L.Q, qd, s.Hidden)
		add(p+"self_attn.k_proj.weight", L.K, kd, s.Hidden)
		add(p+"self_attn.v_proj.weight", L.V, kd, s.Hidden)
		add(p+"self_attn.o_proj.weight", L.O, s.Hidden, qd)
		if L.QNorm != nil {
			add(p+"self_attn.q_norm.weight", L.QNorm, s.HeadDim)
			add(p+"self_attn.k_norm.weight", L.KNorm, s.HeadDim)
		}
		add(p+"post_attention_layernorm.weight", L.FFNNorm, s.Hidden)
		add(p+"mlp.gate_proj.weight", L.Gate, s.FFN, s.Hidden)
		add(p+"mlp.up_proj.weight", L.Up, s.FFN, s.Hidden)
		add(p+"mlp.down_proj.weight", L.Down, s.Hidden, s.FFN)
	}
	add("model.norm.weight", w.OutputNorm, s.Hidden)
	if w.Output != nil {
		add("lm_head.weight", w.Output, s.Vocab, s.Hidden)
	}
	return out, err
}

// hfConfig is the config.json of the model's transformers class.
func hfConfig(w *Weights, dtype TensorType) map[string]any {
	s := w.Shape
	c := map[string]any{
		"hidden_size":             s.Hidden,
		"intermediate_size":       s.FFN,
		"num_attention_heads":     s.Heads,
		"num_key_value_heads":     s.KVHeads,
		"num_hidden_layers":       s.Layers,
		"head_dim":                s.HeadDim,
		"rms_norm_eps":            s.NormEps,
		"rope_theta":              s.RopeTheta,
		"rope_scaling":            nil,
		"vocab_size":              s.Vocab,
		"max_position_embeddings": s.ContextLength,
		"tie_word_embeddings":     s.Tied,
		"hidden_act":              "silu",
		"attention_bias":          false,
		"bos_token_id":            w.Vocab.BOS,
		"eos_token_id":            w.Vocab.EOS,
		"pad_token_id":            w.Vocab.EOT,
		"torch_dtype":             map[TensorType]string{F32: "float32", BF16: "bfloat16"}[dtype],
	}
	switch s.Arch {
	case ArchLlama:
		c["architectures"], c["model_type"] = []string{"LlamaForCausalLM"}, "llama"
	case ArchQwen3:
		c["architectures"], c["model_type"] = []string{"Qwen3ForCausalLM"}, "qwen3"
	case ArchMiniCPM:
		c["architectures"], c["model_type"] = []string{"MiniCPMForCausalLM"}, "minicpm"
		c["scale_emb"], c["scale_depth"], c["dim_model_base"] = s.ScaleEmb, s.ScaleDepth, s.DimModelBase
	}
	return c
}

func writeTokenizerFiles(dir string, v *Vocab) error {
	if err := writeJSON(filepath.Join(dir, "tokenizer.json"), v.TokenizerJSON()); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "tokenizer_config.json"), map[string]any{
		"tokenizer_class": "Qwen2Tokenizer",
		"bos_token":       nil,
		"eos_token":       TokenIMEnd,
		"pad_token":       TokenEndOfText,
		"chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}" +
			"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
	})
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
