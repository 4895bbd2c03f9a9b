package page

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSettingsSaveShowsEveryBadFieldAtOnce: one Save with five bad
// values (a negative keep-alive, a context too short, a temperature and
// top-p out of range, a models folder that is not there) shows all five,
// each at its field, in words for people (no "Context_length"), the
// first focused; nothing is saved. Fixing them all saves at the next
// Save. Screenshots light, dark, 360 px.
func TestSettingsSaveShowsEveryBadFieldAtOnce(t *testing.T) {
	up := newUpstream(t)
	base := t.TempDir()
	srv := remoteServer(t, up, base)
	settingsFile := filepath.Join(base, "settings.json")
	before, _ := os.ReadFile(settingsFile)
	missing := filepath.Join(base, "no-such-models")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('set-keep-alive-text').textContent !== ''`, 10*time.Second)
	set := func(id, v string) {
		b.run(chromedp.SetValue("#"+id, v, chromedp.ByQuery))
	}
	set("set-keep-alive-n", "-3")
	set("set-keep-alive-unit", "m")
	set("set-context", "100")
	set("set-temperature", "5")
	set("set-top-p", "2")
	set("set-models-dir", missing)
	b.run(chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.startsWith('Not saved')`, 10*time.Second)
	type fieldShown struct {
		ID, Text string
		Invalid  bool
	}
	got := eval[struct {
		Shown   []fieldShown
		Focused string
		Note    string
	}](b, `({
		Shown: [...document.querySelectorAll('#settings-form .field-error')].filter((e) => !e.hidden).map((e) => ({
			ID: e.id, Text: e.textContent,
			Invalid: !!document.querySelector('[aria-errormessage="' + e.id + '"][aria-invalid=true]'),
		})),
		Focused: document.activeElement ? document.activeElement.id : '',
		Note: document.getElementById('settings-note').textContent,
	})`)
	if ka := eval[string](b, `document.getElementById('set-keep-alive-text').textContent`); strings.Contains(ka, "never (") {
		t.Errorf("-3 minutes is shown as %q", ka)
	}
	want := map[string]string{
		"err-keep_alive":     "cannot be negative",
		"err-context_length": "The context length must be 0 (automatic) or between",
		"err-temperature":    "The temperature must be between 0 and 2",
		"err-top_p":          "Top-p must be between 0 and 1",
		"err-models_dir":     "There is no folder " + missing,
	}
	if len(got.Shown) != len(want) {
		t.Errorf("one Save shows %d errors, want %d: %+v", len(got.Shown), len(want), got.Shown)
	}
	for _, f := range got.Shown {
		w, ok := want[f.ID]
		switch {
		case !ok:
			t.Errorf("an error at %s: %q", f.ID, f.Text)
		case !strings.Contains(f.Text, w):
			t.Errorf("%s says %q, want %q in it", f.ID, f.Text, w)
		case strings.Contains(f.Text, "_"):
			t.Errorf("%s names a key: %q", f.ID, f.Text)
		case !f.Invalid:
			t.Errorf("%s: its input is not marked invalid", f.ID)
		}
	}
	if got.Focused != "set-keep-alive-n" || !strings.Contains(got.Note, "5 settings need a change") {
		t.Errorf("focus on %q, note %q; want the first bad field focused and the count said", got.Focused, got.Note)
	}
	if after, _ := os.ReadFile(settingsFile); string(after) != string(before) {
		t.Errorf("a refused Save changed the settings file: %s", after)
	}
	b.shot("settings-all-errors-light")
	b.run(chromedp.Evaluate(`document.documentElement.dataset.theme = 'dark'`, nil))
	b.shot("settings-all-errors-dark")
	b.run(chromedp.EmulateViewport(360, 780))
	b.waitStill("#sidebar")
	b.run(chromedp.Evaluate(`document.getElementById('err-keep_alive').scrollIntoView({block: 'start'})`, nil))
	b.shot("settings-all-errors-360")
	if w := eval[float64](b, `document.getElementById('settings-form').scrollWidth`); w > 362 {
		t.Errorf("at 360 px the settings form is %v px wide: %s", w, eval[string](b, `[...document.querySelectorAll("#settings-form *")].filter((e) => e.getBoundingClientRect().right > 362).slice(0, 6).map((e) => e.tagName + "#" + e.id + "." + e.className + ":" + Math.round(e.getBoundingClientRect().right)).join(" ")`))
	}
	b.run(chromedp.EmulateViewport(1280, 800))

	// All fixed: one Save saves, and no error is left.
	if err := os.Mkdir(missing, 0o700); err != nil {
		t.Fatal(err)
	}
	set("set-keep-alive-n", "3")
	set("set-context", "4096")
	set("set-temperature", "0.5")
	set("set-top-p", "0.9")
	b.run(chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.startsWith('Saved')`, 10*time.Second)
	if n := eval[int](b, `[...document.querySelectorAll('#settings-form .field-error')].filter((e) => !e.hidden).length`); n != 0 {
		t.Errorf("%d errors left after a good Save", n)
	}
	if after, _ := os.ReadFile(settingsFile); !strings.Contains(string(after), `"keep_alive": "3m"`) || !strings.Contains(string(after), missing) {
		t.Errorf("the good Save wrote %s", after)
	}
}
