package oflm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// The fixtures: testdata/minicpm5-2b-manifest.json holds the documented
// fields of OpenFlowLM-Next's MiniCPM5-2B-NPU2 open_kernels/manifest.json
// (spec, max_ctx_default, hf_config_check, hf_config_defaults; see
// docs/oflm.md); defaults-manifest.json exercises the rest of oflm's check
// (a default for an absent key, layer_types). configs/port-qwen3.json is
// julianmb/minicpm5-xdna2's configs/config.json, the port's.

func TestCheckPack(t *testing.T) {
	minicpm := filepath.Join("testdata", "minicpm5-2b-manifest.json")
	qwen35 := filepath.Join("testdata", "defaults-manifest.json")
	cases := []struct {
		name, config, manifest string
		want                   []string // mismatching keys
		says                   []string // in the messages
	}{
		{"the port as published", "port-qwen3.json", minicpm, []string{"model_type"},
			[]string{`config.json model_type "qwen3" is not one this kernel set serves (["llama"])`}},
		{"the original model's 2 KV heads", "original-2kv.json", minicpm, []string{"num_key_value_heads"},
			[]string{"config.json num_key_value_heads = 2, the kernel set was built for 8"}},
		{"2048.0 is 2048; a missing key", "floats-no-intermediate.json", minicpm, []string{"intermediate_size"},
			[]string{"config.json lacks intermediate_size (the kernel set was built for 6144)"}},
		{"layer_types from the interval, a default for an absent key", "qwen35-interval.json", qwen35, nil, nil},
		{"layer_types and values wrong", "qwen35-wrong.json", qwen35, []string{"head_dim", "layer_types", "partial_rotary_factor"},
			[]string{"head_dim = 128, the kernel set was built for 256"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join("testdata", "configs", c.config))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			ms, err := CheckPack(dir, c.manifest)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range ms {
				keys = append(keys, m.Key)
			}
			if !slices.Equal(keys, c.want) {
				t.Errorf("mismatches %v (%s), want %v", keys, Describe(ms), c.want)
			}
			for _, s := range c.says {
				if !strings.Contains(Describe(ms), s) {
					t.Errorf("%q does not say %q", Describe(ms), s)
				}
			}
		})
	}
	if _, err := CheckPack(t.TempDir(), minicpm); err == nil {
		t.Error("a folder without config.json passed")
	}
	if _, err := CheckConfig([]byte(`{}`), []byte(`{"family":"llama3"}`)); err == nil {
		t.Error("a manifest without hf_config_check passed")
	}
}

// TestConvertedConfigFitsTheKernelSet: the port's real config.json, as
// Convert rewrites it, passes the real kernel manifest's check; so does a
// converted small pack against a manifest for its own shape, while its
// source and a container whose config.json misstates its KV heads do not.
func TestConvertedConfigFitsTheKernelSet(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "configs", "port-qwen3.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := readShape(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.llamaConfig(8)
	if err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile(filepath.Join("testdata", "minicpm5-2b-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := CheckConfig(cfg, man); err != nil || len(ms) > 0 {
		t.Errorf("the converted MiniCPM5-2B config: %s %v", Describe(ms), err)
	}

	w, err := testmodel.Random(3, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	manPath := smallManifest(t, w.Shape, w.Shape.Hidden)
	src := writeSource(t, w, port)
	for _, c := range []struct {
		name string
		dir  func() string
		want []string
	}{
		{"converted", func() string {
			dst := filepath.Join(t.TempDir(), "oflm")
			if _, err := Convert(context.Background(), src, dst, Options{}); err != nil {
				t.Fatal(err)
			}
			return dst
		}, nil},
		{"the port itself", func() string { return src }, []string{"model_type", "model.q4nx model.layers.0.self_attn.q_norm.weight"}},
		{"2 KV heads kept", func() string {
			dst := filepath.Join(t.TempDir(), "oflm")
			if _, err := Convert(context.Background(), writeSource(t, w, testmodel.FLMOptions{LlamaRows: true}), dst, Options{}); err != nil {
				t.Fatal(err)
			}
			return dst
		}, []string{"num_key_value_heads",
			"model.q4nx model.layers.0.self_attn.k_proj.weight", "model.q4nx model.layers.0.self_attn.v_proj.weight",
			"model.q4nx model.layers.1.self_attn.k_proj.weight", "model.q4nx model.layers.1.self_attn.v_proj.weight"}},
		{"config.json's KV heads wrong", func() string {
			dst := filepath.Join(t.TempDir(), "oflm")
			if _, err := Convert(context.Background(), src, dst, Options{mut: mutation{configKV: 2}}); err != nil {
				t.Fatal(err)
			}
			return dst
		}, []string{"num_key_value_heads"}},
	} {
		ms, err := CheckPack(c.dir(), manPath)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, m := range ms {
			keys = append(keys, m.Key)
		}
		if !slices.Equal(keys, c.want) {
			t.Errorf("%s: mismatches %v (%s), want %v", c.name, keys, Describe(ms), c.want)
		}
	}
}

// TestConvertForKernelManifest: given the kernel set's manifest, Convert
// writes the KV heads it asks for and refuses, before writing anything, a
// model the kernel set was not built for.
func TestConvertForKernelManifest(t *testing.T) {
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	sh := w.Shape
	manifest := func(hidden int) string { return smallManifest(t, sh, hidden) }
	src := writeSource(t, w, testmodel.FLMOptions{LlamaRows: true}) // 2 KV heads
	fits := manifest(sh.Hidden)
	dst := filepath.Join(t.TempDir(), "oflm")
	if _, err := Convert(context.Background(), src, dst, Options{KernelManifest: fits}); err != nil {
		t.Fatal(err)
	}
	if ms, err := CheckPack(dst, fits); err != nil || len(ms) > 0 {
		t.Errorf("converted for the manifest, then checked against it: %s %v", Describe(ms), err)
	}

	other := filepath.Join(t.TempDir(), "oflm")
	_, err = Convert(context.Background(), src, other, Options{KernelManifest: manifest(2 * sh.Hidden)})
	if err == nil || !strings.Contains(err.Error(), "hidden_size = 256, the kernel set was built for 512") {
		t.Fatalf("a kernel set for another hidden size: %v", err)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a refused conversion created %s (%v)", other, err)
	}
}

// smallManifest writes a kernel manifest for a small model of shape sh
// (with the given hidden size in its check), shaped like MiniCPM5-2B's:
// 8 KV heads, qk_norm false, the dense layers' packing plan with chunk
// counts from the shape.
func smallManifest(t *testing.T, sh testmodel.Shape, hidden int) string {
	t.Helper()
	nch := func(rows, cols int) int { return rows / 32 * ((cols + 255) / 256) }
	hd, kv := sh.HeadDim, 8
	op := func(tensor string, rows, cols int) map[string]any {
		return map[string]any{"op": "std_perm", "tensor": "model.layers.{l}." + tensor, "nch": nch(rows, cols), "in_dim": cols}
	}
	layers := make([]string, sh.Layers)
	for i := range layers {
		layers[i] = "dense"
	}
	m := map[string]any{
		"spec": map[string]any{"family": "llama3", "qk_norm": false},
		"hf_config_check": map[string]any{
			"model_type": []string{"llama"}, "hidden_size": hidden, "num_hidden_layers": sh.Layers, "vocab_size": sh.Vocab,
			"num_attention_heads": sh.Heads, "num_key_value_heads": kv, "intermediate_size": sh.FFN,
		},
		"layers": layers,
		"layer_types": map[string]any{"dense": map[string]any{"pack": map[string]any{
			"pool": []any{
				op("self_attn.q_proj.weight", sh.Heads*hd, sh.Hidden), op("self_attn.k_proj.weight", kv*hd, sh.Hidden),
				op("self_attn.v_proj.weight", kv*hd, sh.Hidden), op("self_attn.o_proj.weight", sh.Hidden, sh.Heads*hd),
				op("mlp.up_proj.weight", sh.FFN, sh.Hidden), op("mlp.gate_proj.weight", sh.FFN, sh.Hidden),
				op("mlp.down_proj.weight", sh.Hidden, sh.FFN),
			},
			"consts": []any{
				map[string]any{"op": "put", "tensor": "model.layers.{l}.input_layernorm.weight", "cap": 2 * sh.Hidden},
				map[string]any{"op": "put", "tensor": "model.layers.{l}.post_attention_layernorm.weight", "cap": 2 * sh.Hidden},
			},
		}}},
		"pack": map[string]any{
			"lm_head": map[string]any{"ops": []any{map[string]any{"op": "std_perm", "tensor": "lm_head.weight", "nch": nch(sh.Vocab, sh.Hidden)}}},
			"embed":   map[string]any{"tensor": "model.embed_tokens.weight", "dim": sh.Hidden},
			"norm":    map[string]any{"tensor": "model.norm.weight", "bytes": 2 * sh.Hidden},
		},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
