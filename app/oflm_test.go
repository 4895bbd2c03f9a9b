//go:build linux

package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/models/library"
	modeloflm "github.com/npuchat/npuchat/models/oflm"
	"github.com/npuchat/npuchat/npu/flm/flmtest"
	"github.com/npuchat/npuchat/npu/oflm"
	"github.com/npuchat/npuchat/npu/oflm/oflmtest"
	"github.com/npuchat/npuchat/service"
)

// oflmRig is the npuRig (minicpm5:2b's FastFlowLM pack installed, the
// fake flm) plus oflm as its packages install it: the fake oflm in
// <base>/openflowlm/bin, on PATH, with MiniCPM5-2B's open kernel set
// beside it in share/oflm/xclbins (where oflm and npu/oflm look first),
// built for the test model's shape.
type oflmRig struct {
	*npuRig
	exe, kernels string
}

func newOFLMRig(t *testing.T) *oflmRig {
	t.Helper()
	r := &oflmRig{npuRig: newNPURig(t)}
	bin := filepath.Join(t.TempDir(), "openflowlm", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.exe, err = oflmtest.BuildTo(bin); err != nil {
		t.Fatal(err)
	}
	r.env["PATH"] = bin + string(os.PathListSeparator) + r.env["PATH"]
	r.kernels = filepath.Join(filepath.Dir(bin), "share", "oflm", "xclbins", oflm.Folder, "open_kernels")
	copyDir(t, "../npu/oflm/testdata/open_kernels", r.kernels)
	editKernelManifest(t, r.kernels)
	return r
}

// editKernelManifest shapes the test kernel set's manifest for the test
// model, with no packing plan (the weights are held against the plan in
// models/oflm's tests), as npu/oflm's tests do.
func editKernelManifest(t *testing.T, dir string) {
	t.Helper()
	shape := testmodel.MiniCPM5Small()
	oflmtest.EditJSON(t, filepath.Join(dir, "manifest.json"), func(man map[string]any) {
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
}

// copyDir copies the files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// oflmDir is the prepared folder in the rig's oflm layout.
func (r *oflmRig) oflmDir() string {
	return filepath.Join(r.env["HOME"], ".config", "oflm", "models", oflm.Folder)
}

// prepared is an app (sysroot: a recorded machine) with minicpm5:2b
// prepared for oflm by PrepareOFLM.
func (r *oflmRig) prepared(t *testing.T, sysroot string, mods ...func(*Options)) *App {
	t.Helper()
	a := r.app(t, sysroot, mods...)
	if _, _, err := a.PrepareOFLM(context.Background(), nil); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return a
}

// chatAPI asks minicpm5:2b through the Ollama chat API of the page's
// server and returns the answer's text, or fails.
func chatAPI(t *testing.T, a *App) string {
	t.Helper()
	req := httptest.NewRequest("POST", "http://127.0.0.1:8001/api/chat",
		strings.NewReader(`{"model": "minicpm5:2b", "stream": false, "messages": [{"role": "user", "content": "hello there"}], "options": {"num_predict": 8}}`))
	w := httptest.NewRecorder()
	a.WebServer().Handler().ServeHTTP(w, req)
	var out struct {
		Message struct{ Content string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != 200 {
		t.Fatalf("/api/chat: %d %s", w.Code, w.Body)
	}
	return out.Message.Content
}

// apiStatus is GET /api/status, what the page reads.
func apiStatus(t *testing.T, a *App) service.Status {
	t.Helper()
	w := httptest.NewRecorder()
	a.WebServer().Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8001/api/status", nil))
	b, _ := io.ReadAll(w.Body)
	var st service.Status
	if err := json.Unmarshal(b, &st); err != nil || w.Code != 200 {
		t.Fatalf("/api/status: %d %s", w.Code, b)
	}
	return st
}

// TestOFLMServes: on a recorded ready Strix Halo with the fake oflm on
// PATH, minicpm5:2b prepared for oflm is served by the oflm route under
// each engine setting that includes it (auto, npu, oflm): the API answers
// with the fake oflm's text, the status names the route, oflm was started
// with the registered tag and NPU Chat's environment; the setting flm
// forces FastFlowLM instead, cpu the CPU.
func TestOFLMServes(t *testing.T) {
	r := newOFLMRig(t)
	ctl := oflmtest.NewControl(t)
	t.Setenv("FAKEOFLM_CONTROL", strings.TrimPrefix(ctl.Env(), "FAKEOFLM_CONTROL="))
	t.Setenv("FAKEOFLM_MODE", "")
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	serves := 0
	for _, tc := range []struct {
		engine enginekind.Kind
		want   string
	}{
		{enginekind.Auto, "oflm"}, {enginekind.NPU, "oflm"}, {enginekind.OFLM, "oflm"},
		{enginekind.FLM, "npu"}, {enginekind.CPU, "cpu"},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			a := r.prepared(t, "", func(o *Options) { o.Flags.Engine = string(tc.engine) })
			if e, _ := a.lib.Lookup("minicpm5:2b"); !slices.Equal(e.Engines, []enginekind.Kind{enginekind.OFLM, enginekind.NPU, enginekind.CPU}) {
				t.Fatalf("engines %v", e.Engines)
			}
			text := chatAPI(t, a)
			st := apiStatus(t, a)
			if string(st.Backend) != tc.want || st.Fallback != "" {
				t.Fatalf("answered %q; status %+v, want the %s route", text, st, tc.want)
			}
			if tc.want != "oflm" {
				if strings.Contains(text, "Fake oflm") {
					t.Fatalf("oflm answered under %s: %q", tc.engine, text)
				}
				return
			}
			if text != "Fake oflm heard: hello there" {
				t.Fatalf("answer %q, want the fake oflm's", text)
			}
			serves++
			ev := ctl.Wait("serve", serves)
			if len(ev.Args) == 0 || ev.Args[0] != oflm.Tag || ev.Env["OFLM_OPEN_KERNELS_DIR"] != r.kernels || ev.Env["OFLM_LLAMA_ENGINE"] != "open" {
				t.Fatalf("oflm serve %v with %v", ev.Args, ev.Env)
			}
			if a.OFLMPID() == 0 || st.Info == nil || st.Info.Path != r.oflmDir() {
				t.Fatalf("pid %d, info %+v", a.OFLMPID(), st.Info)
			}
		})
	}
}

// TestOFLMFailureFallsBackToCPU: oflm's load fails (it opens its port
// with "model-faker"), or the recorded machine's memlock limit is too
// low for oflm: the same request is answered by the CPU engine, and the
// status the page reads says why, as for FastFlowLM.
func TestOFLMFailureFallsBackToCPU(t *testing.T) {
	r := newOFLMRig(t)
	for _, tc := range []struct {
		name, mode, sysroot, why string
	}{
		{"model-faker", oflmtest.ModeLoadFail, "", "could not load minicpm5:2b (its server runs with no model)"},
		{"memlock", "", "../npu/check/testdata/trees/memlock-low", "oflm is not ready"},
		{"validate", oflmtest.ModeNotReady, "", "oflm validate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FAKEOFLM_MODE", tc.mode)
			a := r.prepared(t, tc.sysroot, func(o *Options) { o.Flags.Engine = string(enginekind.Auto) })
			events, cancel := a.mgr.Subscribe()
			defer cancel()
			t.Setenv("FAKEFLM_MODE", flmtest.ModeERT) // FastFlowLM, next in line, fails too
			text := chatAPI(t, a)
			st := apiStatus(t, a)
			if st.Backend != "cpu" || text == "" || strings.Contains(text, "Fake oflm") {
				t.Fatalf("answered %q; status %+v; want the CPU", text, st)
			}
			// The fallbacks happened before the CPU answered: their events
			// are in the channel already (the service drops none).
			var seen []string
			for {
				select {
				case ev := <-events:
					if ev.Type != service.EventFallback {
						continue
					}
					if strings.Contains(ev.Message, tc.why) {
						return
					}
					seen = append(seen, ev.Message)
					continue
				default:
				}
				break
			}
			t.Fatalf("no fallback event naming %q; status %+v; fallbacks %q", tc.why, st, seen)
		})
	}
}

// TestPrepareOFLM: the page's action converts the installed pack into
// oflm's folder (shaped by the kernel set's manifest: 8 KV heads, model
// type llama), reports progress as events, and switches the model to
// the oflm route, changing a cpu engine setting to npu; then the model
// answers from oflm. Without oflm it says what is missing and links to
// its install instructions, and nothing is written.
func TestPrepareOFLM(t *testing.T) {
	t.Run("without oflm", func(t *testing.T) {
		r := newNPURig(t)
		a := r.app(t, "")
		code, body := prepareAPI(t, a, "minicpm5:2b")
		if code != 409 || !strings.Contains(body, oflm.InstallLink) || !strings.Contains(body, "not installed") {
			t.Fatalf("without oflm: %d %s", code, body)
		}
		m := pageModel(t, a)
		if m.OFLM == nil || m.OFLM.State != library.OFLMMissing || m.OFLM.Link != oflm.InstallLink {
			t.Fatalf("the Models view without oflm: %+v", m.OFLM)
		}
		if _, err := os.Stat(filepath.Join(r.env["HOME"], ".config", "oflm")); !os.IsNotExist(err) {
			t.Fatalf("oflm's folder was made: %v", err)
		}
	})
	t.Run("prepare and switch", func(t *testing.T) {
		r := newOFLMRig(t)
		t.Setenv("FAKEOFLM_MODE", "")
		a := r.app(t, "", func(o *Options) { o.Flags.Engine = string(enginekind.CPU) })
		if e, _ := a.lib.Lookup("minicpm5:2b"); slices.Contains(e.Engines, enginekind.OFLM) {
			t.Fatalf("not prepared, yet %v", e.Engines)
		}
		events, cancel := a.mgr.Subscribe()
		defer cancel()
		if code, body := prepareAPI(t, a, "qwen3:0.6b"); code != 409 {
			t.Errorf("another model: %d %s", code, body)
		}
		if code, body := prepareAPI(t, a, "minicpm5:2b"); code != 202 {
			t.Fatalf("prepare: %d %s", code, body)
		}
		progressed := false
		for ev := range events {
			if ev.Type != EventPrepare {
				continue
			}
			if p := ev.Progress; p != nil && p.Total > 0 && p.Done > 0 {
				progressed = true
			}
			if strings.HasPrefix(ev.Message, "failed") || strings.Contains(ev.Message, "switching to it failed") {
				t.Fatal(ev.Message)
			}
			if strings.HasPrefix(ev.Message, "prepared in") {
				break
			}
		}
		if !progressed {
			t.Error("no progress event with bytes")
		}
		if _, err := modeloflm.Verify(r.oflmDir()); err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			ModelType string `json:"model_type"`
			KVHeads   int    `json:"num_key_value_heads"`
			Layers    int    `json:"num_hidden_layers"`
		}
		b, err := os.ReadFile(filepath.Join(r.oflmDir(), "config.json"))
		if err != nil || json.Unmarshal(b, &cfg) != nil {
			t.Fatalf("config.json: %v %s", err, b)
		}
		if cfg.ModelType != "llama" || cfg.KVHeads != 8 || cfg.Layers != testmodel.MiniCPM5Small().Layers {
			t.Fatalf("config.json %+v", cfg)
		}
		if a.Engine() != enginekind.NPU {
			t.Fatalf("engine setting %s, want npu", a.Engine())
		}
		if text := chatAPI(t, a); text != "Fake oflm heard: hello there" {
			t.Fatalf("after the switch: %q", text)
		}
		if st := apiStatus(t, a); st.Backend != "oflm" {
			t.Fatalf("status %+v", st)
		}
	})
}

// prepareAPI is the Models view's button: POST
// /api/library/{name}/prepare-oflm.
func prepareAPI(t *testing.T, a *App, name string) (int, string) {
	w := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://127.0.0.1/api/library/"+name+"/prepare-oflm", nil)
	req.AddCookie(pageSession(t, a))
	a.WebServer().Handler().ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// pageModel is minicpm5:2b as GET /api/library lists it for the Models
// view.
func pageModel(t *testing.T, a *App) library.Model {
	t.Helper()
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://127.0.0.1/api/library", nil)
	req.AddCookie(pageSession(t, a))
	a.WebServer().Handler().ServeHTTP(w, req)
	var out struct{ Models []library.Model }
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != 200 {
		t.Fatalf("/api/library: %d %s", w.Code, w.Body)
	}
	for _, m := range out.Models {
		if m.Name == "minicpm5:2b" {
			return m
		}
	}
	t.Fatalf("minicpm5:2b is not listed: %s", w.Body)
	return library.Model{}
}

// TestOFLMPageModels: the Models view's list says, for minicpm5:2b, what
// the oflm route needs next: ready to prepare, not ready (the recorded
// machine's memlock too low, with oflm's install instructions), and
// prepared.
func TestOFLMPageModels(t *testing.T) {
	r := newOFLMRig(t)
	if m := pageModel(t, r.app(t, "../npu/check/testdata/trees/memlock-low")); m.OFLM == nil || m.OFLM.State != library.OFLMNotReady ||
		!strings.Contains(m.OFLM.Note, "L13") || m.OFLM.Link != oflm.InstallLink {
		t.Fatalf("on a machine with too little memlock: %+v", m.OFLM)
	}
	a := r.app(t, "")
	if m := pageModel(t, a); m.OFLM == nil || m.OFLM.State != library.OFLMReady {
		t.Fatalf("before preparing: %+v", m.OFLM)
	}
	if _, _, err := a.PrepareOFLM(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if m := pageModel(t, a); m.OFLM == nil || m.OFLM.State != library.OFLMPrepared || !slices.Equal(m.Engines, []string{"oflm", "npu", "cpu"}) {
		t.Fatalf("after preparing: %+v %v", m.OFLM, m.Engines)
	}
}

// TestCheckNamesTheRoutes: the NPU check (GET /api/check, the tray's
// Check NPU, npuchat check) says which route serves which models: oflm
// for MiniCPM5-2B, ready on a recorded ready machine with the fake oflm
// found, and what to do without it.
func TestCheckNamesTheRoutes(t *testing.T) {
	r := newOFLMRig(t)
	rep, err := r.app(t, "").CheckNPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Routes) != 2 || rep.Routes[0].Via != "oflm" || !rep.Routes[0].Ready || rep.Routes[1].Via != "FLM" {
		t.Fatalf("routes %+v", rep.Routes)
	}
	r.env["PATH"] = filepath.Join(t.TempDir(), "no-bin")
	rep, err = r.app(t, "").CheckNPU(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rt := rep.Routes[0]; rt.Via != "" || rt.Ready || !strings.Contains(rt.Fix, oflm.InstallLink) {
		t.Fatalf("without oflm: %+v", rt)
	}
}
