package page

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// writeGGUF writes a small random model at path.
func writeGGUF(t *testing.T, path string, seed uint64) {
	t.Helper()
	w, err := testmodel.Random(seed, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteGGUF(path, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
}

// TestLibraryAddLocalGGUFChatAndSwitch: on a machine with no model
// installed, a GGUF file in the home folder is found with the page's
// folder browser, added, loaded and chatted with; a second one is added
// by its typed path, and switching between the two from the Models view
// loads each without a restart (the loaded mark follows). A path out of
// the home folder is refused at the field. Forget asks first and keeps
// the file.
func TestLibraryAddLocalGGUFChatAndSwitch(t *testing.T) {
	base := t.TempDir()
	env := home(t, base, nil)
	first := filepath.Join(env["HOME"], "models", "first.gguf")
	second := filepath.Join(env["HOME"], "other", "second.gguf")
	writeGGUF(t, first, 7)
	writeGGUF(t, second, 8)
	outside := filepath.Join(base, "outside.gguf")
	writeGGUF(t, outside, 9)
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 6}}`), 0o644)
	srv := serve(t, env, "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")

	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	b.waitJS(`!document.getElementById("view-library").hidden && document.getElementById("library-note").textContent.includes("No model")`, 20*time.Second)
	b.shot("library-empty")

	// Browse: home → models/ → first.gguf fills the path.
	b.run(chromedp.Click("#library-browse", chromedp.ByQuery))
	b.waitJS(`[...document.querySelectorAll('[data-testid=library-dir-item]')].some(e => e.textContent === "models/")`, 10*time.Second)
	b.run(chromedp.Evaluate(`[...document.querySelectorAll('[data-testid=library-dir-item]')].find(e => e.textContent === "models/").click()`, nil))
	b.waitJS(`[...document.querySelectorAll('[data-testid=library-file-item]')].some(e => e.textContent.startsWith("first.gguf (gguf"))`, 10*time.Second)
	b.shot("library-browse")
	b.run(chromedp.Evaluate(`document.querySelector('[data-testid=library-file-item]').click()`, nil))
	if got := eval[string](b, `document.getElementById("library-path").value`); got != first {
		t.Fatalf("the browser filled the path with %q, want %q", got, first)
	}
	// The browser cannot climb above the home folder.
	for _, dir := range []string{filepath.Join(env["HOME"], ".."), base, "/etc"} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/library/browse?dir="+url.QueryEscape(dir), nil)
		req.Header.Set("Cookie", srv.Cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("browsing %s outside the home: %s, want 400", dir, resp.Status)
		}
	}
	b.run(chromedp.Click("#library-add-button", chromedp.ByQuery))
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 90*time.Second)
	b.waitJS(`(() => { const m = document.querySelector('[data-testid=library-model][data-name="first"]'); return m && m.querySelector('[data-testid=library-loaded]') && m.textContent.includes("runs on CPU only") && m.textContent.includes("GGUF") })()`, 10*time.Second)
	b.shot("library-first-loaded")

	// Chat with it.
	b.run(chromedp.Evaluate(`[...document.querySelectorAll("#view-library .close-view")][0].click()`, nil))
	b.waitJS(`!document.getElementById("view-chat").hidden`, 5*time.Second)
	b.run(chromedp.Click("#composer-input", chromedp.ByQuery), chromedp.SendKeys("#composer-input", "hello there", chromedp.ByQuery), chromedp.KeyEvent(kb.Enter))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === 1 && !a[0].classList.contains('streaming') && a[0].querySelector('.stats') && a[0].querySelector('.stats').textContent.includes('CPU') })()`, 90*time.Second)
	b.shot("library-chat-first")

	// A path outside the home is refused at the field.
	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	b.waitJS(`!document.getElementById("view-library").hidden`, 5*time.Second)
	b.run(chromedp.Evaluate(`document.getElementById("library-path").value = ""`, nil), chromedp.SendKeys("#library-path", outside, chromedp.ByQuery),
		chromedp.Click("#library-add-button", chromedp.ByQuery))
	b.waitJS(`!document.getElementById("library-add-error").hidden && document.getElementById("library-add-error").textContent.includes("outside")`, 10*time.Second)
	b.shot("library-outside-refused")

	// The second by its typed path (~ for the home).
	b.run(chromedp.Evaluate(`document.getElementById("library-path").value = ""`, nil), chromedp.Click("#library-path", chromedp.ByQuery),
		chromedp.SendKeys("#library-path", "~/other/second.gguf", chromedp.ByQuery), chromedp.Click("#library-add-button", chromedp.ByQuery))
	b.waitJS(`(() => { const m = document.querySelector('[data-testid=library-model][data-name="second"]'); return m && m.querySelector('[data-testid=library-loaded]') && m.querySelector('[data-testid=library-loaded]').textContent === "Loaded" })()`, 90*time.Second)
	if st := status(t, srv); st != "second" {
		t.Errorf("after adding second the server serves %q", st)
	}
	// Switch back to first from the list.
	b.run(chromedp.Click(`[data-testid=library-model][data-name="first"] [data-testid=library-use]`, chromedp.ByQuery))
	b.waitJS(`(() => { const m = document.querySelector('[data-testid=library-model][data-name="first"]'); return m && m.querySelector('[data-testid=library-loaded]') && m.querySelector('[data-testid=library-loaded]').textContent === "Loaded" })()`, 90*time.Second)
	if st := status(t, srv); st != "first" {
		t.Errorf("after switching to first the server serves %q", st)
	}
	b.shot("library-switched")

	// Forget second: asked first; Cancel keeps it, Forget forgets it and
	// keeps its file.
	b.run(chromedp.Click(`[data-testid=library-model][data-name="second"] [data-testid=library-remove]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector("dialog[open]") !== null && document.querySelector("dialog[open]").textContent.includes("file stays")`, 5*time.Second)
	b.shot("library-forget-dialog")
	b.run(chromedp.Click(`[data-testid=dialog-cancel]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector("dialog[open]") === null && document.querySelector('[data-testid=library-model][data-name="second"]') !== null`, 5*time.Second)
	b.run(chromedp.Click(`[data-testid=library-model][data-name="second"] [data-testid=library-remove]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector("dialog[open]") !== null`, 5*time.Second)
	b.run(chromedp.Click(`[data-testid=dialog-confirm]`, chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-testid=library-model][data-name="second"]') === null`, 10*time.Second)
	if _, err := os.Stat(second); err != nil {
		t.Errorf("forgetting deleted the user's file: %v", err)
	}
}

// status is the model the server serves now, from /api/status.
func status(t *testing.T, srv *server) string {
	t.Helper()
	var st struct {
		Model string `json:"model"`
	}
	resp, err := http.Get(srv.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Model
}

// TestCatalogMarksWhatTheCPUCannotRun: the Models view's catalog lists
// FastFlowLM's own models beside MiniCPM5-2B; before any download, a
// model the in-process engine cannot compute (Qwen3-VL, Gemma 3,
// Whisper, LFM2, and the llama3 and qwen2 q4nx entries, whose layout
// it is not shown to read) says NPU only and why, and one it can (Qwen3
// 0.6B) says NPU and CPU. Without FastFlowLM, an NPU-only model offers
// no Install, and says so.
func TestCatalogMarksWhatTheCPUCannotRun(t *testing.T) {
	base := t.TempDir()
	env := home(t, base, nil)
	srv := serve(t, env, "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=library-offer]').length > 30`, 20*time.Second)
	offer := func(name string) (runs, note string) {
		js := `(() => { const o = document.querySelector('[data-testid=library-offer][data-name="` + name + `"]'); if (!o) return ["", ""]; ` +
			`const n = o.querySelector('[data-testid=library-cpu-note]'); return [o.querySelector('[data-testid=library-runs]').textContent, n ? n.textContent : ""] })()`
		v := eval[[]string](b, js)
		return v[0], v[1]
	}
	for name, why := range map[string]string{"qwen3vl-it:4b": "vision or audio", "gemma3:4b": "vision or audio", "whisper-v3:turbo": "vision or audio",
		"lfm2:1.2b": "lfm2", "llama3.2:1b": "Llama 3 RoPE scaling", "llama3.1:8b": "Llama 3 RoPE scaling", "deepseek-r1:8b": "Llama 3 RoPE scaling",
		"qwen2.5-it:3b": "qwen2 q4nx layout"} {
		runs, note := offer(name)
		if runs != "NPU only" || !strings.HasPrefix(note, "The CPU cannot run it: ") || !strings.Contains(note, why) || !strings.Contains(note, "FastFlowLM is not installed on this computer") {
			t.Errorf("%s: marked %q, note %q; want NPU only, why (%s) and that FastFlowLM is not here", name, runs, note, why)
		}
		js := `!!document.querySelector('[data-testid=library-offer][data-name="` + name + `"] [data-testid=library-install-button]')`
		if eval[bool](b, js) {
			t.Errorf("%s offers Install, though nothing here can run it", name)
		}
	}
	for _, name := range []string{"qwen3:0.6b", "minicpm5:2b"} {
		if runs, note := offer(name); runs != "NPU and CPU" || note != "" {
			t.Errorf("%s: marked %q, note %q; want NPU and CPU", name, runs, note)
		}
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-testid=library-offer][data-name="qwen3vl-it:4b"]').scrollIntoView({block: "center", behavior: "instant"})`, nil))
	b.waitJS(`(() => { const r = document.querySelector('[data-testid=library-offer][data-name="qwen3vl-it:4b"]').getBoundingClientRect(); return r.top > 0 && r.bottom < innerHeight })()`, 5*time.Second)
	b.shot("library-catalog")
}

// TestCatalogInstallsFastFlowLMModel: one of FastFlowLM's own models
// (qwen3:0.6b, a small qwen3 q4nx on the fake hub, at the repository and
// revision FastFlowLM's list names) is installed from its row in the
// Models view, as MiniCPM5-2B is: the row shows the server's words while
// it installs; then the model is in Installed, loaded (the CPU engine,
// as FastFlowLM is not here), answers a chat request, and is what
// /v1/models and /api/tags list (not the catalog's other offers).
func TestCatalogInstallsFastFlowLMModel(t *testing.T) {
	hub := installtest.Start(t)
	hub.AddRepo(installtest.FLMRepo, installtest.FLMRevision, installtest.FLMFiles(t))
	env := installtest.Env(hub, t.TempDir())
	env["PATH"] = "/usr/bin:/bin"
	srv := serve(t, env, "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	const row = `document.querySelector('[data-testid=library-offer][data-name="qwen3:0.6b"]')`
	b.waitJS(`!!(`+row+` && `+row+`.querySelector("[data-testid=library-install-button]"))`, 20*time.Second)
	if got := eval[string](b, row+`.querySelector('[data-testid=library-runs]').textContent`); got != "NPU and CPU" {
		t.Errorf("qwen3:0.6b is marked %q before the install, want NPU and CPU", got)
	}
	b.run(chromedp.Evaluate(row+`.scrollIntoView({block: "center", behavior: "instant"})`, nil))
	b.shot("library-catalog-install-before")
	// Slow enough to be seen while it downloads.
	hub.AddFaults("model.q4nx", hubtest.Fault{Delay: 10 * time.Millisecond})
	b.run(chromedp.Evaluate(row+`.querySelector('[data-testid=library-install-button]').click()`, nil))
	b.waitJS(`(() => { const l = `+row+`.querySelector('[data-testid=library-install-line]'); return !!l && /% · /.test(l.textContent) })()`, 60*time.Second)
	if line := eval[string](b, row+`.querySelector('[data-testid=library-install-line]').textContent`); !strings.Contains(line, " of ") {
		t.Errorf("the row while installing says %q", line)
	}
	if got := eval[string](b, `document.getElementById('status-text').textContent`); got != "Installing qwen3:0.6b…" {
		t.Errorf("the status line while qwen3:0.6b installs: %q", got)
	}
	if got := eval[string](b, `document.getElementById('install-title').textContent`); strings.Contains(got, "qwen3") {
		t.Errorf("the install view of minicpm5:2b shows the install of qwen3:0.6b: %q", got)
	}
	b.shot("library-catalog-installing")
	// Installed, switched on, and listed with its engines.
	const installed = `document.querySelector('[data-testid=library-list] [data-name="qwen3:0.6b"]')`
	b.waitJS(`!!`+installed+` && !!`+installed+`.querySelector("[data-testid=library-loaded]") && `+installed+`.querySelector('[data-testid=library-loaded]').textContent === "Loaded"`, 120*time.Second)
	facts := eval[string](b, installed+`.querySelector('[data-testid=library-facts]').textContent`)
	if !strings.Contains(facts, "q4nx") || !strings.Contains(facts, "runs on NPU and CPU") || !strings.Contains(facts, "installed by NPU Chat") {
		t.Errorf("the installed model's facts: %q", facts)
	}
	b.waitJS(`document.getElementById('library-note').textContent === "qwen3:0.6b is loaded and answers now."`, 10*time.Second)
	if text := eval[string](b, `document.getElementById('view-library').innerText`); strings.Contains(text, "`") || strings.Contains(text, "npuchat ") {
		t.Errorf("the Models view shows a command line or Markdown: %q", text)
	}
	b.run(chromedp.Evaluate(installed+`.scrollIntoView({block: "center", behavior: "instant"})`, nil))
	b.shot("library-catalog-installed")
	// It answers, and the model lists hold what is installed only.
	code, out := apiCall(t, "POST", srv.URL+"/v1/chat/completions", "", `{"model": "qwen3:0.6b", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}`)
	if code != http.StatusOK || !strings.Contains(out, `"model":"qwen3:0.6b"`) {
		t.Errorf("chat with the installed model: %d %s", code, out)
	}
	for _, path := range []string{"/v1/models", "/api/tags"} {
		code, out := apiCall(t, "GET", srv.URL+path, "", "")
		if code != http.StatusOK || !strings.Contains(out, `"qwen3:0.6b"`) || strings.Contains(out, "llama3.2") || strings.Contains(out, "minicpm5") {
			t.Errorf("%s after the install: %d %s", path, code, out)
		}
	}
}

// TestModelsViewWithRemoteServer: with the remote engine serving, the
// Models view lists what the remote server serves (and which answers
// now), never "No model is installed yet".
func TestModelsViewWithRemoteServer(t *testing.T) {
	up := newUpstream(t)
	up.script(time.Millisecond, "hello")
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	// The remote model answers a first message, so it is on.
	b.run(chromedp.SendKeys("#composer-input", "hi"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=message][data-role=assistant]').length === 1`, 30*time.Second)
	b.run(chromedp.Click("#open-library", chromedp.ByQuery))
	const row = `document.querySelector('[data-testid=library-list] [data-name="scripted"]')`
	b.waitJS(`!!`+row+` && !!`+row+`.querySelector("[data-testid=library-loaded]")`, 20*time.Second)
	if note := eval[string](b, `document.getElementById('library-note').textContent`); strings.Contains(note, "No model") {
		t.Errorf("the Models view says %q while the remote model serves", note)
	}
	facts := eval[string](b, row+`.querySelector('[data-testid=library-facts]').textContent`)
	if facts != "served by the remote server" {
		t.Errorf("the remote model's facts: %q", facts)
	}
	b.shot("library-remote")
}
