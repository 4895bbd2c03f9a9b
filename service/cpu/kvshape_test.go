package cpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestReadKVShapeMatchesTheEngine: the KV shape read from a model's
// files, without loading it, gives the memory the engine's KV takes
// once loaded (GGUF, Hugging Face folder); for a port that repeats its
// KV heads (FastFlowLM's layout) it gives the file's heads, which the
// engine folds back: the caller divides by the port's replication.
func TestReadKVShapeMatchesTheEngine(t *testing.T) {
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths := map[string]string{"gguf": filepath.Join(dir, "m.gguf"), "hf": filepath.Join(dir, "hf"), "flm": filepath.Join(dir, "flm")}
	if err := testmodel.WriteGGUF(paths["gguf"], w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteHF(paths["hf"], w, testmodel.HFOptions{DType: testmodel.F32}); err != nil {
		t.Fatal(err)
	}
	const repl = 4
	if err := testmodel.WriteFLM(paths["flm"], w, testmodel.FLMOptions{ReplicateKV: repl, InjectUnitQKNorm: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gguf", "hf", "flm"} {
		t.Run(name, func(t *testing.T) {
			shape, err := ReadKVShape(paths[name])
			if err != nil {
				t.Fatal(err)
			}
			m, err := engine.Load(paths[name], engine.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			want := m.KVBytes(1000)
			got := shape.Bytes(1000, KVElementBytes(false))
			if name == "flm" {
				if shape.KVHeads != m.Config().KVHeads*repl {
					t.Fatalf("file KV heads %d, engine %d × %d", shape.KVHeads, m.Config().KVHeads, repl)
				}
				got /= repl
			}
			if got != want || shape.Layers != m.Config().Layers || shape.HeadDim != m.Config().HeadDim {
				t.Errorf("shape %+v: %d bytes for 1000 tokens, the engine %d", shape, got, want)
			}
		})
	}
	if _, err := ReadKVShape(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing model has a shape")
	}
	bad := filepath.Join(dir, "bad")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "config.json"), []byte(`{"hidden_size": 64}`), 0o600)
	if _, err := ReadKVShape(bad); err == nil {
		t.Error("a config.json without layers has a shape")
	}
}
