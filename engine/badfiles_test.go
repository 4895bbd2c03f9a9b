package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// rewriteGGUF parses a valid GGUF and writes it again after edit changes
// its metadata and tensors.
func rewriteGGUF(t *testing.T, src, dst string, edit func(meta map[string]any, tensors []gguf.WriteTensor) []gguf.WriteTensor) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []gguf.WriteTensor
	for _, ti := range f.Tensors {
		d, err := f.Data(data, ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: d})
	}
	meta := map[string]any{}
	for k, v := range f.Metadata {
		meta[k] = v
	}
	tensors = edit(meta, tensors)
	var kvs []gguf.KV
	for _, k := range f.Keys {
		if v, ok := meta[k]; ok {
			kvs = append(kvs, gguf.KV{Key: k, Value: v})
			delete(meta, k)
		}
	}
	var added []string
	for k := range meta {
		added = append(added, k)
	}
	sort.Strings(added)
	for _, k := range added {
		kvs = append(kvs, gguf.KV{Key: k, Value: meta[k]})
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBadGGUF(t *testing.T) {
	w := randomWeights(t, 8, testmodel.MiniCPM5Small())
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := testmodel.WriteGGUF(good, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(good)
	drop := func(name string) func(map[string]any, []gguf.WriteTensor) []gguf.WriteTensor {
		return func(_ map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor {
			var out []gguf.WriteTensor
			for _, t := range ts {
				if t.Name != name {
					out = append(out, t)
				}
			}
			return out
		}
	}
	setMeta := func(k string, v any) func(map[string]any, []gguf.WriteTensor) []gguf.WriteTensor {
		return func(m map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor { m[k] = v; return ts }
	}
	cases := []struct {
		name  string
		bytes []byte
		edit  func(map[string]any, []gguf.WriteTensor) []gguf.WriteTensor
		want  []string
	}{
		{name: "wrong magic", bytes: append([]byte("GGJT"), raw[4:]...), want: []string{"wrong magic"}},
		{name: "truncated", bytes: raw[:len(raw)-5000], want: []string{"truncated", "tensor"}},
		{name: "empty", bytes: []byte{}, want: []string{"wrong magic"}},
		{name: "missing tensor", edit: drop("blk.1.ffn_up.weight"), want: []string{"blk.1.ffn_up.weight", "missing"}},
		{name: "missing output norm", edit: drop("output_norm.weight"), want: []string{"output_norm.weight"}},
		{name: "shape mismatch", edit: setMeta("llama.feed_forward_length", uint32(1024)), want: []string{"blk.0.ffn_gate.weight", "shape"}},
		{name: "absurd layers", edit: setMeta("llama.block_count", uint32(1<<31)), want: []string{"absurd"}},
		{name: "zero heads", edit: setMeta("llama.attention.head_count", uint32(0)), want: []string{"head_count"}},
		{name: "bad kv heads", edit: setMeta("llama.attention.head_count_kv", uint32(3)), want: []string{"KV heads"}},
		{name: "unknown arch", edit: setMeta("general.architecture", "mamba"), want: []string{"mamba", "not supported"}},
		{name: "unsupported type", edit: func(_ map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor {
			for i := range ts {
				if ts[i].Name == "blk.0.attn_q.weight" {
					ts[i].Type = 11 // Q3_K
				}
			}
			return ts
		}, want: []string{"blk.0.attn_q.weight", "Q3_K", "not supported"}},
		{name: "the engine's own type", edit: func(_ map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor {
			for i := range ts {
				if ts[i].Name == "blk.0.ffn_down.weight" {
					ts[i].Type = quant.Q4_1BF16 // 1000: no ggml type
				}
			}
			return ts
		}, want: []string{"blk.0.ffn_down.weight", "Q4_1BF16", "not supported"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.gguf")
			if c.edit != nil {
				rewriteGGUF(t, good, p, c.edit)
			} else if err := os.WriteFile(p, c.bytes, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Load(p, LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("Load succeeded")
			}
			t.Log(err)
			for _, w := range append(c.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestBadFolders(t *testing.T) {
	w := randomWeights(t, 9, testmodel.MiniCPM5Small())
	editJSON := func(t *testing.T, path string, k string, v any) {
		var m map[string]any
		b, _ := os.ReadFile(path)
		json.Unmarshal(b, &m)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ = json.Marshal(m)
		os.WriteFile(path, b, 0o644)
	}
	cases := []struct {
		name   string
		flm    bool
		break_ func(t *testing.T, dir string)
		want   []string
	}{
		{"hf hidden mismatch", false, func(t *testing.T, d string) { editJSON(t, filepath.Join(d, "config.json"), "intermediate_size", 1024) },
			[]string{"model.layers.0.mlp.gate_proj.weight", "shape"}},
		{"hf unknown model type", false, func(t *testing.T, d string) { editJSON(t, filepath.Join(d, "config.json"), "model_type", "bert") },
			[]string{"bert"}},
		{"hf missing shard", false, func(t *testing.T, d string) { os.Remove(filepath.Join(d, "model-00002-of-00002.safetensors")) },
			[]string{"model-00002-of-00002.safetensors"}},
		{"hf truncated shard", false, func(t *testing.T, d string) {
			p := filepath.Join(d, "model-00001-of-00002.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-100], 0o644)
		}, []string{"model-00001-of-00002.safetensors", "truncated"}},
		{"hf rope scaling", false, func(t *testing.T, d string) {
			editJSON(t, filepath.Join(d, "config.json"), "rope_scaling", map[string]any{"rope_type": "yarn", "factor": 4})
		}, []string{"rope_scaling"}},
		{"flm vocab mismatch", true, func(t *testing.T, d string) { editJSON(t, filepath.Join(d, "config.json"), "vocab_size", 1024) },
			[]string{"model.embed_tokens.weight", "shape"}},
		{"flm ffn mismatch", true, func(t *testing.T, d string) { editJSON(t, filepath.Join(d, "config.json"), "intermediate_size", 1024) },
			[]string{"model.layers.0.mlp.gate_proj.weight", "config.json"}},
		{"flm garbage", true, func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "model.q4nx"), []byte("\xff\xff\xff\xff\xff\xff\xff\xffGGUF"), 0o644)
		},
			[]string{"model.q4nx"}},
		{"flm no config", true, func(t *testing.T, d string) { os.Remove(filepath.Join(d, "config.json")) },
			[]string{"config.json"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var err error
			if c.flm {
				err = testmodel.WriteFLM(dir, w, testmodel.FLMOptions{})
			} else {
				err = testmodel.WriteHF(dir, w, testmodel.HFOptions{Shards: 2})
			}
			if err != nil {
				t.Fatal(err)
			}
			c.break_(t, dir)
			m, err := Load(dir, LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("Load succeeded")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadOptionsErrors(t *testing.T) {
	if _, err := Load(t.TempDir(), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "no model here") {
		t.Errorf("empty folder: %v", err)
	}
	if _, err := Load(t.TempDir(), LoadOptions{Quantize: "q2"}); err == nil {
		t.Error("bad quantization accepted")
	}
	_ = quant.F32
}
