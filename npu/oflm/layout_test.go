package oflm

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
)

func TestNewLayout(t *testing.T) {
	tests := []struct {
		name, goos, env, home string
		root, registry        string
	}{
		{name: "OFLM_MODEL_PATH is the parent of models", goos: "linux", env: "/data/oflm", home: "/home/u",
			root: "/data/oflm", registry: "/data/oflm/model_list.json"},
		{name: "Linux default", goos: "linux", home: "/home/u", root: "/home/u/.config/oflm", registry: "/home/u/.config/oflm/model_list.json"},
		{name: "Windows default", goos: "windows", home: `C:\Users\u`, root: `C:\Users\u\.oflm`, registry: `C:\Users\u\.oflm\model_list.json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLayout(tt.goos, func(k string) string {
				if k == "OFLM_MODEL_PATH" {
					return tt.env
				}
				return "/not/this/" + k // FLM's variables are not oflm's folder
			}, tt.home, "")
			if err != nil || l.Root != tt.root || l.Registry != tt.registry {
				t.Fatalf("NewLayout = %+v, %v; want root %s registry %s", l, err, tt.root, tt.registry)
			}
		})
	}
	if _, err := NewLayout("linux", nil, "", ""); err == nil {
		t.Error("no home and no OFLM_MODEL_PATH: no error")
	}
}

func TestFindKernels(t *testing.T) {
	type setup struct {
		packaged, modelDir, xclbinEnv, userRoot bool
		brokenModelDir, escaping                bool
		// ggufMissing: the model folder's set has a nested gguf manifest
		// naming a file that is not there.
		ggufMissing bool
		// kernelsEnv: $OFLM_OPEN_KERNELS_DIR (legacyKernelsEnv: the
		// pre-rename $FLM_OPEN_KERNELS_DIR) names a set.
		kernelsEnv, legacyKernelsEnv bool
		// linkedExe: the oflm found is /usr/bin/oflm, a link to
		// /opt/bin/oflm (oflm's packages: /usr/bin/oflm beside the
		// /opt/openflowlm prefix).
		linkedExe bool
	}
	tests := []struct {
		name    string
		s       setup
		want    string // which set: packaged, model, env, user
		wantErr string
	}{
		{name: "a set named by OFLM_OPEN_KERNELS_DIR first", s: setup{kernelsEnv: true, packaged: true, modelDir: true}, want: "named"},
		{name: "a set named by FLM_OPEN_KERNELS_DIR first", s: setup{legacyKernelsEnv: true, packaged: true}, want: "named"},
		{name: "packaged set first", s: setup{packaged: true, modelDir: true, userRoot: true}, want: "packaged"},
		{name: "packaged set of a linked oflm", s: setup{packaged: true, userRoot: true, linkedExe: true}, want: "packaged"},
		{name: "the model folder's next", s: setup{modelDir: true, xclbinEnv: true}, want: "model"},
		{name: "OFLM_XCLBIN_PATH", s: setup{xclbinEnv: true, userRoot: true}, want: "env"},
		{name: "oflm's folder", s: setup{userRoot: true}, want: "user"},
		{name: "a set missing a file does not count", s: setup{brokenModelDir: true, userRoot: true}, want: "user"},
		{name: "a set missing a file its gguf manifest names does not count", s: setup{ggufMissing: true, userRoot: true}, want: "user"},
		{name: "none", wantErr: "no open kernel set for " + Folder},
		{name: "a manifest naming files outside its folder", s: setup{escaping: true}, wantErr: "outside its folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			exe := filepath.Join(base, "opt", "bin", "oflm")
			l := Layout{Root: filepath.Join(base, "home", ".config", "oflm"), Exe: exe}
			if tt.s.linkedExe {
				l.Exe = filepath.Join(base, "usr", "bin", "oflm")
				for _, d := range []string{filepath.Dir(exe), filepath.Dir(l.Exe)} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(exe, []byte("oflm"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(exe, l.Exe); err != nil {
					t.Fatalf("link %s: %v", l.Exe, err)
				}
			}
			modelDir := l.ModelDir(Folder)
			envRoot := filepath.Join(base, "xcl")
			places := map[string]string{
				"packaged": filepath.Join(base, "opt", "share", "oflm", "xclbins", Folder, "open_kernels"),
				"model":    filepath.Join(modelDir, "open_kernels"),
				"env":      filepath.Join(envRoot, "xclbins", Folder, "open_kernels"),
				"user":     filepath.Join(l.Root, "xclbins", Folder, "open_kernels"),
				"named":    filepath.Join(base, "my-build", "open_kernels"),
			}
			if tt.s.kernelsEnv || tt.s.legacyKernelsEnv {
				copyTree(t, "open_kernels", places["named"])
			}
			if tt.s.packaged {
				copyTree(t, "open_kernels", places["packaged"])
			}
			if tt.s.ggufMissing {
				copyTree(t, "open_kernels", places["model"])
				oflmtest.EditJSON(t, filepath.Join(places["model"], "manifest.json"), func(m map[string]any) {
					gguf := maps.Clone(m)
					gguf["contexts"] = map[string]any{"dx": "gguf/dx.xclbin", "ln": "ln/final.xclbin"}
					m["gguf"] = gguf
				})
			}
			if tt.s.modelDir || tt.s.brokenModelDir || tt.s.escaping {
				copyTree(t, "open_kernels", places["model"])
			}
			if tt.s.brokenModelDir {
				os.Remove(filepath.Join(places["model"], "ln", "insts.bin"))
			}
			if tt.s.escaping {
				oflmtest.EditJSON(t, filepath.Join(places["model"], "manifest.json"), func(m map[string]any) {
					m["contexts"].(map[string]any)["dx"] = "../../../../etc/passwd"
				})
			}
			if tt.s.xclbinEnv {
				copyTree(t, "open_kernels", places["env"])
			}
			if tt.s.userRoot {
				copyTree(t, "open_kernels", places["user"])
			}
			getenv := func(k string) string {
				switch {
				case k == "OFLM_XCLBIN_PATH" && tt.s.xclbinEnv:
					return filepath.Join(envRoot, "xclbins") // a trailing xclbins is stripped
				case k == "OFLM_OPEN_KERNELS_DIR" && tt.s.kernelsEnv, k == "FLM_OPEN_KERNELS_DIR" && tt.s.legacyKernelsEnv:
					return places["named"]
				}
				return ""
			}
			ks, err := l.FindKernels(getenv, modelDir, Folder)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FindKernels = %+v, %v; want an error with %q", ks, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ks.Dir != filepath.Clean(places[tt.want]) {
				t.Errorf("found %s, want the %s set %s", ks.Dir, tt.want, places[tt.want])
			}
			if ks.Manifest.MaxCtxDefault != 4096 || len(ks.Manifest.Files()) != 4 {
				t.Errorf("manifest %+v", ks.Manifest)
			}
			wantRoot := map[string]string{"packaged": filepath.Join(base, "opt", "share", "oflm"), "model": "", "env": envRoot, "user": l.Root}[tt.want]
			if ks.Root != wantRoot {
				t.Errorf("root %q, want %q", ks.Root, wantRoot)
			}
		})
	}
}

// TestRegister writes the registry entry over an existing user registry,
// keeping everything else in it.
func TestRegister(t *testing.T) {
	inst := install(t) // registers once into a new file
	l := inst.layout
	other := `{
  "model_path": "models",
  "custom": true,
  "models": {
    "qwen3": {"4b": {"name": "Qwen3-4B-NPU2", "size": 4000000000}},
    "minicpm5": {"2b": {"name": "old", "label": ["mine"]}}
  }
}
`
	if err := os.WriteFile(l.Registry, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := l.Register(Registration{Kernels: inst.kernels, OFLMVersion: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.Registry)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Custom bool                                  `json:"custom"`
		Models map[string]map[string]json.RawMessage `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("registry %s: %v", b, err)
	}
	if !list.Custom || string(list.Models["qwen3"]["4b"]) != `{"name": "Qwen3-4B-NPU2", "size": 4000000000}` {
		t.Errorf("other keys or entries lost:\n%s", b)
	}
	var e struct {
		Name       string   `json:"name"`
		Files      []string `json:"files"`
		Size       int64    `json:"size"`
		Context    int      `json:"default_context_length"`
		Prefill    int      `json:"max_prefill_len"`
		MinVersion string   `json:"oflm_min_version"`
		FileURL    *string  `json:"file_url"`
		Label      []string `json:"label"`
		Details    struct{ Family, Format string }
	}
	if err := json.Unmarshal(list.Models["minicpm5"]["2b"], &e); err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"}
	if e.Name != Folder || strings.Join(e.Files, ",") != strings.Join(wantFiles, ",") || e.Size != 2e9 ||
		e.Context != 4096 || e.Prefill != 4096 || e.MinVersion != "0.1.0" || e.FileURL == nil ||
		e.Details.Family != "llama3" || e.Details.Format != "NPU2" || len(e.Label) != 1 {
		t.Errorf("entry %+v\n%s", e, list.Models["minicpm5"]["2b"])
	}
	if reg.ContextLength != 4096 || reg.Dir != l.ModelDir(Folder) {
		t.Errorf("Registered %+v", reg)
	}
	if bak, err := os.ReadFile(l.Registry + ".bak"); err != nil || !strings.Contains(string(bak), `"models": {}`) {
		t.Errorf(".bak = %q, %v; want the registry before NPU Chat's first change", bak, err)
	}
}

// TestListSeesRegistration: oflm itself (the fake's `list --json`, which
// reads the registry and folder ServeEnv names) lists the registered model
// as installed, and as not installed when a file is gone.
func TestListSeesRegistration(t *testing.T) {
	inst := install(t)
	env := inst.layout.ServeEnv(inst.kernels)
	installedNow := func() (bool, bool) {
		models, err := List(context.Background(), fakeExe, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range models {
			if m.Tag == Tag {
				return true, m.Installed
			}
		}
		return false, false
	}
	if listed, ok := installedNow(); !listed || !ok {
		t.Fatalf("%s listed %v installed %v", Tag, listed, ok)
	}
	os.Remove(filepath.Join(inst.layout.ModelDir(Folder), "tokenizer.json"))
	if listed, ok := installedNow(); !listed || ok {
		t.Errorf("without tokenizer.json: listed %v installed %v", listed, ok)
	}
}

func TestRegisterRefuses(t *testing.T) {
	tests := []struct {
		name    string
		change  func(t *testing.T, inst installed)
		wantErr string
	}{
		{name: "the qwen3-relabelled pack", wantErr: `config.json model_type "qwen3" is not one this kernel set serves (["llama"])`,
			change: func(t *testing.T, inst installed) {
				b, _ := os.ReadFile(filepath.Join("testdata", "qwen3_config.json"))
				os.WriteFile(filepath.Join(inst.layout.ModelDir(Folder), "config.json"), b, 0o644)
			}},
		{name: "weights missing", wantErr: "model.q4nx is missing",
			change: func(t *testing.T, inst installed) {
				os.Remove(filepath.Join(inst.layout.ModelDir(Folder), "model.q4nx"))
			}},
		{name: "eos_token_id not a list", wantErr: "eos_token_id must be a list",
			change: func(t *testing.T, inst installed) {
				os.WriteFile(filepath.Join(inst.layout.ModelDir(Folder), "tokenizer_config.json"),
					[]byte(`{"eos_token": "<|im_end|>", "eos_token_id": 1}`), 0o644)
			}},
		{name: "a broken registry is left alone", wantErr: "is not valid JSON",
			change: func(t *testing.T, inst installed) { os.WriteFile(inst.layout.Registry, []byte(`{"models": `), 0o644) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := install(t)
			tt.change(t, inst)
			before, _ := os.ReadFile(inst.layout.Registry)
			_, err := inst.layout.Register(Registration{Kernels: inst.kernels})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Register: %v; want an error with %q", err, tt.wantErr)
			}
			if after, _ := os.ReadFile(inst.layout.Registry); string(after) != string(before) {
				t.Errorf("the registry changed:\n%s", after)
			}
		})
	}
	if _, err := (Layout{Root: t.TempDir()}).Register(Registration{Folder: "../x", Kernels: &KernelSet{}}); err == nil {
		t.Error("a folder outside models/ was accepted")
	}
}

// TestRegisterChecksAsOflm: Register holds the folder against the kernel
// set the way oflm does at load, with the same check the conversion
// makes (models/oflm.CheckPack): a key the manifest's hf_config_defaults
// supplies may be absent, a checked list (layer_types) is compared as a
// whole, and a value outside it is refused.
func TestRegisterChecksAsOflm(t *testing.T) {
	fullAttention := make([]any, 42)
	for i := range fullAttention {
		fullAttention[i] = "full_attention"
	}
	tests := []struct {
		name     string
		manifest func(map[string]any)
		config   func(map[string]any)
		wantErr  string // "" when Register accepts it
	}{
		{name: "a key the manifest defaults, absent",
			manifest: func(m map[string]any) {
				m["hf_config_check"].(map[string]any)["head_dim"] = 128
				m["hf_config_defaults"] = map[string]any{"head_dim": 128}
			},
			config: func(c map[string]any) { delete(c, "head_dim") }},
		{name: "a key the manifest defaults otherwise, absent", wantErr: "head_dim = 64 (absent: its default)",
			manifest: func(m map[string]any) {
				m["hf_config_check"].(map[string]any)["head_dim"] = 128
				m["hf_config_defaults"] = map[string]any{"head_dim": 64}
			},
			config: func(c map[string]any) { delete(c, "head_dim") }},
		{name: "layer_types, the same list",
			manifest: func(m map[string]any) { m["hf_config_check"].(map[string]any)["layer_types"] = fullAttention },
			config:   func(c map[string]any) { c["layer_types"] = fullAttention }},
		{name: "layer_types, one element of it", wantErr: "layer_types",
			manifest: func(m map[string]any) { m["hf_config_check"].(map[string]any)["layer_types"] = fullAttention },
			config:   func(c map[string]any) { c["layer_types"] = "full_attention" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := install(t)
			dir := inst.layout.ModelDir(Folder)
			oflmtest.EditJSON(t, filepath.Join(inst.kernels.Dir, "manifest.json"), tt.manifest)
			oflmtest.EditJSON(t, filepath.Join(dir, "config.json"), tt.config)
			ks, err := ReadKernelSet(inst.kernels.Dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = inst.layout.Register(Registration{Kernels: ks})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Register refused a folder oflm accepts: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Register: %v; want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestServeEnv: whichever generation of oflm runs, it finds the folder,
// the registry and the kernel set in ServeEnv by the names it reads:
// newer builds OFLM_* (engine.cpp @f3b9cda reads OFLM_OPEN_KERNELS_DIR
// with no fallback), builds from before the rename only FLM_*
// (utils.cpp @06a0458, engine.cpp Cyronius @4465c53).
func TestServeEnv(t *testing.T) {
	l := Layout{Root: "/home/u/.config/oflm", Registry: "/home/u/.config/oflm/model_list.json"}
	ks := &KernelSet{Dir: "/opt/openflowlm/share/oflm/xclbins/MiniCPM5-2B-NPU2/open_kernels", Root: "/opt/openflowlm/share/oflm"}
	env := map[string]string{}
	for _, kv := range l.ServeEnv(ks) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, prefix := range []string{"OFLM_", "FLM_"} {
		want := map[string]string{
			"MODEL_PATH":           l.Root,
			"CONFIG_PATH":          l.Registry,
			"XCLBIN_PATH":          ks.Root,
			"OPEN_KERNELS_DIR":     ks.Dir,
			"DISABLE_UPDATE_CHECK": "1",
		}
		for k, v := range want {
			if env[prefix+k] != v {
				t.Errorf("%s%s = %q, want %q", prefix, k, env[prefix+k], v)
			}
		}
	}
	if env["OFLM_LLAMA_ENGINE"] != "open" {
		t.Errorf("OFLM_LLAMA_ENGINE = %q, want open", env["OFLM_LLAMA_ENGINE"])
	}
}

// TestReadKernelSetRefusesAsOflm: a manifest that oflm's Manifest::parse
// (src/open_qwen36/manifest.cpp @105d644) refuses does not count as a
// kernel set here either; each row spoils the test set's manifest in one
// way that oflm refuses.
func TestReadKernelSetRefusesAsOflm(t *testing.T) {
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"no manifest_version", func(m map[string]any) { delete(m, "manifest_version") }, "lacks manifest_version"},
		{"manifest_version 2", func(m map[string]any) { m["manifest_version"] = 2 }, "manifest_version 2 (oflm reads 1)"},
		{"no family", func(m map[string]any) { delete(m, "family") }, "lacks family"},
		{"no layout", func(m map[string]any) { delete(m, "layout") }, "lacks layout"},
		{"a layout without pool_bytes", func(m map[string]any) { delete(m["layout"].(map[string]any), "pool_bytes") }, "layout lacks pool_bytes"},
		{"rope_inv_freq short of half the rotary dim", func(m map[string]any) { m["layout"].(map[string]any)["rotary_dim"] = 128 },
			"layout has 4 rope_inv_freq values, its rotary_dim 128 wants 64"},
		{"no layers", func(m map[string]any) { m["layers"] = []any{} }, "names no layers"},
		{"a layer of an unknown type", func(m map[string]any) { m["layers"] = []any{"dense", "moe"} }, "layers names unknown layer type moe"},
		{"a layer type without a program", func(m map[string]any) {
			delete(m["layer_types"].(map[string]any)["dense"].(map[string]any), "program")
		}, "layer type dense lacks program"},
		{"no contexts", func(m map[string]any) { delete(m, "contexts") }, "lacks contexts"},
		{"a kernel without insts", func(m map[string]any) { delete(m["kernels"].(map[string]any)["ln"].(map[string]any), "insts") }, "kernel ln lacks insts"},
		{"a kernel of an unknown context", func(m map[string]any) { m["kernels"].(map[string]any)["ln"].(map[string]any)["context"] = "lm" },
			"kernel ln names unknown context lm"},
		{"no tail", func(m map[string]any) { delete(m, "tail") }, "lacks tail"},
		{"no globals", func(m map[string]any) { delete(m, "globals") }, "lacks globals"},
		{"no pack", func(m map[string]any) { delete(m, "pack") }, "lacks pack"},
		{"an lm_head without ops", func(m map[string]any) { m["pack"].(map[string]any)["lm_head"] = map[string]any{"ops": []any{}} }, "pack.lm_head has no ops"},
		{"no hf_config_check", func(m map[string]any) { delete(m, "hf_config_check") }, "lacks hf_config_check"},
		{"a gguf manifest oflm refuses", func(m map[string]any) {
			gguf := maps.Clone(m)
			delete(gguf, "layout")
			m["gguf"] = gguf
		}, "gguf: lacks layout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "open_kernels")
			copyTree(t, "open_kernels", dir)
			if _, err := ReadKernelSet(dir); err != nil {
				t.Fatalf("the test set itself: %v", err)
			}
			oflmtest.EditJSON(t, filepath.Join(dir, "manifest.json"), tt.edit)
			ks, err := ReadKernelSet(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "oflm refuses such a set") {
				t.Errorf("ReadKernelSet = %v, %v; want an error with %q", ks, err, tt.want)
			}
		})
	}
}
