package cpu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/mmapfile"
	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/safefile"
)

// KVShape is what one position of a model's KV cache is made of, read
// from the model's files without loading it: the settings view shows
// what a context length will cost before the model loads.
type KVShape struct {
	Layers, KVHeads, HeadDim int
	// ContextMax is the model's own longest context (0: unknown).
	ContextMax int
}

// KVBlock is the number of positions a sequence's KV grows by: a
// context of n tokens takes n rounded up to it.
const KVBlock = quant.AttnBlock

// KVType is the KV cache type a model of this shape keeps when typ
// (Options.KVCacheType, engine.KVTypes; "" the default) is asked for: the
// engine keeps float16 for q8_0 when the head dimension is not a
// multiple of 32.
func (s KVShape) KVType(typ string) string {
	typ, err := engine.ParseKVType(typ)
	if err != nil {
		return engine.KVTypeF32
	}
	if typ == engine.KVTypeQ8 && s.HeadDim%quant.KVBlock8 != 0 {
		return engine.KVTypeF16
	}
	return typ
}

// BytesPerToken is the memory one position takes with a KV cache of
// type typ (as KVType resolves it): a key and a value of every KV head
// in every layer, 4 bytes each for f32, 2 for f16, 34 per 32 for q8_0.
func (s KVShape) BytesPerToken(typ string) int64 {
	return int64(s.Layers) * 2 * int64(s.KVHeads*s.HeadDim) * engine.KVTypeBytes32(s.KVType(typ)) / 32
}

// Bytes is the memory of a context of n tokens.
func (s KVShape) Bytes(n int, typ string) int64 {
	return int64((n+KVBlock-1)/KVBlock*KVBlock) * s.BytesPerToken(typ)
}

// ReadKVShape reads a model's KV shape: from a GGUF file's metadata, or
// a model folder's config.json (Hugging Face's keys, which FastFlowLM's
// folders use too). The KV heads are the file's: a port that repeats
// each head (MiniCPM5-2B-NPU2) is folded back at load, which the caller
// corrects for when it knows the port (the catalog's kv_replication).
func ReadKVShape(path string) (KVShape, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return KVShape{}, fmt.Errorf("KV shape of %s: %w", path, err)
	}
	dir, file := path, path
	if !fi.IsDir() {
		dir = filepath.Dir(path)
		if strings.EqualFold(filepath.Ext(path), ".gguf") {
			return ggufKVShape(path)
		}
	} else if matches, _ := filepath.Glob(filepath.Join(path, "*.gguf")); len(matches) == 1 {
		if _, err := os.Stat(filepath.Join(path, "config.json")); err != nil {
			return ggufKVShape(matches[0])
		}
	}
	file = filepath.Join(dir, "config.json")
	b, err := safefile.ReadFile(file, maxConfigBytes)
	if err != nil {
		return KVShape{}, fmt.Errorf("KV shape of %s: %w", path, err)
	}
	var c struct {
		Hidden       int  `json:"hidden_size"`
		Layers       int  `json:"num_hidden_layers"`
		Heads        int  `json:"num_attention_heads"`
		KVHeads      *int `json:"num_key_value_heads"`
		HeadDim      *int `json:"head_dim"`
		MaxPositions int  `json:"max_position_embeddings"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return KVShape{}, fmt.Errorf("KV shape of %s: %w", file, err)
	}
	s := KVShape{Layers: c.Layers, KVHeads: c.Heads, ContextMax: c.MaxPositions}
	if c.KVHeads != nil {
		s.KVHeads = *c.KVHeads
	}
	if c.HeadDim != nil {
		s.HeadDim = *c.HeadDim
	} else if c.Heads > 0 {
		s.HeadDim = c.Hidden / c.Heads
	}
	return s.valid(file)
}

func ggufKVShape(file string) (KVShape, error) {
	f, err := mmapfile.Open(file)
	if err != nil {
		return KVShape{}, fmt.Errorf("KV shape of %s: %w", file, err)
	}
	defer f.Close()
	g, err := gguf.Parse(f.Data)
	if err != nil {
		return KVShape{}, fmt.Errorf("KV shape of %s: %w", file, err)
	}
	arch, _ := g.Metadata["general.architecture"].(string)
	num := func(key string) int {
		switch v := g.Metadata[arch+"."+key].(type) {
		case uint32:
			return int(v)
		case int32:
			return int(v)
		case uint64:
			return int(min(v, 1<<31))
		case int64:
			return int(v)
		case uint16:
			return int(v)
		}
		return 0
	}
	heads := num("attention.head_count")
	s := KVShape{Layers: num("block_count"), KVHeads: num("attention.head_count_kv"), HeadDim: num("attention.key_length"), ContextMax: num("context_length")}
	if s.KVHeads == 0 {
		s.KVHeads = heads
	}
	if s.HeadDim == 0 && heads > 0 {
		s.HeadDim = num("embedding_length") / heads
	}
	return s.valid(file)
}

func (s KVShape) valid(file string) (KVShape, error) {
	if s.Layers <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0 {
		return KVShape{}, fmt.Errorf("KV shape of %s: layers, KV heads or head size missing", file)
	}
	return s, nil
}

// maxConfigBytes caps a model folder's config.json (a few KiB in every
// model): one that is a FIFO, a device or huge is refused, not read.
const maxConfigBytes = 1 << 20
