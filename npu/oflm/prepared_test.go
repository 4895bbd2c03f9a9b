package oflm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	modeloflm "github.com/npuchat/npuchat/models/oflm"
	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
)

// prepare converts a MiniCPM5-shaped test pack with models/oflm.Convert
// into a new oflm folder, for an open kernel set under that folder built
// for its shape.
func prepare(t *testing.T) (Layout, *KernelSet, string, modeloflm.Result) {
	t.Helper()
	shape := testmodel.MiniCPM5Small()
	w, err := testmodel.Random(5, shape)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "MiniCPM5-2B-NPU2")
	if err := testmodel.WriteFLM(src, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true, LlamaRows: true}); err != nil {
		t.Fatal(err)
	}
	// julianmb's pack has no chat_template.jinja; one that has is copied,
	// and must then be registered too.
	if err := os.WriteFile(filepath.Join(src, "chat_template.jinja"), []byte("{{ messages }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := NewLayout("linux", func(string) string { return "" }, t.TempDir(), fakeExe)
	if err != nil {
		t.Fatal(err)
	}

	// The open kernel set, under oflm's folder, built for this shape.
	setDir := filepath.Join(l.Root, "xclbins", Folder, "open_kernels")
	copyTree(t, "open_kernels", setDir)
	// The test set's manifest, for this shape and with no packing plan
	// (the weights are held against the plan in models/oflm's tests).
	oflmtest.EditJSON(t, filepath.Join(setDir, "manifest.json"), func(man map[string]any) {
		man["max_ctx_default"] = 2048
		man["hf_config_check"] = map[string]any{
			"model_type": []string{"llama"}, "hidden_size": shape.Hidden, "num_hidden_layers": shape.Layers,
			"vocab_size": shape.Vocab, "num_attention_heads": shape.Heads, "num_key_value_heads": 8,
			"intermediate_size": shape.FFN,
		}
		types := man["layer_types"].(map[string]any)
		types["dense"].(map[string]any)["pack"] = map[string]any{"pool": []any{}, "consts": []any{}}
		man["pack"] = map[string]any{
			"lm_head": map[string]any{"ops": []any{map[string]any{"op": "std_perm", "tensor": "lm_head.weight"}}},
			"embed":   map[string]any{"tensor": "model.embed_tokens.weight", "dim": shape.Hidden},
			"norm":    map[string]any{"tensor": "model.norm.weight", "bytes": 2 * shape.Hidden},
		}
	})

	dir := l.ModelDir(Folder)
	ks, err := l.FindKernels(func(string) string { return "" }, dir, Folder)
	if err != nil {
		t.Fatal(err)
	}
	res, err := modeloflm.Convert(context.Background(), src, dir, modeloflm.Options{KernelManifest: filepath.Join(ks.Dir, "manifest.json")})
	if err != nil {
		t.Fatal(err)
	}
	return l, ks, dir, res
}

// TestPreparedFolderRegisters is where models/oflm and this package meet:
// the folder Convert writes at Layout.ModelDir(Folder), for a kernel set
// found where oflm looks, registers as it is (the same kernel manifest
// check passes), the registry entry lists exactly the files Convert wrote
// (not its own manifest) with their sizes counted, and oflm itself (the
// fake's `list --json`, which checks every listed file) sees the model
// installed. The conversion's folder stays verified.
func TestPreparedFolderRegisters(t *testing.T) {
	l, ks, dir, res := prepare(t)
	reg, err := l.Register(Registration{Kernels: ks})
	if err != nil {
		t.Fatalf("Register on the folder Convert wrote: %v", err)
	}

	var wrote []string
	var sum int64
	for _, f := range res.Files {
		wrote = append(wrote, f.Name)
		sum += f.Size
	}
	listed := slices.Clone(reg.Files)
	slices.Sort(wrote)
	slices.Sort(listed)
	if !slices.Equal(listed, wrote) {
		t.Errorf("registry files %v, Convert wrote %v", listed, wrote)
	}
	if want := max(sum, sizeFromTag("2b")); reg.Size != want {
		t.Errorf("registry size %d, want %d (the files' %d, at least the tag's 2e9)", reg.Size, want, sum)
	}
	if reg.Dir != dir || reg.ContextLength != 2048 {
		t.Errorf("registered %s with context %d, want %s and the manifest's 2048", reg.Dir, reg.ContextLength, dir)
	}
	models, err := List(context.Background(), fakeExe, l.ServeEnv(ks))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(models, func(m Listed) bool { return m.Tag == Tag })
	if i < 0 || !models[i].Installed {
		t.Errorf("oflm list: %+v; want %s installed", models, Tag)
	}
	if _, err := modeloflm.Verify(dir); err != nil {
		t.Errorf("after Register: %v", err)
	}
}

// TestRegisterRefusesADamagedConversion: a folder whose conversion
// manifest no longer verifies (a file changed or cut short since) is not
// registered, and the message says to prepare the weights again.
func TestRegisterRefusesADamagedConversion(t *testing.T) {
	l, ks, dir, _ := prepare(t)
	f, err := os.OpenFile(filepath.Join(dir, "model.q4nx"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if err := f.Truncate(st.Size() - 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(l.Registry)
	_, err = l.Register(Registration{Kernels: ks})
	if err == nil || !strings.Contains(err.Error(), "prepare the weights again") {
		t.Fatalf("Register on a damaged conversion: %v", err)
	}
	if after, _ := os.ReadFile(l.Registry); string(after) != string(before) {
		t.Errorf("the registry changed:\n%s", after)
	}
}
