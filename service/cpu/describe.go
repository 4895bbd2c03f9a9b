package cpu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/engine/chat"
	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/mmapfile"
	"github.com/npuchat/npuchat/safefile"
	"github.com/npuchat/npuchat/service/backend"
)

// Describe reads what a model file or folder says about itself (family
// and context length) without loading its weights, so that /api/show
// can answer for a --model file before the first request (Ollama's
// clients size num_ctx from it). The context length is the one the
// backend will use (capped at DefaultMaxContext, as Load does).
func Describe(path string) (backend.ModelInfo, error) {
	info := backend.ModelInfo{Path: path}
	fi, err := os.Stat(path)
	if err != nil {
		return info, fmt.Errorf("describe %s: %w", path, err)
	}
	file := path
	if fi.IsDir() {
		if b, err := safefile.ReadFile(filepath.Join(path, "config.json"), maxConfigBytes); err == nil {
			var c struct {
				ModelType    string   `json:"model_type"`
				MaxPositions int      `json:"max_position_embeddings"`
				Hidden       int      `json:"hidden_size"`
				Layers       int      `json:"num_hidden_layers"`
				FFN          int      `json:"intermediate_size"`
				Heads        int      `json:"num_attention_heads"`
				KVHeads      *int     `json:"num_key_value_heads"`
				Vocab        int      `json:"vocab_size"`
				RopeTheta    *float64 `json:"rope_theta"`
				NormEps      float64  `json:"rms_norm_eps"`
			}
			if err := json.Unmarshal(b, &c); err != nil {
				return info, fmt.Errorf("describe %s: config.json: %w", path, err)
			}
			info.Family, info.ContextLength = c.ModelType, usableContext(c.MaxPositions)
			// the defaults the engine's loader takes when a key is absent
			kv, theta := c.Heads, 10000.0
			if c.KVHeads != nil {
				kv = *c.KVHeads
			}
			if c.RopeTheta != nil {
				theta = *c.RopeTheta
			}
			info.Shape = backend.Shape{EmbeddingLength: c.Hidden, BlockCount: c.Layers, FeedForwardLength: c.FFN, HeadCount: c.Heads,
				HeadCountKV: kv, VocabSize: c.Vocab, RopeFreqBase: theta, RMSEpsilon: c.NormEps}
			return info, nil
		}
		matches, _ := filepath.Glob(filepath.Join(path, "*.gguf"))
		if len(matches) != 1 {
			return info, fmt.Errorf("describe %s: no config.json and not exactly one .gguf file", path)
		}
		file = matches[0]
	}
	f, err := mmapfile.Open(file)
	if err != nil {
		return info, fmt.Errorf("describe %s: %w", file, err)
	}
	defer f.Close()
	g, err := gguf.Parse(f.Data)
	if err != nil {
		return info, fmt.Errorf("describe %s: %w", file, err)
	}
	arch, _ := g.Metadata["general.architecture"].(string)
	info.Family, info.Format = strings.TrimSpace(arch), "gguf"
	n := 0
	switch v := g.Metadata[arch+".context_length"].(type) {
	case uint32:
		n = int(v)
	case uint64:
		n = int(min(v, 1<<31))
	case int32:
		n = int(v)
	case int64:
		n = int(v)
	}
	info.ContextLength = usableContext(n)
	info.Shape = ggufShape(g, arch)
	return info, nil
}

// ggufShape reads a model's size from its GGUF metadata, with the
// defaults the engine's loader takes.
func ggufShape(g *gguf.File, arch string) backend.Shape {
	u := func(k string) int {
		v, _ := g.Uint(arch + "." + k)
		return int(min(v, 1<<31))
	}
	sh := backend.Shape{EmbeddingLength: u("embedding_length"), BlockCount: u("block_count"), FeedForwardLength: u("feed_forward_length"),
		HeadCount: u("attention.head_count"), HeadCountKV: u("attention.head_count_kv"), VocabSize: u("vocab_size"), RopeFreqBase: 10000}
	if sh.HeadCountKV == 0 {
		sh.HeadCountKV = sh.HeadCount
	}
	if t, ok := g.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 {
		sh.VocabSize = int(t.Dims[1])
	}
	if v, ok := g.Float(arch + ".rope.freq_base"); ok {
		sh.RopeFreqBase = v
	}
	sh.RMSEpsilon, _ = g.Float(arch + ".attention.layer_norm_rms_epsilon")
	return sh
}

// Capabilities says what the backend will be able to do with the model
// at path once loaded (Info's Capabilities), from its chat template,
// without loading its weights: /api/show answers with it before the
// first request.
func Capabilities(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("capabilities of %s: %w", path, err)
	}
	file := ""
	switch {
	case !fi.IsDir() && strings.EqualFold(filepath.Ext(path), ".gguf"):
		file = path
	case fi.IsDir():
		if _, err := os.Stat(filepath.Join(path, "config.json")); err != nil {
			if matches, _ := filepath.Glob(filepath.Join(path, "*.gguf")); len(matches) == 1 {
				file = matches[0]
			}
		}
	}
	if file == "" { // a model folder, as loadText reads it
		dir := path
		if !fi.IsDir() {
			dir = filepath.Dir(path)
		}
		tmpl, err := chat.LoadTemplate(dir)
		if err != nil {
			return nil, fmt.Errorf("capabilities of %s: chat template: %w", dir, err)
		}
		return templateCapabilities(tmpl), nil
	}
	f, err := mmapfile.Open(file)
	if err != nil {
		return nil, fmt.Errorf("capabilities of %s: %w", file, err)
	}
	defer f.Close()
	g, err := gguf.Parse(f.Data)
	if err != nil {
		return nil, fmt.Errorf("capabilities of %s: %w", file, err)
	}
	tmpl := chat.ChatML()
	if src, ok := g.Metadata["tokenizer.chat_template"].(string); ok && src != "" {
		if tmpl, err = chat.New(src, file); err != nil {
			return nil, fmt.Errorf("capabilities of %s: %w", file, err)
		}
	}
	return templateCapabilities(tmpl), nil
}

// usableContext is the context the backend uses for a model trained on
// n tokens (0: unknown), as Load computes it.
func usableContext(n int) int {
	if n <= 0 || n > DefaultMaxContext {
		return min(max(n, 4096), DefaultMaxContext)
	}
	return n
}
