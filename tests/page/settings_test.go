package page

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// TestSettingsHubEndpointUsedByTheNextInstall: with HF_ENDPOINT pointing
// nowhere, the Hugging Face address and token set in the page's
// Settings are what the next install uses (the fake hub gets the files'
// requests, with the token); a bad address is refused at its field and
// nothing is saved; the token is shown masked only, stored beside
// settings.json with user-only permissions and never logged. Once the
// model is installed and on, the context length shows the KV memory it
// takes (the engine's own bytes per token). Screenshots of the view in
// light, dark and at 360 px.
func TestSettingsHubEndpointUsedByTheNextInstall(t *testing.T) {
	hub := installtest.Start(t)
	hub.AddFaults("model.q4nx", hubtest.Fault{Delay: 2 * time.Millisecond})
	base := t.TempDir()
	env := installtest.Env(hub, base)
	env["HF_ENDPOINT"] = "http://127.0.0.1:9" // nothing listens there
	env["NPUCHAT_ENGINE"] = "cpu"
	env["PATH"] = "/usr/bin:/bin"
	srv := serve(t, env)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`!document.getElementById('view-install').hidden`, 20*time.Second)

	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('set-keep-alive-text').textContent !== ''`, 10*time.Second)
	got := eval[map[string]string](b, `({ka: document.getElementById('set-keep-alive-text').textContent, n: document.getElementById('set-keep-alive-n').value,
		unit: document.getElementById('set-keep-alive-unit').value, help: document.getElementById('set-hf-endpoint-help').textContent,
		placeholder: document.getElementById('set-hf-endpoint').placeholder, port: document.getElementById('set-port').value})`)
	if got["ka"] != "= 5 minutes" || got["n"] != "5" || got["unit"] != "m" {
		t.Errorf("keep-alive shown as %q", got)
	}
	if got["placeholder"] != "http://127.0.0.1:9" || !strings.Contains(got["help"], "HF_ENDPOINT") {
		t.Errorf("the environment's endpoint is not shown as the fallback: %q", got)
	}

	// A bad address: its error is at its field, and nothing is saved.
	b.run(chromedp.SendKeys("#set-hf-endpoint", "hf-mirror.example", chromedp.ByQuery),
		chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('err-hf_endpoint').hidden`, 10*time.Second)
	bad := eval[map[string]any](b, `({text: document.getElementById('err-hf_endpoint').textContent, invalid: document.getElementById('set-hf-endpoint').getAttribute('aria-invalid'),
		focused: document.activeElement === document.getElementById('set-hf-endpoint'), note: document.getElementById('settings-note').textContent,
		below: document.getElementById('err-hf_endpoint').getBoundingClientRect().top >= document.getElementById('set-hf-endpoint').getBoundingClientRect().bottom,
		others: [...document.querySelectorAll('.field-error')].filter(e => !e.hidden).length})`)
	if !strings.Contains(fmt.Sprint(bad["text"]), "starting with https://") || bad["invalid"] != "true" || bad["focused"] != true || bad["below"] != true || bad["others"] != 1.0 ||
		!strings.HasPrefix(fmt.Sprint(bad["note"]), "Not saved") {
		t.Errorf("the bad address's error: %v", bad)
	}
	b.shot("settings-error")
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); strings.Contains(string(data), "hf_endpoint") {
		t.Errorf("a refused address was saved: %s", data)
	}

	// The fake hub's address and a token: saved, the token masked.
	const token = "hf_SettingsPageToken0123456789"
	b.run(chromedp.Evaluate(`document.getElementById('set-hf-endpoint').value = ''`, nil),
		chromedp.SendKeys("#set-hf-endpoint", hub.URL(), chromedp.ByQuery),
		chromedp.SendKeys("#set-hf-token", token, chromedp.ByQuery),
		chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.startsWith('Saved')`, 10*time.Second)
	if s := eval[map[string]any](b, `({ph: document.getElementById('set-hf-token').placeholder, v: document.getElementById('set-hf-token').value,
		errs: [...document.querySelectorAll('.field-error')].filter(e => !e.hidden).length})`); s["ph"] != "hf_…6789 (saved)" || s["v"] != "" || s["errs"] != 0.0 {
		t.Errorf("after saving, the token field: %v", s)
	}
	if _, out := apiCall(t, "GET", srv.URL+"/api/settings", "", ""); strings.Contains(out, "PageToken") || !strings.Contains(out, `"hf_endpoint":"`+hub.URL()+`"`) {
		t.Errorf("GET /api/settings: %s", out)
	}
	settings, _ := os.ReadFile(env["NPUCHAT_CONFIG"])
	tokFile := config.TokenPath(env["NPUCHAT_CONFIG"])
	tb, err := os.ReadFile(tokFile)
	if err != nil || strings.TrimSpace(string(tb)) != token || strings.Contains(string(settings), "PageToken") {
		t.Errorf("token file %q (%v), settings.json %s", tb, err, settings)
	}
	if fi, err := os.Stat(tokFile); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file's mode is %v", fi.Mode().Perm())
	}

	// Screenshots of the view: light, dark, 360 px.
	b.run(chromedp.Evaluate(`window.scrollTo(0, 0); document.getElementById('view-settings').scrollTop = 0`, nil))
	b.shot("settings-light")
	b.run(chromedp.SetValue("#set-theme", "dark", chromedp.ByQuery), chromedp.Evaluate(`document.getElementById('set-theme').dispatchEvent(new Event('change'))`, nil))
	b.waitJS(`document.documentElement.dataset.theme === 'dark' && localStorage.getItem('npuchat-theme') === 'dark'`, 5*time.Second)
	b.shot("settings-dark")
	b.run(chromedp.EmulateViewport(360, 740))
	b.open(srv.URL + "/")
	b.waitJS(`window.innerWidth === 360 && document.getElementById('sidebar').getBoundingClientRect().right <= 0`, 5*time.Second)
	b.run(chromedp.Evaluate(`document.getElementById('open-settings').click()`, nil))
	b.waitJS(`!document.getElementById('view-settings').hidden && document.getElementById('set-keep-alive-text').textContent !== '' && document.getElementById('sidebar').getBoundingClientRect().right <= 0`, 10*time.Second)
	if w := eval[float64](b, `document.getElementById('settings-form').scrollWidth`); w > 360 {
		t.Errorf("at 360 px the settings form is %v px wide", w)
	}
	b.shot("settings-360")
	b.run(chromedp.SetValue("#set-theme", "system", chromedp.ByQuery), chromedp.Evaluate(`document.getElementById('set-theme').dispatchEvent(new Event('change'))`, nil))
	b.run(chromedp.EmulateViewport(1280, 860))

	// The next install goes to the address set in Settings, with the token.
	b.run(chromedp.Click("#view-settings .close-view", chromedp.ByQuery))
	b.open(srv.URL + "/")
	b.waitJS(`!document.getElementById('view-install').hidden && !document.querySelector('[data-testid=install]').hidden`, 20*time.Second)
	b.run(chromedp.Click("[data-testid=install]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('view-chat').hidden && document.getElementById('model-status').dataset.state === 'on'`, 150*time.Second)
	var files, authed int
	for _, q := range hub.Requests() {
		if strings.HasSuffix(q.Path, "/model.q4nx") {
			files++
		}
		if q.Auth == "Bearer "+token {
			authed++
		}
	}
	if files == 0 || authed == 0 {
		t.Errorf("the fake hub got %d requests for model.q4nx, %d with the token (of %d)", files, authed, len(hub.Requests()))
	}

	// The model is on: the context length shows what it costs, from the
	// engine's bytes per token.
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('set-context-help').textContent.includes('The model on now holds')`, 10*time.Second)
	b.run(chromedp.Evaluate(`document.getElementById('set-context').value = ''`, nil), chromedp.SendKeys("#set-context", "2048", chromedp.ByQuery))
	kv := eval[string](b, `document.getElementById('set-context-kv').textContent`)
	_, st := apiCall(t, "GET", srv.URL+"/api/status", "", "")
	per := regexp.MustCompile(`"bytes_per_token":(\d+)`).FindStringSubmatch(st)
	if per == nil {
		t.Fatalf("the status has no bytes per token: %s", st)
	}
	var n int64
	fmt.Sscan(per[1], &n)
	if want := aboutBytes(2048 * n); !strings.HasPrefix(kv, want+" of memory") {
		t.Errorf("beside 2048 tokens: %q, want %q (bytes per token %d)", kv, want, n)
	}
	b.run(chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.includes('applies the next time the model is loaded')`, 10*time.Second)
	b.shot("settings-context")

	// The KV cache type: q8_0 chosen, the memory beside the context
	// follows it before saving (the bytes the settings give for q8_0),
	// and saving keeps it; a value the server refuses shows at its field.
	_, set := apiCall(t, "GET", srv.URL+"/api/settings", "", "")
	q8 := regexp.MustCompile(`"q8_0":(\d+)`).FindStringSubmatch(set)
	if q8 == nil {
		t.Fatalf("the settings give no q8_0 bytes per token: %s", set)
	}
	var nq int64
	fmt.Sscan(q8[1], &nq)
	// q8_0 takes 34/128 of f32's bytes, or (a head dimension not a
	// multiple of 32, as this test model's 16) f16's half, said so
	var hd int
	if m := regexp.MustCompile(`"head_dim":(\d+)`).FindStringSubmatch(set); m != nil {
		fmt.Sscan(m[1], &hd)
	}
	keptAs := hd%32 != 0
	if keptAs != strings.Contains(set, `"kept_as":{"q8_0":"f16"}`) {
		t.Errorf("head dimension %d: the settings say %s", hd, set)
	}
	if want := n * 34 / 128; hd == 0 || !keptAs && nq != want || keptAs && nq != n/2 {
		t.Errorf("q8_0 takes %d bytes a token, f32 %d (head dim %d, kept as f16: %v)", nq, n, hd, keptAs)
	}
	label := "(q8_0)"
	if keptAs {
		label = "(q8_0: this model keeps f16"
	}
	b.run(chromedp.SetValue("#set-kv-cache-type", "q8_0", chromedp.ByQuery), chromedp.Evaluate(`document.getElementById('set-kv-cache-type').dispatchEvent(new Event('change'))`, nil))
	if kv := eval[string](b, `document.getElementById('set-context-kv').textContent`); !strings.HasPrefix(kv, aboutBytes(2048*nq)+" of memory") || !strings.Contains(kv, label) {
		t.Errorf("beside 2048 tokens with q8_0: %q, want %q … %s", kv, aboutBytes(2048*nq), label)
	}
	b.run(chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.includes('The KV cache type applies the next time')`, 10*time.Second)
	if _, set := apiCall(t, "GET", srv.URL+"/api/settings", "", ""); !strings.Contains(set, `"kv_cache_type":"q8_0"`) {
		t.Errorf("after saving q8_0: %s", set)
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-field=kv_cache_type]').scrollIntoView({block: 'center'})`, nil))
	b.shot("settings-kv-cache-type")
	b.run(chromedp.Evaluate(`(() => { const s = document.getElementById('set-kv-cache-type'); s.add(new Option('q4', 'q4')); s.value = 'q4'; })()`, nil))
	b.run(chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('err-kv_cache_type').hidden`, 10*time.Second)
	if msg := eval[string](b, `document.getElementById('err-kv_cache_type').textContent`); !strings.Contains(msg, "f32, f16, q8_0") {
		t.Errorf("the error at the KV cache type: %q", msg)
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-field=kv_cache_type]').scrollIntoView({block: 'center'})`, nil))
	b.shot("settings-kv-cache-type-error")

	if log := srv.logText(); strings.Contains(log, "PageToken") {
		t.Error("the token is in the log")
	}
	if data, _ := os.ReadFile(filepath.Join(env["NPUCHAT_DATA"], "logs", "npuchat.log")); strings.Contains(string(data), "PageToken") {
		t.Error("the token is in the log file")
	}
}

// aboutBytes is settings.js's "about 1.5 GB".
func aboutBytes(n int64) string {
	for _, u := range []struct {
		name string
		size float64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if float64(n) >= u.size {
			v := float64(n) / u.size
			if v >= 10 {
				return fmt.Sprintf("about %d %s", int64(v+0.5), u.name)
			}
			return "about " + strings.TrimSuffix(fmt.Sprintf("%.1f", float64(int64(v*10+0.5))/10), ".0") + " " + u.name
		}
	}
	return fmt.Sprintf("about %d bytes", n)
}
