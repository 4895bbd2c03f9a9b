package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/jsonedit"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub/hubtest"
)

// FastFlowLM's own qwen3:0.6b as its v0.9.45 list names it.
const (
	qwenRepo   = "FastFlowLM/Qwen3-0.6B-NPU2"
	qwenRev    = "v0.9.22-faster-q4-1"
	qwenFolder = "Qwen3-0.6B-NPU2"
)

// flmRepoFiles is a small stand-in for one of FastFlowLM's model
// repositories: the files its list names, and one it does not.
func flmRepoFiles(tag string) []hubtest.File {
	return []hubtest.File{
		{Path: "README.md", Content: []byte("# " + tag + "\n")},
		{Path: "config.json", Content: []byte(`{"model_type": "qwen3", "flm_version": "0.9.22"}` + "\n")},
		{Path: "model.q4nx", Content: blob("model.q4nx"+tag, 200_000), LFS: true},
		{Path: "tokenizer.json", Content: blob("tokenizer.json"+tag, 30_000), LFS: true},
		// Not what NPU Chat's own port needs (eos_token an object): a
		// tokenizer step that ran without facts would change or refuse it.
		{Path: "tokenizer_config.json", Content: []byte(`{"eos_token": {"content": "<|im_end|>"}, "chat_template": "x"}` + "\n")},
	}
}

// TestInstallFastFlowLMModel: a model of FastFlowLM's own list installs
// as NPU Chat's does, from its repository and revision on the (fake)
// hub, into FastFlowLM's models folder, registered under its own tag
// with its own entry; its tokenizer files are left as they came (no
// facts, no edit); its kernels are FastFlowLM's, linked, never copied
// as NPU Chat's; uninstall removes its files and leaves FastFlowLM's
// list as it was.
func TestInstallFastFlowLMModel(t *testing.T) {
	e := newEnv(t, true)
	e.hub.AddRepo(qwenRepo, qwenRev, flmRepoFiles("qwen3:0.6b"))
	in := e.installer()
	res, err := in.Install(context.Background(), "qwen3:0.6b", InstallOptions{})
	must(t, err)
	dir := filepath.Join(e.root, "models", qwenFolder)
	if len(res.Downloaded) != 4 || res.Manifest.Dir != dir || res.Manifest.Target != TargetFLM {
		t.Fatalf("downloaded %v into %s (%s)", res.Downloaded, res.Manifest.Dir, res.Manifest.Target)
	}
	for _, f := range flmRepoFiles("qwen3:0.6b") {
		b, err := os.ReadFile(filepath.Join(dir, f.Path))
		if f.Path == "README.md" {
			if err == nil {
				t.Error("README.md is not in the list's files but was installed")
			}
			continue
		}
		if f.Path == "config.json" {
			continue // its flm_version may be set for the FastFlowLM here
		}
		if err != nil || !bytes.Equal(b, f.Content) {
			t.Errorf("%s: %v, or not as downloaded", f.Path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json.bak")); err == nil {
		t.Error("the tokenizer step edited a model without tokenizer facts")
	}
	// FastFlowLM's list already held the entry: unchanged, byte for byte.
	sys, _ := os.ReadFile(filepath.Join(e.root, "model_list.json"))
	if !bytes.Equal(sys, e.origSys) {
		t.Error("FastFlowLM's list changed, though it held the model's entry already")
	}
	// NPU Chat's list (FLM_CONFIG_PATH) has the same entry.
	own := filepath.Join(e.cfg.DataDir, "flm", "model_list.json")
	if !reflect.DeepEqual(flmEntry(t, own, "qwen3", "0.6b"), flmEntry(t, filepath.Join(e.root, "model_list.json"), "qwen3", "0.6b")) {
		t.Error("NPU Chat's list does not hold FastFlowLM's own entry")
	}
	// The kernels: FastFlowLM's folder, linked from NPU Chat's root.
	link := filepath.Join(e.cfg.DataDir, "flm", "xclbins", qwenFolder)
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("NPU Chat's kernel folder %s is not a link to FastFlowLM's: %v", link, err)
	}
	if len(res.Manifest.XclbinDirs) != 0 {
		t.Errorf("kernel folders recorded as NPU Chat's: %v", res.Manifest.XclbinDirs)
	}
	loc, err := Locate(e.cfg, "qwen3:0.6b")
	if err != nil || loc.Dir != dir || loc.Format != "flm-q4nx" {
		t.Errorf("Locate = %+v, %v", loc, err)
	}
	st, err := in.Status(context.Background())
	must(t, err)
	if len(st) != 2 || st[1].Model != "qwen3:0.6b" || !st[1].Installed {
		t.Errorf("status lists %+v, want minicpm5:2b and the installed qwen3:0.6b", st)
	}
	if _, err := in.Uninstall(context.Background(), "qwen3:0.6b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.q4nx")); err == nil {
		t.Error("uninstall left model.q4nx")
	}
	if sys, _ := os.ReadFile(filepath.Join(e.root, "model_list.json")); !bytes.Equal(sys, e.origSys) {
		t.Errorf("uninstall changed FastFlowLM's list: %d bytes, was %d", len(sys), len(e.origSys))
	}
	if _, err := os.Stat(filepath.Join(e.root, "xclbins", qwenFolder, "attn.xclbin")); err != nil {
		t.Error("uninstall removed FastFlowLM's own kernels")
	}
}

func flmEntry(t *testing.T, list, family, tag string) any {
	t.Helper()
	m := readJSON(t, list)
	fam, _ := m["models"].(map[string]any)[family].(map[string]any)
	return fam[tag]
}

// TestFastFlowLMModelCases: where a FastFlowLM model goes, or why not,
// with each kind of FastFlowLM (none, one whose list names another
// revision, one whose list lacks it, one whose list is not what it
// should be).
func TestFastFlowLMModelCases(t *testing.T) {
	cases := []struct {
		name  string
		model string
		flm   bool
		// list rewrites FastFlowLM's model_list.json (nil: as shipped).
		list func(t *testing.T, b []byte) []byte
		repo string // the repository@revision the hub serves
		// want: "" installs; else the error holds it, with no hub
		// request and nothing written.
		want string
		// dir is where it lands, relative to the FastFlowLM root ("flm/")
		// or the data folder ("data/").
		dir string
	}{
		{name: "no FastFlowLM, a model the CPU runs", model: "qwen3:0.6b", repo: qwenRepo + "@" + qwenRev, dir: "models/" + qwenFolder},
		{name: "no FastFlowLM, a model only the NPU runs", model: "llama3.2:1b", repo: "FastFlowLM/Llama-3.2-1B-NPU2@v0.9.21-merge-lm-head",
			want: "runs on the NPU only"},
		{name: "no FastFlowLM, a vision model", model: "gemma3:4b", repo: "FastFlowLM/Gemma3-4B-NPU2@v0.9.23-optimize-vision",
			want: "vision or audio"},
		{name: "FastFlowLM lists another revision", model: "qwen3:0.6b", flm: true, repo: qwenRepo + "@v0.9.99-newer",
			list: func(t *testing.T, b []byte) []byte {
				return bytes.Replace(b, []byte(qwenRepo+"/resolve/"+qwenRev), []byte(qwenRepo+"/resolve/v0.9.99-newer"), 1)
			},
			dir: "flm/models/" + qwenFolder},
		{name: "FastFlowLM's list lacks it", model: "qwen3:0.6b", flm: true, repo: qwenRepo + "@" + qwenRev,
			list: func(t *testing.T, b []byte) []byte {
				o, err := jsonedit.ParseObject(b)
				must(t, err)
				if _, err := flm.RemoveEntry(o, "qwen3", "0.6b", qwenFolder); err != nil {
					t.Fatal(err)
				}
				return o.Raw()
			},
			dir: "flm/models/" + qwenFolder},
		{name: "FastFlowLM's list is not JSON", model: "qwen3:0.6b", flm: true, repo: qwenRepo + "@" + qwenRev,
			list: func(t *testing.T, b []byte) []byte { return b[:len(b)/2] }, want: "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.flm)
			repo, rev, _ := strings.Cut(c.repo, "@")
			e.hub.AddRepo(repo, rev, flmRepoFiles(c.model))
			sysList := filepath.Join(e.root, "model_list.json")
			var listBefore []byte
			if c.list != nil {
				listBefore = c.list(t, e.origSys)
				must(t, os.WriteFile(sysList, listBefore, 0o644))
			}
			before := snapshot(t, e.base)
			res, err := e.installer().Install(context.Background(), c.model, InstallOptions{})
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want %q", err, c.want)
				}
				if n := contentRequests(e.hub); n != 0 {
					t.Errorf("%d downloads before the refusal", n)
				}
				if after := snapshot(t, e.base); !reflect.DeepEqual(before, after) {
					for p := range after {
						if before[p] != after[p] && filepath.Base(p) != ".lock" {
							t.Errorf("the refused install wrote %s", p)
						}
					}
				}
				if c.flm && c.list != nil {
					if b, _ := os.ReadFile(sysList); !bytes.Equal(b, listBefore) {
						t.Error("FastFlowLM's list changed")
					}
				}
				return
			}
			must(t, err)
			want := filepath.Join(e.root, strings.TrimPrefix(c.dir, "flm/"))
			if !c.flm {
				want = filepath.Join(e.cfg.ModelsDir, strings.TrimPrefix(c.dir, "models/"))
			}
			if res.Manifest.Dir != want || res.Manifest.Repo != repo || res.Manifest.Revision != rev {
				t.Errorf("installed %s@%s into %s, want %s@%s into %s", res.Manifest.Repo, res.Manifest.Revision, res.Manifest.Dir, repo, rev, want)
			}
			if _, err := os.Stat(filepath.Join(want, "model.q4nx")); err != nil {
				t.Error(err)
			}
			if c.flm {
				// Registered exactly as FastFlowLM's list had it, or as
				// the embedded v0.9.45 list has it where it lacks it.
				own := filepath.Join(e.cfg.DataDir, "flm", "model_list.json")
				got := flmEntry(t, own, "qwen3", "0.6b")
				ref := flmEntry(t, sysList, "qwen3", "0.6b")
				if ref == nil {
					var shipped map[string]any
					must(t, json.Unmarshal(e.origSys, &shipped))
					ref = shipped["models"].(map[string]any)["qwen3"].(map[string]any)["0.6b"]
				}
				if !reflect.DeepEqual(got, ref) {
					t.Errorf("NPU Chat's list holds %v, want %v", got, ref)
				}
			}
		})
	}
}

// TestFailedListEditKeepsModelList: FastFlowLM's list is valid JSON but
// not shaped as FastFlowLM's ("models" an array): registering fails with
// an error, and the list is byte for byte as it was.
func TestFailedListEditKeepsModelList(t *testing.T) {
	e := newEnv(t, true)
	e.hub.AddRepo(qwenRepo, qwenRev, flmRepoFiles("qwen3:0.6b"))
	sysList := filepath.Join(e.root, "model_list.json")
	odd := []byte(`{"model_path": "models", "models": ["not", "an", "object"]}` + "\n")
	must(t, os.WriteFile(sysList, odd, 0o644))
	_, err := e.installer().Install(context.Background(), "qwen3:0.6b", InstallOptions{})
	if err == nil {
		t.Fatal("a list whose models is an array was edited")
	}
	if b, _ := os.ReadFile(sysList); !bytes.Equal(b, odd) {
		t.Errorf("FastFlowLM's list changed to %s", b)
	}
	if _, err := os.Stat(sysList + ".tmp"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Error("a temporary list was left behind")
	}
}
