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
// Whisper) says the CPU cannot run it, and one it can (Qwen3 0.6B)
// says NPU and CPU.
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
	for _, name := range []string{"qwen3vl-it:4b", "gemma3:4b", "whisper-v3:turbo", "lfm2:1.2b"} {
		runs, note := offer(name)
		if runs != "NPU only" || !strings.Contains(note, "The CPU cannot run it") {
			t.Errorf("%s: marked %q, note %q; want NPU only and why the CPU cannot", name, runs, note)
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
