package page

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestAnswerSaysHowManyTokensWereGuessed (issue 34, item 4): with the
// in-process engine, speculative decoding chosen Auto in the page's
// Settings (saved to settings.json, applied when the model is next
// loaded), the answer to a message that repeats itself says "n of m
// tokens guessed" beside tok/s, n no more than m, also after a reload
// (the history keeps it). Screenshots of the setting and of the answer
// line, light and dark.
func TestAnswerSaysHowManyTokensWereGuessed(t *testing.T) {
	base := t.TempDir()
	w, err := testmodel.Random(7, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(base, "small.gguf")
	if err := testmodel.WriteGGUF(model, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	env := home(t, base, nil)
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 48, "temperature": 0}}`), 0o644)
	srv := serve(t, env, "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)

	// Settings: off by default; Auto saved, with the note that it
	// applies at the next load.
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('set-keep-alive-text').textContent !== ''`, 10*time.Second)
	if v := eval[string](b, `document.getElementById('set-speculative').value`); v != "off" {
		t.Errorf("the speculative choice shows %q before any is saved, want off", v)
	}
	if help := eval[string](b, `document.getElementById('set-speculative-help').textContent`); !strings.Contains(help, "the answer is identical") {
		t.Errorf("the speculative choice's explanation: %q", help)
	}
	b.run(chromedp.SetValue("#set-speculative", "auto", chromedp.ByQuery), chromedp.Click("#settings-save", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.includes('Speculative decoding on applies the next time')`, 10*time.Second)
	if data, _ := os.ReadFile(env["NPUCHAT_CONFIG"]); !strings.Contains(string(data), `"speculative": "auto"`) {
		t.Errorf("settings.json after saving Auto: %s", data)
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-field=speculative]').scrollIntoView({block: 'center'})`, nil))
	b.shot("settings-speculative")

	// The model loaded again takes the setting.
	for _, step := range []string{"stop", "start"} {
		if code, body := apiCall(t, "POST", srv.URL+"/api/model/"+step, "", ""); code >= 300 {
			t.Fatalf("model %s: %d %s", step, code, body)
		}
	}
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)
	text := strings.Repeat("one two three four five six seven ", 6)
	b.run(chromedp.Click("#composer-input", chromedp.ByQuery), chromedp.SendKeys("#composer-input", text, chromedp.ByQuery), chromedp.KeyEvent(kb.Enter))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === 1 && !a[0].classList.contains('streaming') && a[0].querySelector('.stats').textContent.includes('CPU') })()`, 60*time.Second)
	guessed := regexp.MustCompile(`([\d,]+) tok/s · (\d+) of (\d+) tokens guessed · `)
	check := func(when string) {
		t.Helper()
		line := eval[string](b, `document.querySelector('[data-role=assistant] .stats').textContent`)
		m := guessed.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: the answer line %q does not say how many tokens were guessed beside tok/s", when, line)
		}
		n, _ := strconv.Atoi(m[2])
		total, _ := strconv.Atoi(m[3])
		if total <= 0 || n > total {
			t.Errorf("%s: %d of %d tokens guessed", when, n, total)
		}
	}
	check("streamed")
	b.open(eval[string](b, `location.href`)) // the chat's own address
	b.waitJS(`document.querySelectorAll('[data-role=assistant] .stats').length === 1`, 20*time.Second)
	check("after a reload")
	b.shot("chat-tokens-guessed")
	b.scheme("dark")
	b.shot("chat-tokens-guessed-dark")
}
