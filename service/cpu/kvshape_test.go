package cpu

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/config"
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
			for _, typ := range engine.KVTypes() {
				m, err := engine.Load(paths[name], engine.LoadOptions{KVCacheType: typ})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if shape.KVType(typ) != m.KVType() {
					t.Errorf("%s: the shape says a %s cache, the engine keeps %s", typ, shape.KVType(typ), m.KVTypeChoice())
				}
				want := m.KVBytes(1000)
				got := shape.Bytes(1000, typ)
				if name == "flm" {
					if shape.KVHeads != m.Config().KVHeads*repl {
						t.Fatalf("file KV heads %d, engine %d × %d", shape.KVHeads, m.Config().KVHeads, repl)
					}
					got /= repl
				}
				if got != want || shape.Layers != m.Config().Layers || shape.HeadDim != m.Config().HeadDim {
					t.Errorf("%s: shape %+v: %d bytes for 1000 tokens, the engine %d", typ, shape, got, want)
				}
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

// TestKVCacheTypesMatchTheEngine: the kv_cache_type setting's values are
// the engine's KV cache types, in the same order (the default first), and
// each is accepted by both.
func TestKVCacheTypesMatchTheEngine(t *testing.T) {
	if got, want := fmt.Sprint(config.KVCacheTypes), fmt.Sprint(engine.KVTypes()); got != want {
		t.Fatalf("config.KVCacheTypes %s, engine.KVTypes %s", got, want)
	}
	for _, typ := range append(engine.KVTypes(), "", "q4_0") {
		_, errE := engine.ParseKVType(typ)
		errC := config.CheckKVCacheType(typ)
		if (errE == nil) != (errC == nil) {
			t.Errorf("%q: the engine says %v, the settings %v", typ, errE, errC)
		}
	}
}
