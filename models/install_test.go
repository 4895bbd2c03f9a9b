package models

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/npuchat/npuchat/jsonedit"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/models/hub"
	"github.com/npuchat/npuchat/models/hub/hubtest"
)

const repo = "julianmb/MiniCPM5-2B-NPU2"

func blob(name string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13+len(name)) ^ name[i%len(name)]
	}
	return b
}

// portFiles is a small stand-in for the real repository: same names,
// JSON files shaped like the real ones, random bytes for the rest.
func portFiles(version string) []hubtest.File {
	return []hubtest.File{
		{Path: ".gitattributes", Content: []byte("*.q4nx filter=lfs\n")},
		{Path: "README.md", Content: []byte("# MiniCPM5-2B-NPU2\n")},
		{Path: "config.json", Content: []byte(`{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_key_value_heads": 8, "flm_version": "0.9.22"}` + "\n")},
		{Path: "model.q4nx", Content: blob("model.q4nx"+version, 300_000), LFS: true},
		{Path: "tokenizer.json", Content: blob("tokenizer.json", 40_000), LFS: true},
		{Path: "tokenizer_config.json", Content: []byte(`{"bos_token": "<|im_start|>", "eos_token": {"content": "<|im_end|>", "special": true}, "eos_token_id": 130073, "chat_template": "{{'<|im_start|>'}}", "tokenizer_class": "Qwen2Tokenizer"}` + "\n")},
		{Path: "special_tokens_map.json", Content: []byte(`{"eos_token": "<|im_end|>"}`)},
		{Path: "chat_template.jinja", Content: []byte("{% for m in messages %}<|im_start|>{{m.role}}\n{{m.content}}<|im_end|>\n{% endfor %}")},
		{Path: "attn.xclbin", Content: blob("attn", 5000), LFS: true},
		{Path: "mm.xclbin", Content: blob("mm", 5000), LFS: true},
		{Path: "layer.xclbin", Content: blob("layer", 5000), LFS: true},
		{Path: "dequant.xclbin", Content: blob("dequant", 5000), LFS: true},
	}
}

type env struct {
	t       *testing.T
	hub     *hubtest.Server
	cfg     *config.Config
	root    string // fake FastFlowLM root (--flm-root)
	base    string
	origSys []byte
}

// newEnv makes a fake hub, a fake FastFlowLM root holding a real flm
// script (for `flm version --json`), FastFlowLM's real model list and a
// kernel folder of a built-in model, and an NPU Chat data folder.
func newEnv(t *testing.T, withFLM bool) *env {
	t.Helper()
	e := &env{t: t, base: t.TempDir()}
	e.hub = hubtest.New(repo, "main", portFiles("v1"))
	t.Cleanup(e.hub.Close)
	cfg, err := config.Load(config.MapEnv(map[string]string{
		"HOME": filepath.Join(e.base, "home"), "NPUCHAT_DATA": filepath.Join(e.base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(e.base, "settings.json"), "HF_ENDPOINT": e.hub.URL(), "HF_TOKEN": "hf_test",
	}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	e.root = filepath.Join(e.base, "flm")
	if withFLM {
		must(t, os.MkdirAll(filepath.Join(e.root, "xclbins", "Qwen3-0.6B-NPU2"), 0o755))
		must(t, os.WriteFile(filepath.Join(e.root, "xclbins", "Qwen3-0.6B-NPU2", "attn.xclbin"), []byte("qwen kernels"), 0o644))
		must(t, os.WriteFile(filepath.Join(e.root, "flm"), []byte("#!/bin/sh\n[ \"$1 $2\" = \"version --json\" ] && echo '{\"version\": \"0.9.45\"}'\n"), 0o755))
		sys, err := os.ReadFile("flm/testdata/flm_v0.9.45.input.json")
		must(t, err)
		e.origSys = sys
		must(t, os.WriteFile(filepath.Join(e.root, "model_list.json"), sys, 0o644))
	}
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) installer() *Installer {
	in, err := NewInstaller(e.cfg, Options{FLMRoot: e.root, GOOS: "linux", Getenv: func(string) string { return "" }})
	must(e.t, err)
	if _, err := os.Stat(e.root); err != nil {
		in.Probe.Root = ""
		in.Probe.LookPath = func(string) (string, error) { return "", errors.New("no flm") }
		in.Probe.Stat = func(string) (fs.FileInfo, error) { return nil, fs.ErrNotExist }
	}
	in.Hub.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	in.Free = func(string) (uint64, error) { return 100 << 30, nil }
	return in
}

func (e *env) modelDir() string { return filepath.Join(e.root, "models", "MiniCPM5-2B-NPU2") }

// snapshot maps every file under the folders to its content hash and
// modification time.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	out := map[string]string{}
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil
			}
			info, _ := os.Lstat(p)
			b, _ := os.ReadFile(p)
			h := sha256.Sum256(b)
			out[p] = hex.EncodeToString(h[:8]) + " " + info.ModTime().String()
			return nil
		})
	}
	return out
}

// waitFileClock returns once a file written now gets a later
// modification time than every file under dirs has: from then on, a
// file written again shows in snapshot (file times advance in coarse
// ticks, several milliseconds apart).
func waitFileClock(t *testing.T, dirs ...string) {
	t.Helper()
	var latest time.Time
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
			if info, ierr := os.Lstat(p); err == nil && ierr == nil && info.ModTime().After(latest) {
				latest = info.ModTime()
			}
			return nil
		})
	}
	probe := filepath.Join(t.TempDir(), "probe")
	for {
		if err := os.WriteFile(probe, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(probe)
		if err != nil {
			t.Fatal(err)
		}
		if info.ModTime().After(latest) {
			return
		}
		runtime.Gosched()
	}
}

func contentRequests(s *hubtest.Server) int {
	n := 0
	for _, r := range s.Requests() {
		if !strings.Contains(r.Path, "/api/") {
			n++
		}
	}
	return n
}

func readJSON(t *testing.T, p string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(b, &m))
	return m
}

func entryOf(t *testing.T, list string) map[string]any {
	m := readJSON(t, list)
	fam, _ := m["models"].(map[string]any)["minicpm5"].(map[string]any)
	if fam == nil {
		return nil
	}
	e, _ := fam["2b"].(map[string]any)
	return e
}

func TestInstallWithFLM(t *testing.T) {
	e := newEnv(t, true)
	in := e.installer()
	var events []Event
	in.Progress = func(ev Event) { events = append(events, ev) }
	res, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	if len(res.Downloaded) != 10 {
		t.Errorf("downloaded %v", res.Downloaded)
	}
	dir := e.modelDir()
	for _, f := range portFiles("v1") {
		_, err := os.Stat(filepath.Join(dir, f.Path))
		if wanted := f.Path != ".gitattributes" && f.Path != "README.md"; wanted != (err == nil) {
			t.Errorf("%s: present=%v", f.Path, err == nil)
		}
	}
	// tokenizer_config.json as FastFlowLM needs it, other keys kept.
	tc := readJSON(t, filepath.Join(dir, "tokenizer_config.json"))
	if tc["eos_token"] != "<|im_end|>" || !reflect.DeepEqual(tc["eos_token_id"], []any{1.0, 130073.0}) || tc["bos_token_id"] != 0.0 || tc["pad_token_id"] != 1.0 || tc["tokenizer_class"] != "Qwen2Tokenizer" || tc["chat_template"] != "{{'<|im_start|>'}}" {
		t.Errorf("tokenizer_config = %v", tc)
	}
	if bak, _ := os.ReadFile(filepath.Join(dir, "tokenizer_config.json.bak")); !bytes.Equal(bak, portFiles("v1")[5].Content) {
		t.Error("tokenizer_config.json.bak is not the downloaded original")
	}
	if c := readJSON(t, filepath.Join(dir, "config.json")); c["flm_version"] != "0.9.22" || c["num_key_value_heads"] != 8.0 {
		t.Errorf("config.json = %v", c)
	}
	// Kernels: in NPU Chat's root and in FastFlowLM's (writable here).
	own := filepath.Join(e.cfg.DataDir, "flm", "xclbins")
	for _, d := range []string{filepath.Join(own, "MiniCPM5-2B-NPU2"), filepath.Join(e.root, "xclbins", "MiniCPM5-2B-NPU2")} {
		for _, x := range []string{"attn", "mm", "layer", "dequant"} {
			if b, err := os.ReadFile(filepath.Join(d, x+".xclbin")); err != nil || !bytes.Equal(b, blob(x, 5000)) {
				t.Errorf("%s/%s.xclbin: %v", d, x, err)
			}
		}
	}
	// FastFlowLM's built-in kernels are reachable from NPU Chat's root.
	if b, err := os.ReadFile(filepath.Join(own, "Qwen3-0.6B-NPU2", "attn.xclbin")); err != nil || string(b) != "qwen kernels" {
		t.Errorf("built-in kernels not linked: %v", err)
	}
	// Registered in both lists; FastFlowLM's entries kept in NPU Chat's.
	for _, l := range []string{filepath.Join(e.cfg.DataDir, "flm", "model_list.json"), filepath.Join(e.root, "model_list.json")} {
		ent := entryOf(t, l)
		if ent == nil || ent["name"] != "MiniCPM5-2B-NPU2" || ent["file_url"] == nil {
			t.Errorf("%s: entry %v", l, ent)
		}
		if m := readJSON(t, l)["models"].(map[string]any); m["qwen3"] == nil || m["gemma3"] == nil {
			t.Errorf("%s lost FastFlowLM's models", l)
		}
	}
	if bak, _ := os.ReadFile(filepath.Join(e.root, "model_list.json.bak")); !bytes.Equal(bak, e.origSys) {
		t.Error("FastFlowLM's list has no .bak of its previous version")
	}
	// The engine finds it.
	loc, err := Locate(e.cfg, "MiniCPM5")
	must(t, err)
	if loc.Dir != dir || loc.Format != "flm-q4nx" || len(loc.Weights) != 1 || !loc.Model.Port.InjectedQKNorm {
		t.Errorf("Locate = %+v", loc)
	}
	// The FastFlowLM backend's view.
	layout, err := in.PrepareFLM(context.Background())
	must(t, err)
	if layout.Version != "0.9.45" || layout.Exe != filepath.Join(e.root, "flm") {
		t.Errorf("layout %+v", layout)
	}
	envs := strings.Join(layout.ServeEnv(), " ")
	if !strings.Contains(envs, "FLM_CONFIG_PATH="+filepath.Join(e.cfg.DataDir, "flm", "model_list.json")) || !strings.Contains(envs, "FLM_MODEL_PATH="+e.root) {
		t.Errorf("ServeEnv %s", envs)
	}
	// Progress reached the callback.
	sawDone := false
	for _, ev := range events {
		if ev.File != nil && ev.File.File == "model.q4nx" && ev.File.Done {
			sawDone = true
		}
	}
	if !sawDone {
		t.Error("no download progress events")
	}
	// Verify passes; status is complete.
	reps, err := in.Verify(context.Background(), "minicpm5:2b")
	must(t, err)
	if len(reps) != 1 || !reps[0].OK || len(reps[0].Files) != 18 { // 10 files + 2 x 4 kernel copies
		t.Errorf("verify: %+v", reps[0])
	}
	st, err := in.Status(context.Background())
	must(t, err)
	if len(st) != 1 || !st[0].Installed || st[0].Installs[0].Verified != "yes" || len(st[0].Installs[0].Registered) != 2 {
		t.Errorf("status %+v", st)
	}
}

func TestInstallTwiceChangesNothing(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	before := snapshot(t, e.root, e.cfg.DataDir)
	waitFileClock(t, e.root, e.cfg.DataDir)
	reqs := len(e.hub.Requests())
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	if len(res.Downloaded) != 0 || len(res.Changed) != 0 {
		t.Errorf("second install downloaded %v changed %v", res.Downloaded, res.Changed)
	}
	for _, r := range e.hub.Requests()[reqs:] {
		if !strings.Contains(r.Path, "/api/") {
			t.Errorf("second install fetched %s", r.Path)
		}
	}
	if after := snapshot(t, e.root, e.cfg.DataDir); !reflect.DeepEqual(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("second install touched %s", k)
			}
		}
	}
}

func TestInterruptedInstallResumes(t *testing.T) {
	e := newEnv(t, true)
	e.hub.AddFaults("model.q4nx", hubtest.Fault{DropAfter: 120_000})
	in := e.installer()
	in.Hub.Attempts = 1
	_, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err == nil {
		t.Fatal("install with a dropped connection and one attempt succeeded")
	}
	// Nothing is in place: the model folder holds the previous state
	// (none), the lists are untouched, no record.
	if _, err := os.Stat(e.modelDir()); err == nil {
		entries, _ := os.ReadDir(e.modelDir())
		t.Errorf("model folder exists after a failed first install: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "model_list.json")); !bytes.Equal(b, e.origSys) {
		t.Error("FastFlowLM's list changed by a failed install")
	}
	if _, err := Locate(e.cfg, "minicpm5:2b"); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "npuchat install minicpm5:2b") {
		t.Errorf("Locate after a failed install: %v", err)
	}
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	reqs := e.hub.Requests()
	var ranges []string
	for _, r := range reqs {
		if strings.HasSuffix(r.Path, "/model.q4nx") && strings.HasPrefix(r.Host, "localhost") {
			ranges = append(ranges, r.Range)
		}
	}
	if len(ranges) != 2 || ranges[1] != "bytes=120000-" {
		t.Errorf("model.q4nx requests with Range %q, want a resume from 120000", ranges)
	}
	if len(res.Downloaded) != 10 {
		t.Errorf("downloaded %v", res.Downloaded)
	}
	if _, err := os.Stat(filepath.Join(e.root, "models", ".npuchat-staging")); err == nil {
		t.Error("staging folder left behind")
	}
}

// An update whose download keeps failing leaves the installed version
// exactly as it was.
func TestFailedUpdateKeepsPreviousVersion(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	before := snapshot(t, e.root, e.cfg.DataDir)
	e.hub.AddRepo(repo, "main", portFiles("v2"))
	e.hub.AddFaults("model.q4nx", hubtest.Fault{Corrupt: true}, hubtest.Fault{Corrupt: true})
	in := e.installer()
	in.Hub.Attempts = 2
	_, err = in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if !errors.Is(err, hub.ErrHashMismatch) {
		t.Fatalf("err = %v, want a hash mismatch", err)
	}
	after := snapshot(t, e.root, e.cfg.DataDir)
	for k, v := range after {
		if strings.Contains(k, ".npuchat-staging") {
			continue // downloads of other files wait there for the next run
		}
		if before[k] != v {
			t.Errorf("failed update changed %s", k)
		}
	}
	// The next run completes the update.
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	if !reflect.DeepEqual(res.Downloaded, []string{"model.q4nx"}) {
		t.Errorf("update downloaded %v", res.Downloaded)
	}
	if b, _ := os.ReadFile(filepath.Join(e.modelDir(), "model.q4nx")); !bytes.Equal(b, blob("model.q4nxv2", 300_000)) {
		t.Error("model.q4nx is not v2")
	}
}

func TestInstallWithoutFLM(t *testing.T) {
	e := newEnv(t, false)
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	dir := filepath.Join(e.cfg.ModelsDir, "MiniCPM5-2B-NPU2")
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "needs FastFlowLM") {
		t.Errorf("notes %q", res.Notes)
	}
	if len(res.Downloaded) != 6 {
		t.Errorf("downloaded %v (kernels are useless without FastFlowLM)", res.Downloaded)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.q4nx")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "attn.xclbin")); err == nil {
		t.Error("kernels downloaded without FastFlowLM")
	}
	loc, err := Locate(e.cfg, "minicpm5:2b")
	must(t, err)
	if loc.Dir != dir {
		t.Errorf("Locate dir %s", loc.Dir)
	}
	if _, err := e.installer().PrepareFLM(context.Background()); err == nil || !strings.Contains(err.Error(), "install FastFlowLM") {
		t.Errorf("PrepareFLM without FLM: %v", err)
	}
}

func TestInstallOriginal(t *testing.T) {
	e := newEnv(t, true)
	e.hub.AddRepo("openbmb/MiniCPM5-2B", "main", []hubtest.File{
		{Path: "config.json", Content: []byte(`{"model_type":"llama"}`)},
		{Path: "generation_config.json", Content: []byte(`{}`)},
		{Path: "tokenizer.json", Content: blob("tok", 1000), LFS: true},
		{Path: "tokenizer_config.json", Content: []byte(`{}`)},
		{Path: "special_tokens_map.json", Content: []byte(`{}`)},
		{Path: "chat_template.jinja", Content: []byte(`x`)},
		{Path: "model-00001-of-00002.safetensors", Content: blob("s1", 3000), LFS: true},
		{Path: "model-00002-of-00002.safetensors", Content: blob("s2", 3000), LFS: true},
		{Path: "model.safetensors.index.json", Content: []byte(`{}`)},
		{Path: "README.md", Content: []byte(`x`)},
	})
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{Source: SourceOriginal})
	must(t, err)
	if len(res.Downloaded) != 9 {
		t.Errorf("downloaded %v", res.Downloaded)
	}
	loc, err := Locate(e.cfg, "minicpm5:2b")
	must(t, err)
	if loc.Format != "hf-safetensors" || len(loc.Weights) != 2 || loc.Dir != filepath.Join(e.cfg.ModelsDir, "MiniCPM5-2B") {
		t.Errorf("Locate %+v", loc)
	}
	// Weights are names in Dir, as the API's model sizes and the memory
	// check beside FastFlowLM read them (filepath.Join(Dir, name)).
	if want := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}; !slices.Equal(loc.Weights, want) {
		t.Errorf("Locate weights %q, want %q", loc.Weights, want)
	}
	for _, w := range loc.Weights {
		if st, err := os.Stat(filepath.Join(loc.Dir, w)); err != nil || st.Size() != 3000 {
			t.Errorf("weight %s in %s: %v", w, loc.Dir, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "model_list.json")); !bytes.Equal(b, e.origSys) {
		t.Error("the original model was registered with FastFlowLM")
	}
}

func TestNoSystem(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{NoSystem: true})
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(e.root, "model_list.json")); !bytes.Equal(b, e.origSys) {
		t.Error("--no-system changed FastFlowLM's list")
	}
	if _, err := os.Stat(filepath.Join(e.root, "xclbins", "MiniCPM5-2B-NPU2")); err == nil {
		t.Error("--no-system wrote FastFlowLM's kernel folder")
	}
	if entryOf(t, filepath.Join(e.cfg.DataDir, "flm", "model_list.json")) == nil {
		t.Error("not registered in NPU Chat's list")
	}
}

func TestMalformedSystemListRefused(t *testing.T) {
	e := newEnv(t, true)
	bad := []byte("{\n  \"models\": {,\n}\n")
	must(t, os.WriteFile(filepath.Join(e.root, "model_list.json"), bad, 0o644))
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "model_list.json")); !bytes.Equal(b, bad) {
		t.Error("malformed list was changed")
	}
	if n := contentRequests(e.hub); n != 0 {
		t.Errorf("%d downloads before the broken list was refused", n)
	}
	if _, err := os.Stat(e.modelDir()); err == nil {
		t.Error("model folder created")
	}
}

func TestNotEnoughSpace(t *testing.T) {
	e := newEnv(t, true)
	in := e.installer()
	in.Free = func(string) (uint64, error) { return 1 << 20, nil }
	_, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err == nil || !strings.Contains(err.Error(), "not enough free space") {
		t.Fatalf("err = %v", err)
	}
	if n := contentRequests(e.hub); n != 0 {
		t.Errorf("%d downloads started without the space for them", n)
	}
}

func TestVerifyFindsDamage(t *testing.T) {
	e := newEnv(t, true)
	in := e.installer()
	_, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	p := filepath.Join(e.modelDir(), "model.q4nx")
	b, _ := os.ReadFile(p)
	b[1000] ^= 1
	must(t, os.WriteFile(p, b, 0o644))
	tc := filepath.Join(e.modelDir(), "tokenizer_config.json")
	must(t, os.WriteFile(tc, []byte(`{"eos_token": null}`), 0o644))
	reps, err := in.Verify(context.Background(), "minicpm5:2b")
	must(t, err)
	bad := map[string]bool{}
	for _, f := range reps[0].Files {
		if !f.OK {
			bad[f.Path] = true
		}
	}
	if reps[0].OK || !bad["model.q4nx"] || !bad["tokenizer_config.json"] || len(bad) != 2 {
		t.Errorf("verify found %v", bad)
	}
	st, _ := in.Status(context.Background())
	if st[0].Installs[0].Verified != "changed" {
		t.Errorf("status %+v", st[0].Installs[0])
	}
	// Installing again repairs both.
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	if !reflect.DeepEqual(res.Downloaded, []string{"model.q4nx", "tokenizer_config.json"}) {
		t.Errorf("repair downloaded %v", res.Downloaded)
	}
	reps, _ = in.Verify(context.Background(), "minicpm5:2b")
	if !reps[0].OK {
		t.Errorf("after repair: %+v", reps[0].Files)
	}
}

func TestUninstall(t *testing.T) {
	e := newEnv(t, true)
	in := e.installer()
	_, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	// Someone else's file in the model folder, and another model's kernels.
	mine := filepath.Join(e.modelDir(), "notes.txt")
	must(t, os.WriteFile(mine, []byte("mine"), 0o644))
	res, err := in.Uninstall(context.Background(), "MiniCPM5-2B-NPU2")
	must(t, err)
	for _, f := range portFiles("v1") {
		if _, err := os.Stat(filepath.Join(e.modelDir(), f.Path)); err == nil {
			t.Errorf("%s left behind", f.Path)
		}
	}
	if _, err := os.Stat(mine); err != nil {
		t.Error("uninstall removed a file it did not install")
	}
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "kept") {
		t.Errorf("notes %q", res.Notes)
	}
	for _, d := range []string{filepath.Join(e.root, "xclbins", "MiniCPM5-2B-NPU2"), filepath.Join(e.cfg.DataDir, "flm", "xclbins", "MiniCPM5-2B-NPU2")} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind", d)
		}
	}
	if _, err := os.Stat(filepath.Join(e.root, "xclbins", "Qwen3-0.6B-NPU2", "attn.xclbin")); err != nil {
		t.Error("another model's kernels were removed")
	}
	for _, l := range []string{filepath.Join(e.root, "model_list.json"), filepath.Join(e.cfg.DataDir, "flm", "model_list.json")} {
		if entryOf(t, l) != nil {
			t.Errorf("%s still lists minicpm5:2b", l)
		}
	}
	var a, b any
	json.Unmarshal(e.origSys, &a)
	got, _ := os.ReadFile(filepath.Join(e.root, "model_list.json"))
	json.Unmarshal(got, &b)
	if !reflect.DeepEqual(a, b) {
		t.Error("FastFlowLM's list is not back to its original content")
	}
	if _, err := Locate(e.cfg, "minicpm5:2b"); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Locate after uninstall: %v", err)
	}
	res, err = in.Uninstall(context.Background(), "minicpm5:2b")
	if err != nil || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "not installed") {
		t.Errorf("second uninstall: %v %q", err, res.Notes)
	}
}

func TestCancelledInstall(t *testing.T) {
	e := newEnv(t, true)
	e.hub.AddFaults("model.q4nx", hubtest.Fault{Delay: 2 * time.Millisecond})
	in := e.installer()
	ctx, cancel := context.WithCancel(context.Background())
	in.Progress = func(ev Event) {
		if ev.File != nil && ev.File.File == "model.q4nx" && ev.File.Bytes > 10_000 {
			cancel()
		}
	}
	_, err := in.Install(ctx, "minicpm5:2b", InstallOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(e.modelDir()); err == nil {
		t.Error("a cancelled first install created the model folder")
	}
	_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
}

func TestInstallWithoutFLMThenWithFLM(t *testing.T) {
	e := newEnv(t, false)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	old := filepath.Join(e.cfg.ModelsDir, "MiniCPM5-2B-NPU2")
	// FastFlowLM appears.
	e2 := newEnv(t, true)
	e.root, e.origSys = e2.root, e2.origSys
	reqs := len(e.hub.Requests())
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	var fetched []string
	for _, r := range e.hub.Requests()[reqs:] {
		if !strings.Contains(r.Path, "/api/") && strings.HasPrefix(r.Host, "localhost") {
			fetched = append(fetched, filepath.Base(r.Path))
		}
	}
	if len(fetched) != 4 { // only the kernels; the rest is reused
		t.Errorf("fetched %v", fetched)
	}
	if _, err := os.Stat(old); err == nil {
		t.Errorf("the earlier copy in %s was kept", old)
	}
	loc, err := Locate(e.cfg, "minicpm5:2b")
	must(t, err)
	if loc.Dir != e.modelDir() {
		t.Errorf("Locate %s", loc.Dir)
	}
	if len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, " "), "moved from") {
		t.Errorf("notes %q", res.Notes)
	}
	reps, err := e.installer().Verify(context.Background(), "minicpm5:2b")
	must(t, err)
	if !reps[0].OK {
		t.Errorf("verify %+v", reps[0].Files)
	}
}

func TestOfflineReinstall(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	e.hub.Close()
	in := e.installer()
	in.Hub.Attempts = 1
	res, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err != nil || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "unchanged") {
		t.Errorf("offline reinstall: %v %+v", err, res)
	}
	// A damaged install offline is an error, not a silent success.
	must(t, os.WriteFile(filepath.Join(e.modelDir(), "config.json"), []byte("{}"), 0o644))
	if _, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{}); err == nil {
		t.Error("offline install of a changed copy succeeded")
	}
}

func TestConcurrentInstallRefused(t *testing.T) {
	e := newEnv(t, true)
	unlock, err := lockInstalls(e.cfg)
	must(t, err)
	defer unlock()
	if _, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{}); err == nil || !strings.Contains(err.Error(), "another NPU Chat install") {
		t.Errorf("err = %v", err)
	}
	if _, err := e.installer().Uninstall(context.Background(), "minicpm5:2b"); err == nil {
		t.Error("uninstall ran while the lock was held")
	}
}

// enospcFS fails every write after limit bytes with "no space left".
type enospcFS struct{ limit, written int }

func (d *enospcFS) OpenFile(name string, flag int, perm os.FileMode) (hub.WritableFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &enospcFile{f, d}, nil
}

type enospcFile struct {
	*os.File
	d *enospcFS
}

func (f *enospcFile) Write(p []byte) (int, error) {
	if f.d.written+len(p) > f.d.limit {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.d.written += len(p)
	return f.File.Write(p)
}

func TestDiskFullDuringUpdate(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	before := snapshot(t, e.modelDir(), filepath.Join(e.root, "model_list.json"), filepath.Join(e.cfg.DataDir, "installed"))
	e.hub.AddRepo(repo, "main", portFiles("v2"))
	in := e.installer()
	in.Hub.FS = &enospcFS{limit: 100_000}
	_, err = in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
	after := snapshot(t, e.modelDir(), filepath.Join(e.root, "model_list.json"), filepath.Join(e.cfg.DataDir, "installed"))
	if !reflect.DeepEqual(before, after) {
		t.Error("a disk-full update changed the installed model")
	}
}

func TestFLMMissingLaterKeepsInstall(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	before := snapshot(t, e.root, e.cfg.DataDir)
	in := e.installer()
	in.Probe.Root = ""
	in.Probe.LookPath = func(string) (string, error) { return "", errors.New("no flm") }
	in.Probe.Stat = func(string) (fs.FileInfo, error) { return nil, fs.ErrNotExist }
	res, err := in.Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "installed for it") {
		t.Fatalf("err %v notes %q", err, res.Notes)
	}
	if after := snapshot(t, e.root, e.cfg.DataDir); !reflect.DeepEqual(before, after) {
		t.Error("install without FastFlowLM moved or changed the FastFlowLM install")
	}
}

// A FastFlowLM older than the model's flm_min_version is refused before
// anything is downloaded or moved into FastFlowLM's folder.
func TestOldFLMRefusedBeforeDownload(t *testing.T) {
	e := newEnv(t, true)
	must(t, os.WriteFile(filepath.Join(e.root, "flm"), []byte("#!/bin/sh\necho '{\"version\": \"0.9.1\"}'\n"), 0o755))
	before := snapshot(t, e.root, filepath.Join(e.cfg.DataDir, "flm"))
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err == nil || !strings.Contains(err.Error(), "FastFlowLM 0.9.1") || !strings.Contains(err.Error(), "update FastFlowLM") {
		t.Fatalf("err = %v, want FastFlowLM 0.9.1 refused", err)
	}
	if n := len(e.hub.Requests()); n != 0 {
		t.Errorf("%d hub requests before the old FastFlowLM was refused", n)
	}
	if _, err := os.Stat(e.modelDir()); err == nil {
		t.Error("the refused install created the model folder")
	}
	if after := snapshot(t, e.root, filepath.Join(e.cfg.DataDir, "flm")); !reflect.DeepEqual(before, after) {
		t.Error("the refused install changed files")
	}
}

// FastFlowLM's model_list.json.bak is its list as it was before NPU Chat
// first touched it, even after install, uninstall and install again.
func TestSystemListBakKeepsOriginal(t *testing.T) {
	e := newEnv(t, true)
	for _, step := range []string{"install", "uninstall", "install"} {
		var err error
		if step == "install" {
			_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
		} else {
			_, err = e.installer().Uninstall(context.Background(), "minicpm5:2b")
		}
		must(t, err)
		if bak, _ := os.ReadFile(filepath.Join(e.root, "model_list.json.bak")); !bytes.Equal(bak, e.origSys) {
			t.Fatalf("after %s, model_list.json.bak is not FastFlowLM's original list (%d bytes, want %d)", step, len(bak), len(e.origSys))
		}
	}
}

// Kernels copied by hand into FastFlowLM's folder (the model card's
// steps, or an earlier install as root) make PrepareFLM link NPU Chat's
// folder of the model to FastFlowLM's. Install must replace that link by
// its own folder rather than write through it (into /opt, or over
// FastFlowLM's kernels with --no-system), and uninstall must not delete
// FastFlowLM's kernels, through the link or in a folder NPU Chat did not
// create.
func TestKernelsCopiedByHandBeforeInstall(t *testing.T) {
	kernels := []string{"attn.xclbin", "mm.xclbin", "layer.xclbin", "dequant.xclbin"}
	for _, noSystem := range []bool{true, false} {
		t.Run(fmt.Sprintf("no-system=%v", noSystem), func(t *testing.T) {
			e := newEnv(t, true)
			sys := filepath.Join(e.root, "xclbins", "MiniCPM5-2B-NPU2")
			own := filepath.Join(e.cfg.DataDir, "flm", "xclbins", "MiniCPM5-2B-NPU2")
			must(t, os.MkdirAll(sys, 0o755))
			for _, x := range kernels {
				must(t, os.WriteFile(filepath.Join(sys, x), []byte("hand-copied kernels"), 0o644))
			}
			_, err := e.installer().PrepareFLM(context.Background())
			must(t, err)
			_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{NoSystem: noSystem})
			must(t, err)
			// The backend's next start must not link or copy
			// FastFlowLM's folder over NPU Chat's again.
			_, err = e.installer().PrepareFLM(context.Background())
			must(t, err)
			if st, err := os.Lstat(own); err != nil || !st.IsDir() {
				t.Fatalf("NPU Chat's kernel folder %s is not a real folder after install (%v, %v)", own, st.Mode(), err)
			}
			for _, x := range kernels {
				if b, _ := os.ReadFile(filepath.Join(own, x)); !bytes.Equal(b, blob(strings.TrimSuffix(x, ".xclbin"), 5000)) {
					t.Errorf("%s in NPU Chat's folder is not the downloaded kernel", x)
				}
				b, _ := os.ReadFile(filepath.Join(sys, x))
				if noSystem && string(b) != "hand-copied kernels" {
					t.Errorf("--no-system install changed FastFlowLM's %s", x)
				}
			}
			res, err := e.installer().Uninstall(context.Background(), "minicpm5:2b")
			must(t, err)
			for _, x := range kernels {
				if _, err := os.Stat(filepath.Join(sys, x)); err != nil {
					t.Errorf("uninstall deleted FastFlowLM's %s, which NPU Chat did not put there: %v", x, err)
				}
			}
			if _, err := os.Lstat(own); err == nil {
				t.Errorf("NPU Chat's kernel folder %s left behind", own)
			}
			if !noSystem && !strings.Contains(strings.Join(res.Notes, "\n"), "kept the kernels in "+sys) {
				t.Errorf("uninstall notes %q do not say FastFlowLM's kernels were kept", res.Notes)
			}
		})
	}
}

// Files someone else put in place (the model card's git clone, or `flm
// pull`) are adopted by install and kept by uninstall; the one NPU Chat
// edited is put back as it was. A second install keeps them adopted.
func TestUninstallKeepsAdoptedFiles(t *testing.T) {
	for _, installs := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d installs", installs), func(t *testing.T) {
			e := newEnv(t, true)
			must(t, os.MkdirAll(e.modelDir(), 0o755))
			clone := map[string][]byte{}
			for _, f := range portFiles("v1") {
				must(t, os.WriteFile(filepath.Join(e.modelDir(), f.Path), f.Content, 0o644))
				clone[f.Path] = f.Content
			}
			for range installs {
				res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
				must(t, err)
				if len(res.Downloaded) != 0 {
					t.Fatalf("downloaded %v, which were in place", res.Downloaded)
				}
			}
			res, err := e.installer().Uninstall(context.Background(), "minicpm5:2b")
			must(t, err)
			for name, want := range clone {
				if got, err := os.ReadFile(filepath.Join(e.modelDir(), name)); err != nil || !bytes.Equal(got, want) {
					t.Errorf("uninstall did not leave the user's own %s as it was (%v)", name, err)
				}
			}
			if !strings.Contains(strings.Join(res.Notes, "\n"), "model.q4nx") {
				t.Errorf("notes %q do not say which files were kept", res.Notes)
			}
		})
	}
}

// A minicpm5:2b entry the user had in FastFlowLM's list before install
// (the model card's step) is put back by uninstall, in both lists,
// rather than deleted.
func TestUninstallRestoresEarlierListEntry(t *testing.T) {
	e := newEnv(t, true)
	list := filepath.Join(e.root, "model_list.json")
	own := filepath.Join(e.cfg.DataDir, "flm", "model_list.json")
	earlier := `{"name": "MiniCPM5-2B-NPU2", "url": "https://huggingface.co/julianmb/MiniCPM5-2B-NPU2", "x_mine": 1}`
	o, err := jsonedit.ParseObject(e.origSys)
	must(t, err)
	must(t, flm.SetEntries(o, []flm.Entry{{Family: "minicpm5", Tag: "2b", Value: json.RawMessage(earlier)}}))
	must(t, os.WriteFile(list, o.Format("    "), 0o644))
	_, err = e.installer().PrepareFLM(context.Background())
	must(t, err)
	_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	if ent := entryOf(t, list); ent["file_url"] == nil {
		t.Fatalf("install did not register the catalog entry: %v", ent)
	}
	_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	_, err = e.installer().Uninstall(context.Background(), "minicpm5:2b")
	must(t, err)
	var want map[string]any
	must(t, json.Unmarshal([]byte(earlier), &want))
	for _, l := range []string{list, own} {
		if got := entryOf(t, l); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: minicpm5:2b after uninstall = %v, want the user's earlier entry %v", l, got, want)
		}
	}
}

// An update whose new tokenizer_config.json or config.json cannot be
// edited (not valid JSON) fails before anything is moved into place: the
// working install, its record and the lists stay exactly as they were.
func TestFailedEditKeepsWorkingInstall(t *testing.T) {
	for _, broken := range []string{"config.json", "tokenizer_config.json"} {
		t.Run(broken, func(t *testing.T) {
			e := newEnv(t, true)
			_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
			must(t, err)
			before := snapshot(t, e.root, filepath.Join(e.cfg.DataDir, "flm"), filepath.Join(e.cfg.DataDir, "installed"))
			v2 := portFiles("v2")
			for i := range v2 {
				if v2[i].Path == broken {
					v2[i].Content = []byte(`{"model_type": "qwen3", "flm_version": "0.9.22",}`)
				}
			}
			e.hub.AddRepo(repo, "main", v2)
			_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
			if err == nil || !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "not valid JSON") {
				t.Fatalf("update with a malformed %s: err = %v", broken, err)
			}
			after := snapshot(t, e.root, filepath.Join(e.cfg.DataDir, "flm"), filepath.Join(e.cfg.DataDir, "installed"))
			for k, v := range after {
				if strings.Contains(k, ".npuchat-staging") || strings.HasSuffix(k, ".lock") {
					continue // the downloads wait there for the next run
				}
				if before[k] != v {
					t.Errorf("the failed update changed %s", k)
				}
			}
			for k := range before {
				if _, ok := after[k]; !ok {
					t.Errorf("the failed update removed %s", k)
				}
			}
			reps, err := e.installer().Verify(context.Background(), "minicpm5:2b")
			must(t, err)
			if !reps[0].OK {
				t.Errorf("the install no longer verifies: %+v", reps[0].Files)
			}
		})
	}
}

// swapIn moves a set of files in, or none: when one move fails, the
// files already moved are put back.
func TestSwapInAllOrNothing(t *testing.T) {
	base := t.TempDir()
	staging, old, dir := filepath.Join(base, "staging"), filepath.Join(base, "old"), filepath.Join(base, "dir")
	for _, f := range []struct{ dir, name, body string }{
		{dir, "a", "old a"}, {dir, "b", "old b"}, {staging, "a", "new a"}, {staging, "b", "new b"},
	} {
		must(t, os.MkdirAll(f.dir, 0o755))
		must(t, os.WriteFile(filepath.Join(f.dir, f.name), []byte(f.body), 0o644))
	}
	// "c/d" cannot be moved in: dir/c is a file, not a folder.
	must(t, os.WriteFile(filepath.Join(staging, "c"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "c"), []byte("old c"), 0o644))
	err := swapIn(staging, old, dir, []string{"a", "b", "c/d"}, os.Rename)
	if err == nil {
		t.Fatal("swapIn into a path under a file succeeded")
	}
	for name, want := range map[string]string{"a": "old a", "b": "old b", "c": "old c"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("after a failed swap, %s = %q, want %q", name, b, want)
		}
	}
	must(t, swapIn(staging, old, dir, []string{"a", "b"}, os.Rename))
	for name, want := range map[string]string{"a": "new a", "b": "new b"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("after the swap, %s = %q, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(old); err == nil {
		t.Error("the folder of replaced files is left behind")
	}
}

// A push to the repository between the listing and the downloads does
// not mix two versions (which made every hash fail): the install lists
// and downloads the commit "main" pointed at when it started, once each.
func TestRepositoryChangesDuringInstall(t *testing.T) {
	e := newEnv(t, true)
	commit := e.hub.Commit(repo, "main")
	var once sync.Once
	e.hub.SetAfterTree(func() { once.Do(func() { e.hub.AddRepo(repo, "main", portFiles("v2")) }) })
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(e.modelDir(), "model.q4nx")); !bytes.Equal(b, blob("model.q4nxv1", 300_000)) {
		t.Error("model.q4nx is not the version that was listed")
	}
	if res.Manifest.Commit != commit {
		t.Errorf("install record commit %q, want %q", res.Manifest.Commit, commit)
	}
	for _, r := range e.hub.Requests() {
		if strings.Contains(r.Path, "/resolve/") && !strings.Contains(r.Path, "/resolve/"+commit+"/") {
			t.Errorf("download %s is not pinned to commit %s", r.Path, commit)
		}
		if strings.Contains(r.Path, "/tree/") && !strings.Contains(r.Path, "/tree/"+commit) {
			t.Errorf("listing %s is not pinned to commit %s", r.Path, commit)
		}
	}
	for _, f := range res.Downloaded {
		if n := e.hub.Downloads(f); n != 1 {
			t.Errorf("%s downloaded %d times", f, n)
		}
	}
}

// PrepareFLM rebuilds NPU Chat's model list only under the install lock:
// while an install holds it, the existing list is used as it is, and
// without a list it says an install is running.
func TestPrepareFLMRespectsInstallLock(t *testing.T) {
	for _, tc := range []struct {
		name             string
		locked, haveList bool
		rebuilt          bool
		errHas           string
	}{
		{"unlocked", false, true, true, ""},
		{"locked, list there", true, true, false, ""},
		{"locked, no list yet", true, false, false, "another NPU Chat install"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			own := filepath.Join(e.cfg.DataDir, "flm", "model_list.json")
			stale := []byte(`{"model_path": "models", "models": {}}` + "\n")
			if tc.haveList {
				must(t, os.MkdirAll(filepath.Dir(own), 0o755))
				must(t, os.WriteFile(own, stale, 0o644))
			}
			if tc.locked {
				unlock, err := lockInstalls(e.cfg)
				must(t, err)
				defer unlock()
			}
			_, err := e.installer().PrepareFLM(context.Background())
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %q", err, tc.errHas)
				}
				return
			}
			must(t, err)
			got, _ := os.ReadFile(own)
			if rebuilt := !bytes.Equal(got, stale); rebuilt != tc.rebuilt {
				t.Errorf("list rebuilt = %v, want %v", rebuilt, tc.rebuilt)
			}
		})
	}
}

// Install then uninstall gives FastFlowLM's own list back byte for
// byte: edits change only the entry, not the rest of FLM's formatting.
func TestSystemListRoundTripBytes(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	_, err = e.installer().Uninstall(context.Background(), "minicpm5:2b")
	must(t, err)
	if got, _ := os.ReadFile(filepath.Join(e.root, "model_list.json")); !bytes.Equal(got, e.origSys) {
		t.Errorf("FastFlowLM's list after install and uninstall differs from its original (%d bytes, want %d)", len(got), len(e.origSys))
	}
}

// Where links are not allowed (Windows without developer mode) NPU
// Chat's root holds copies of FastFlowLM's kernel folders; PrepareFLM
// makes a copy again when FastFlowLM's folder changed (an upgrade), and
// leaves an up-to-date copy and links alone.
func TestPrepareFLMRefreshesKernelCopies(t *testing.T) {
	const name = "Qwen3-0.6B-NPU2"
	for _, tc := range []struct {
		name       string
		setup      func(t *testing.T, sys, own string)
		want       string
		wantLinked bool
	}{
		{"stale copy", func(t *testing.T, sys, own string) {
			must(t, os.MkdirAll(own, 0o755))
			must(t, os.WriteFile(filepath.Join(own, "attn.xclbin"), []byte("kernels of an older FastFlowLM"), 0o644))
		}, "qwen kernels", false},
		{"up-to-date copy", func(t *testing.T, sys, own string) {
			must(t, copyDir(sys, own))
		}, "qwen kernels", false},
		{"link", func(t *testing.T, sys, own string) {
			must(t, os.MkdirAll(filepath.Dir(own), 0o755))
			must(t, os.Symlink(sys, own))
		}, "qwen kernels", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			sys := filepath.Join(e.root, "xclbins", name)
			own := filepath.Join(e.cfg.DataDir, "flm", "xclbins", name)
			tc.setup(t, sys, own)
			before, _ := os.Stat(filepath.Join(own, "attn.xclbin"))
			_, err := e.installer().PrepareFLM(context.Background())
			must(t, err)
			if b, _ := os.ReadFile(filepath.Join(own, "attn.xclbin")); string(b) != tc.want {
				t.Errorf("kernel in NPU Chat's root = %q, want %q", b, tc.want)
			}
			st, err := os.Lstat(own)
			must(t, err)
			if linked := st.Mode()&os.ModeSymlink != 0; linked != tc.wantLinked {
				t.Errorf("linked = %v, want %v", linked, tc.wantLinked)
			}
			if tc.name == "up-to-date copy" {
				if after, _ := os.Stat(filepath.Join(own, "attn.xclbin")); !os.SameFile(before, after) {
					t.Error("an up-to-date copy was copied again")
				}
			}
		})
	}
}

// TestDamagedInstallRecordIsRepaired: an install record that no longer
// parses (edited by hand, a disk error) does not lock the model: the
// error says to run the install, and the install makes the record again
// from the files in place (verified, not downloaded again), saying so.
func TestDamagedInstallRecordIsRepaired(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	must(t, err)
	record := manifestPath(e.cfg, "minicpm5:2b", SourceNPU)
	if err := os.WriteFile(record, []byte(`{"model": "minicpm5:2b", "files": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.installer().Uninstall(context.Background(), "minicpm5:2b"); err == nil || !strings.Contains(err.Error(), "npuchat install minicpm5:2b") {
		t.Fatalf("uninstall with a damaged record: %v", err)
	}
	res, err := e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
	if err != nil {
		t.Fatalf("install with a damaged record: %v", err)
	}
	// Only a file NPU Chat edits is fetched again (its edit is not the
	// hub's content, and the record of it is lost); the weights are not.
	if slices.Contains(res.Downloaded, "model.q4nx") || len(res.Downloaded) > 1 || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "damaged") && strings.Contains(n, record) }) {
		t.Fatalf("downloaded %v, notes %q", res.Downloaded, res.Notes)
	}
	if _, err := Locate(e.cfg, "minicpm5:2b"); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
}

// TestSwapInSaysWhatCouldNotBePutBack: when a failed swap cannot undo
// one of its moves either (Windows refusing a rename, say), the error
// says which file is where, instead of claiming it was put back.
func TestSwapInSaysWhatCouldNotBePutBack(t *testing.T) {
	base := t.TempDir()
	staging, old, dir := filepath.Join(base, "staging"), filepath.Join(base, "old"), filepath.Join(base, "dir")
	for _, f := range []struct{ dir, name, body string }{
		{dir, "a", "old a"}, {dir, "b", "old b"}, {staging, "a", "new a"}, {staging, "b", "new b"},
	} {
		must(t, os.MkdirAll(f.dir, 0o755))
		must(t, os.WriteFile(filepath.Join(f.dir, f.name), []byte(f.body), 0o644))
	}
	refused := errors.New("the file is in use")
	rename := func(from, to string) error {
		switch {
		case from == filepath.Join(staging, "b"): // b cannot go in
			return refused
		case from == filepath.Join(old, "a"): // nor can the old a come back
			return refused
		}
		return os.Rename(from, to)
	}
	err := swapIn(staging, old, dir, []string{"a", "b"}, rename)
	var ue *undoError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), filepath.Join(old, "a")) || !strings.Contains(err.Error(), "by hand") {
		t.Fatalf("error %v; want it to say the old a is in %s", err, old)
	}
	if b, _ := os.ReadFile(filepath.Join(old, "a")); string(b) != "old a" {
		t.Fatalf("the old a, which could not be put back, is not where the error says: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b")); string(b) != "old b" {
		t.Fatalf("b = %q, want it put back", b)
	}
}

// A FastFlowLM model list whose model_path leads out of the FastFlowLM
// models folder is refused, naming the list and the value, before
// anything is downloaded, written or deleted: neither Install nor
// PrepareFLM touches a file.
func TestEscapingModelPathRefused(t *testing.T) {
	for _, bad := range []string{"/tmp/elsewhere", "../../outside"} {
		t.Run(bad, func(t *testing.T) {
			e := newEnv(t, true)
			listFile := filepath.Join(e.root, "model_list.json")
			list := readJSON(t, listFile)
			list["model_path"] = bad
			b, err := json.Marshal(list)
			must(t, err)
			must(t, os.WriteFile(listFile, b, 0o644))
			before := snapshot(t, e.base)
			_, err = e.installer().Install(context.Background(), "minicpm5:2b", InstallOptions{})
			if err == nil || !strings.Contains(err.Error(), listFile) || !strings.Contains(err.Error(), `"model_path" is "`+bad+`"`) {
				t.Fatalf("Install: %v; want the model_path refused, naming %s", err, listFile)
			}
			if _, err := e.installer().PrepareFLM(context.Background()); err == nil || !strings.Contains(err.Error(), bad) {
				t.Fatalf("PrepareFLM: %v; want the model_path refused", err)
			}
			if n := len(e.hub.Requests()); n != 0 {
				t.Errorf("%d hub requests before the model_path was refused", n)
			}
			if after := snapshot(t, e.base); !reflect.DeepEqual(before, after) {
				for p, v := range after {
					if before[p] != v && filepath.Base(p) != ".lock" { // the install lock is taken first
						t.Errorf("the refused install changed %s", p)
					}
				}
			}
		})
	}
}
