package page

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestSettingsParallel: the Settings view shows how many requests the
// CPU engine answers at once: "Automatic (N at once now)" with the N
// the server works out from the KV memory, and what the model on now
// answers; a value out of range is refused at its field, nothing saved;
// a good one is saved and applies at the next load. A server started
// with --parallel 3 answers 3 at once. Screenshot of the field.
func TestSettingsParallel(t *testing.T) {
	base := t.TempDir()
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(base, "small.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	env := home(t, base, nil)
	srv := serve(t, env, "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('set-parallel-help').textContent.includes('The model on now answers')`, 10*time.Second)
	_, js := apiCall(t, "GET", srv.URL+"/api/settings", "", "")
	auto := regexp.MustCompile(`"auto_parallel":(\d+)`).FindStringSubmatch(js)
	now := regexp.MustCompile(`"kv":\{.*?"parallel":(\d+)`).FindStringSubmatch(js) // kv holds objects of its own (bytes per token by type)
	if auto == nil || now == nil {
		t.Fatalf("GET /api/settings says no automatic or current parallel: %s", js)
	}
	shown := eval[map[string]string](b, `({v: document.getElementById('set-parallel').value, now: document.getElementById('set-parallel-now').textContent,
		help: document.getElementById('set-parallel-help').textContent})`)
	if shown["v"] != "0" || shown["now"] != "Automatic ("+auto[1]+" at once now)" || !strings.Contains(shown["help"], "answers "+now[1]+" at once") {
		t.Errorf("the parallel field: %q (automatic %s, now %s)", shown, auto[1], now[1])
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-field=parallel]').scrollIntoView({block: 'center'})`, nil))
	b.shot("settings-parallel-auto")

	// out of range: refused at its field
	b.run(chromedp.Evaluate(`document.getElementById('set-parallel').value = ''`, nil), chromedp.SendKeys("#set-parallel", "40", chromedp.ByQuery),
		chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('err-parallel').hidden`, 10*time.Second)
	if msg := eval[string](b, `document.getElementById('err-parallel').textContent`); !strings.Contains(msg, "between 1 and 16") {
		t.Errorf("the error at the parallel field: %q", msg)
	}
	b.shot("settings-parallel-error")
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); strings.Contains(string(data), "parallel") {
		t.Errorf("a refused value was saved: %s", data)
	}

	b.run(chromedp.Evaluate(`document.getElementById('set-parallel').value = ''`, nil), chromedp.SendKeys("#set-parallel", "2", chromedp.ByQuery))
	if got := eval[string](b, `document.getElementById('set-parallel-now').textContent`); got != "2 at once, decoded together" {
		t.Errorf("beside 2: %q", got)
	}
	b.run(chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.includes('Requests answered at once applies the next time')`, 10*time.Second)
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); !strings.Contains(string(data), `"parallel": 2`) {
		t.Errorf("the settings file after saving 2: %s", data)
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-field=parallel]').scrollIntoView({block: 'center'})`, nil))
	b.shot("settings-parallel")

	other := serve(t, home(t, t.TempDir(), nil), "--model", model, "--name", "minicpm5:2b", "--engine", "cpu", "--parallel", "3")
	eventually(t, "a server started with --parallel 3 to report it loaded with 3", func() bool {
		_, js := apiCall(t, "GET", other.URL+"/api/settings", "", "")
		return regexp.MustCompile(`"kv":\{.*?"loaded":true[^{}]*"parallel":3`).MatchString(js) && strings.Contains(js, `"parallel":3,`)
	})
}
