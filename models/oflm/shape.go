package oflm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/npuchat/npuchat/jsonedit"
)

// shape is the part of a source config.json the conversion needs. Every
// size comes from the file; nothing is assumed about MiniCPM5-2B.
type shape struct {
	ModelType string
	Hidden    int
	FFN       int
	Layers    int
	Heads     int
	KVHeads   int
	HeadDim   int
	Vocab     int
	Tied      bool
	EOS       []int // config.json eos_token_id (an int or a list)

	obj *jsonedit.Object // the file, to edit into the output's config.json
	raw []byte
}

// sourceModelTypes are the source configs Convert reads: the port's
// qwen3 label, or a llama-family pack that only needs its rows or heads
// put right.
var sourceModelTypes = map[string]bool{"qwen3": true, "llama": true}

// readShape reads and checks dir/config.json.
func readShape(dir string) (*shape, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj, err := jsonedit.ParseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var c struct {
		ModelType     string          `json:"model_type"`
		Hidden        int             `json:"hidden_size"`
		FFN           int             `json:"intermediate_size"`
		Layers        int             `json:"num_hidden_layers"`
		Heads         int             `json:"num_attention_heads"`
		KVHeads       *int            `json:"num_key_value_heads"`
		HeadDim       *int            `json:"head_dim"`
		Vocab         int             `json:"vocab_size"`
		Tie           *bool           `json:"tie_word_embeddings"`
		PartialRotary *float64        `json:"partial_rotary_factor"`
		EOS           json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !sourceModelTypes[c.ModelType] {
		return nil, fmt.Errorf("%s: model_type %q: this converter reads the MiniCPM5-2B port (qwen3) or a llama pack", path, c.ModelType)
	}
	s := &shape{ModelType: c.ModelType, Hidden: c.Hidden, FFN: c.FFN, Layers: c.Layers, Heads: c.Heads,
		KVHeads: c.Heads, Vocab: c.Vocab, obj: obj, raw: raw}
	if c.KVHeads != nil {
		s.KVHeads = *c.KVHeads
	}
	if c.Heads > 0 {
		s.HeadDim = c.Hidden / c.Heads
	}
	if c.HeadDim != nil {
		s.HeadDim = *c.HeadDim
	}
	if c.Tie != nil {
		s.Tied = *c.Tie
	}
	if s.EOS, err = intOrList(c.EOS); err != nil {
		return nil, fmt.Errorf("%s: eos_token_id: %w", path, err)
	}
	switch {
	case s.Hidden <= 0 || s.FFN <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0 || s.Vocab <= 0:
		return nil, fmt.Errorf("%s: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim and vocab_size must all be positive", path)
	case s.Heads%s.KVHeads != 0:
		return nil, fmt.Errorf("%s: %d attention heads are not a multiple of %d KV heads", path, s.Heads, s.KVHeads)
	case s.HeadDim%2 != 0:
		return nil, fmt.Errorf("%s: head_dim %d is odd: RoPE rotates pairs", path, s.HeadDim)
	case c.PartialRotary != nil && *c.PartialRotary != 1:
		// The llama converter un-permutes with the rope dimension and
		// llama.cpp permutes whole heads: they agree only when the two
		// are the same.
		return nil, fmt.Errorf("%s: partial_rotary_factor %v: the llama row order is defined only for RoPE over the whole head", path, *c.PartialRotary)
	}
	return s, nil
}

// intOrList decodes a token id field: absent or null, an int, or a list.
func intOrList(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return []int{one}, nil
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s is neither an integer nor a list of integers", raw)
	}
	return list, nil
}

// llamaConfig is the output's config.json: the source's, keys and values
// kept, relabelled as a llama model (what the kernel manifest's
// hf_config_check wants), num_key_value_heads set to the heads written,
// and FastFlowLM's closed-engine fields dropped (flm_version, the qwen3
// engine's addr_* offsets: they describe the port, not this container).
func (s *shape) llamaConfig(kvHeads int) ([]byte, error) {
	obj, err := jsonedit.ParseObject(s.raw)
	if err != nil {
		return nil, err
	}
	for _, k := range obj.Keys() {
		switch k {
		case "flm_version", "addr_qk", "addr_kv", "addr_l_begin_mha", "addr_l_end_mha", "addr_kk":
			obj.Delete(k)
		}
	}
	for _, kv := range []struct {
		k string
		v any
	}{
		{"architectures", []string{"LlamaForCausalLM"}},
		{"model_type", "llama"},
		{"num_key_value_heads", kvHeads},
		{"head_dim", s.HeadDim},
	} {
		if err := obj.SetValue(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	return obj.Format(jsonedit.DetectIndent(s.raw)), nil
}
