//go:build linux

package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/internal/proctest"
	"github.com/npuchat/npuchat/models"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/npu/flm/flmtest"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
)

// npuRig is a machine with a (fake) ready NPU: a recorded Strix Halo
// tree for the check, a FastFlowLM root whose flm is the fake
// executable, and minicpm5:2b installed into it by `npuchat install`
// from a fake hub serving a small real model (so that the CPU engine can
// run it too).
type npuRig struct {
	env  map[string]string
	root string
}

func newNPURig(t *testing.T) *npuRig {
	t.Helper()
	w, err := testmodel.Random(5, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	// As the real port: KV heads ×4, unit q/k norms, llama.cpp's Q/K rows.
	if err := testmodel.WriteFLM(src, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true, LlamaRows: true}); err != nil {
		t.Fatal(err)
	}
	var files []hubtest.File
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hubtest.File{Path: e.Name(), Content: b, LFS: strings.HasSuffix(e.Name(), ".q4nx") || e.Name() == "tokenizer.json"})
	}
	for _, name := range []string{"special_tokens_map.json", "chat_template.jinja", "attn.xclbin", "mm.xclbin", "layer.xclbin", "dequant.xclbin"} {
		if _, err := os.Stat(filepath.Join(src, name)); err == nil {
			continue
		}
		content := []byte("kernel " + name)
		switch name {
		case "special_tokens_map.json":
			content = []byte("{}")
		case "chat_template.jinja":
			content = []byte("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
		}
		files = append(files, hubtest.File{Path: name, Content: content, LFS: strings.HasSuffix(name, ".xclbin")})
	}
	hub := hubtest.New("julianmb/MiniCPM5-2B-NPU2", "main", files)
	t.Cleanup(hub.Close)

	base := t.TempDir()
	root := filepath.Join(base, "flm")
	if err := os.MkdirAll(filepath.Join(root, "xclbins"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake := flmtest.Build(t)
	b, err := os.ReadFile(fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "flm"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile("../models/flm/testdata/flm_v0.9.45.input.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "model_list.json"), list, 0o644)
	r := &npuRig{root: root, env: map[string]string{
		"HOME": filepath.Join(base, "home"), "NPUCHAT_DATA": filepath.Join(base, "data"),
		"NPUCHAT_CONFIG": filepath.Join(base, "settings.json"), "HF_ENDPOINT": hub.URL(),
		"PATH": os.Getenv("PATH"),
	}}
	getenv := func(k string) string { return r.env[k] }
	cfg, err := config.Load(getenv, runtime.GOOS)
	if err != nil {
		t.Fatal(err)
	}
	in, err := models.NewInstaller(cfg, models.Options{FLMRoot: root, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Install(context.Background(), "minicpm5:2b", models.InstallOptions{}); err != nil {
		t.Fatalf("install: %v", err)
	}
	return r
}

// app builds the app as `npuchat serve --flm-root` does, with the NPU
// check reading a recorded machine (ready Strix Halo unless sysroot);
// mods change the options further.
func (r *npuRig) app(t *testing.T, sysroot string, mods ...func(*Options)) *App {
	t.Helper()
	if sysroot == "" {
		sysroot = "../npu/check/testdata/trees/strix-halo-ready"
	}
	opts := Options{
		Getenv: func(k string) string { return r.env[k] }, Flags: Flags{FLMRoot: r.root, KeepAlive: "-1"},
		Logger: slog.New(slog.DiscardHandler), NPUSysroot: sysroot,
	}
	for _, mod := range mods {
		mod(&opts)
	}
	a, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

func ask(t *testing.T, a *App) (string, backend.Result, error) {
	t.Helper()
	var sb strings.Builder
	res, err := a.mgr.Generate(context.Background(), &backend.Request{
		Model: "minicpm5:2b", MaxTokens: 8,
		Messages: []backend.Message{{Role: "user", Content: "hello"}},
	}, service.GenerateOptions{}, func(tok backend.Token) error {
		sb.WriteString(tok.Text)
		return nil
	})
	return sb.String(), res, err
}

func TestNPUServesThroughFastFlowLM(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "")
	text, res, err := ask(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "npu" || text == "" {
		t.Fatalf("answered %q by %q; want the NPU", text, res.Backend)
	}
	st := a.mgr.Status()
	if st.Backend != "npu" || st.Fallback != "" || st.Info == nil || st.Info.Format != "q4nx" {
		t.Fatalf("status %+v", st)
	}
	// Switching the model off stops FastFlowLM: no process is left.
	pid := a.FastFlowLMPID()
	if pid == 0 {
		t.Fatal("no FastFlowLM process was started")
	}
	ended := proctest.Watch(t, pid) // while it runs: the wait below is on its end
	if err := a.mgr.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !ended(60 * time.Second) { // a failure bound
		t.Fatalf("flm (pid %d) still running 60 s after the model was switched off", pid)
	}
}

// TestNPUFailureFallsBackToCPU: FastFlowLM answers the first decoded
// token with its ERT_CMD_STATE_TIMEOUT, as it does for this model on real
// NPUs (FastFlowLM#712): the same request is answered by the in-process
// engine, and the status says why.
func TestNPUFailureFallsBackToCPU(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeERT)
	a := r.app(t, "")
	events, cancel := a.mgr.Subscribe()
	defer cancel()
	text, res, err := ask(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "cpu" || res.CompletionTokens == 0 {
		t.Fatalf("answered %q by %q (%+v); want the CPU after the NPU failed", text, res.Backend, res)
	}
	st := a.mgr.Status()
	if st.Backend != "cpu" || !strings.Contains(st.Fallback, "ERT_CMD_STATE_TIMEOUT") {
		t.Fatalf("status %+v", st)
	}
	for {
		select {
		case ev := <-events:
			if ev.Type == "fallback" && strings.Contains(ev.Message, "ERT_CMD_STATE_TIMEOUT") {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no fallback event for the tray and the page within 30 s")
		}
	}
}

func TestNPUNotReadyUsesCPUAndSaysWhy(t *testing.T) {
	r := newNPURig(t)
	a := r.app(t, "../npu/check/testdata/trees/permission-denied")
	_, res, err := ask(t, a)
	if err != nil || res.Backend != "cpu" {
		t.Fatalf("%+v %v", res, err)
	}
	if st := a.mgr.Status(); !strings.Contains(st.Fallback, "NPU is not ready") || !strings.Contains(st.Fallback, "npuchat check") {
		t.Fatalf("fallback reason %q", st.Fallback)
	}
}

// TestShutdownStopsFastFlowLM: Quit and SIGTERM end in Shutdown, which
// leaves no FastFlowLM process behind, within ShutdownTimeout.
func TestShutdownStopsFastFlowLM(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "")
	if _, res, err := ask(t, a); err != nil || res.Backend != "npu" {
		t.Fatalf("%+v %v", res, err)
	}
	pid := a.FastFlowLMPID()
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("FastFlowLM pid %d not running", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	start := time.Now()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("flm (pid %d) still running after Shutdown (%v)", pid, time.Since(start))
	}
}

// TestNPURequestsItCannotDoGoToTheCPU: on a working NPU in auto mode,
// a request FastFlowLM cannot do (logprobs) is answered
// by the in-process engine loaded beside it, each answer says why, and
// FastFlowLM keeps running and answering the rest.
func TestNPURequestsItCannotDoGoToTheCPU(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "", func(o *Options) { o.MemAvailable = func() (int64, error) { return 64 << 30, nil } })
	if _, res, err := ask(t, a); err != nil || res.Backend != "npu" {
		t.Fatalf("plain request: %+v %v", res, err)
	}
	pid := a.FastFlowLMPID()
	for _, tc := range []struct {
		name string
		mod  func(*backend.Request)
		want string
	}{
		// (A JSON format cannot run on this small model: its end token is
		// outside its 512-token vocabulary; the service's tests cover it)
		{"logprobs", func(q *backend.Request) { q.Logprobs, q.TopLogprobs = true, 2 }, "log-probabilities"},
	} {
		req := &backend.Request{Model: "minicpm5:2b", MaxTokens: 8, Messages: []backend.Message{{Role: "user", Content: "hello"}}}
		tc.mod(req)
		var sb strings.Builder
		logprobs := 0
		res, err := a.mgr.Generate(context.Background(), req, service.GenerateOptions{}, func(tok backend.Token) error {
			sb.WriteString(tok.Text)
			logprobs += len(tok.Logprobs)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v; want the CPU engine to answer", tc.name, err)
		}
		if res.Backend != "cpu" || res.CompletionTokens == 0 || !strings.Contains(res.Fallback, tc.want) {
			t.Fatalf("%s: answered %q by %q, reason %q", tc.name, sb.String(), res.Backend, res.Fallback)
		}
		if tc.name == "logprobs" && logprobs == 0 {
			t.Fatal("no log-probabilities came back")
		}
		st := a.mgr.Status()
		if st.Backend != "npu" || st.Beside != "cpu" || !strings.Contains(st.BesideReason, tc.want) {
			t.Fatalf("%s: status %+v", tc.name, st)
		}
	}
	if a.FastFlowLMPID() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("FastFlowLM (pid %d) did not keep running", pid)
	}
	if _, res, err := ask(t, a); err != nil || res.Backend != "npu" {
		t.Fatalf("plain request after: %+v %v", res, err)
	}
}

// TestNPURequestItCannotDoWithoutMemoryForTheCPU: when the free memory
// cannot hold the CPU engine beside FastFlowLM, the request gets a clear
// 400 that says so, and FastFlowLM keeps serving.
func TestNPURequestItCannotDoWithoutMemoryForTheCPU(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "", func(o *Options) { o.MemAvailable = func() (int64, error) { return 200 << 20, nil } })
	req := &backend.Request{Model: "minicpm5:2b", MaxTokens: 8, Messages: []backend.Message{{Role: "user", Content: "hello"}}, Logprobs: true}
	_, err := a.mgr.Generate(context.Background(), req, service.GenerateOptions{}, func(backend.Token) error { return nil })
	var ue *backend.UnsupportedError
	if !errors.As(err, &ue) || ue.Param != "logprobs" || !strings.Contains(err.Error(), "0.2 GB is free") || !strings.Contains(err.Error(), "--engine cpu") {
		t.Fatalf("error %v; want logprobs refused, saying how little memory is free and what to change", err)
	}
	if st := a.mgr.Status(); st.Backend != "npu" || st.State != service.StateOn || st.Beside != "" {
		t.Fatalf("status %+v", st)
	}
}

func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n", 20000000 << 10, true},
		{"MemTotal: 1 kB\n", 0, false},
		{"MemAvailable: lots kB\n", 0, false},
	} {
		got, err := parseMemAvailable([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseMemAvailable(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestShowCapabilitiesBeforeTheModelLoads: /api/show lists what the
// model will do (from its files: its chat template shows no tools; JSON
// logprobs and embeddings through the CPU engine beside FastFlowLM) before it is
// loaded, the same as once FastFlowLM serves it.
func TestShowCapabilitiesBeforeTheModelLoads(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "")
	show := func() []string {
		req := httptest.NewRequest("POST", "http://127.0.0.1:8001/api/show", strings.NewReader(`{"model": "minicpm5:2b"}`))
		w := httptest.NewRecorder()
		a.WebServer().Handler().ServeHTTP(w, req)
		var out struct {
			Capabilities []string `json:"capabilities"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != 200 {
			t.Fatalf("/api/show: %d %s", w.Code, w.Body)
		}
		return out.Capabilities
	}
	want := []string{backend.CapCompletion, backend.CapJSON, backend.CapLogprobs, backend.CapEmbedding}
	if got := show(); !slices.Equal(got, want) {
		t.Fatalf("before loading: %v, want %v", got, want)
	}
	if _, res, err := ask(t, a); err != nil || res.Backend != "npu" {
		t.Fatalf("%+v %v", res, err)
	}
	if got := show(); !slices.Equal(got, want) {
		t.Fatalf("on the NPU: %v, want %v", got, want)
	}
	// Embeddings, which FastFlowLM does not compute, come from the CPU
	// engine beside it, as the capabilities say.
	req := httptest.NewRequest("POST", "http://127.0.0.1:8001/api/embed", strings.NewReader(`{"model": "minicpm5:2b", "input": "hello"}`))
	w := httptest.NewRecorder()
	a.WebServer().Handler().ServeHTTP(w, req)
	var emb struct{ Embeddings [][]float32 }
	if err := json.Unmarshal(w.Body.Bytes(), &emb); err != nil || w.Code != 200 || len(emb.Embeddings) != 1 || len(emb.Embeddings[0]) == 0 {
		t.Fatalf("/api/embed on the NPU: %d %s", w.Code, w.Body)
	}
}

// TestInstalledModelCountsItsWeights: an installed catalog model is
// listed with the size of its weights (/api/tags, /v1/models), and the
// memory check before the CPU engine loads beside FastFlowLM counts
// those weights, not the headroom alone.
func TestInstalledModelCountsItsWeights(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "", func(o *Options) { o.MemAvailable = func() (int64, error) { return besideHeadroom + 1, nil } })
	var desc service.ModelDesc
	for _, d := range a.mgr.Models() {
		if d.Name == "minicpm5:2b" {
			desc = d
		}
	}
	st, err := os.Stat(filepath.Join(desc.Path, "model.q4nx"))
	if err != nil {
		t.Fatalf("model listed as %+v: %v", desc, err)
	}
	if desc.Size != st.Size() || desc.ModifiedAt.IsZero() {
		t.Fatalf("listed size %d, modified %v; the weights are %d bytes", desc.Size, desc.ModifiedAt, st.Size())
	}
	if err := a.beside("minicpm5:2b", "cpu"); err == nil || !strings.Contains(err.Error(), "of memory") {
		t.Fatalf("the CPU engine beside FastFlowLM with the headroom alone free: %v", err)
	}
}

// TestNPULongChatFits: on the NPU a chat is fitted into the context
// FastFlowLM serves (the model list's default_context_length) or the
// request's own, counted with the installed model's own tokenizer (the
// sizes in the error are its tokens, not an estimate's).
func TestNPULongChatFits(t *testing.T) {
	r := newNPURig(t)
	t.Setenv("FAKEFLM_MODE", flmtest.ModeNormal)
	a := r.app(t, "")
	if _, _, err := ask(t, a); err != nil {
		t.Fatal(err)
	}
	if st := a.mgr.Status(); st.Backend != "npu" || st.Info == nil || st.Info.ContextLength != 32768 {
		t.Fatalf("status %+v: want the NPU serving the model list's 32768 tokens", st.Info)
	}
	req := &backend.Request{Model: "minicpm5:2b", MaxTokens: 8, ContextLength: 300, Messages: []backend.Message{{Role: "system", Content: "Be brief."}}}
	for i := range 12 {
		req.Messages = append(req.Messages,
			backend.Message{Role: "user", Content: fmt.Sprintf("question %d %s", i, strings.Repeat("about the cat and the dog ", 4))},
			backend.Message{Role: "assistant", Content: fmt.Sprintf("answer %d", i)})
	}
	req.Messages = append(req.Messages, backend.Message{Role: "user", Content: "the last one"})
	res, err := a.mgr.Generate(context.Background(), req, service.GenerateOptions{}, func(backend.Token) error { return nil })
	if err != nil || res.Backend != "npu" || res.OmittedMessages == 0 || res.ContextLength != 300 {
		t.Fatalf("a long chat in a context of 300: %v, by %q, %d left out, context %d", err, res.Backend, res.OmittedMessages, res.ContextLength)
	}
	big := &backend.Request{Model: "minicpm5:2b", ContextLength: 300, Messages: []backend.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: strings.Repeat("word ", 400)}}}
	_, err = a.mgr.Generate(context.Background(), big, service.GenerateOptions{}, func(backend.Token) error { return nil })
	if !errors.Is(err, backend.ErrPromptTooLong) || !strings.Contains(err.Error(), "the last message and the system prompt take") || !strings.Contains(err.Error(), "(300 tokens)") {
		t.Errorf("a message larger than the context: %v", err)
	}
}
