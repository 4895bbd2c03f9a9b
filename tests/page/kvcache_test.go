package page

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestAnswerSaysWhatCameFromTheCache: with the in-process engine, the
// second message of a chat is computed from the first's keys and values,
// and its answer line says how much of the prompt came from the cache.
func TestAnswerSaysWhatCameFromTheCache(t *testing.T) {
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
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 8}}`), 0o644)
	srv := serve(t, env, "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)
	send := func(text string, answers int) {
		b.run(chromedp.Evaluate(`document.getElementById("composer-input").value = ""`, nil), chromedp.Click("#composer-input", chromedp.ByQuery),
			chromedp.SendKeys("#composer-input", text, chromedp.ByQuery), chromedp.KeyEvent(kb.Enter))
		b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === `+string(rune('0'+answers))+
			` && !a[a.length-1].classList.contains('streaming') && a[a.length-1].querySelector('.stats').textContent.includes('CPU') })()`, 60*time.Second)
	}
	send("tell me about the cat and the dog", 1)
	send("and the tree", 2)
	stats := eval[string](b, `(() => { const a = document.querySelectorAll('[data-role=assistant] .stats'); return a[a.length-1].textContent })()`)
	if !regexp.MustCompile(`prompt from cache: \d+ of \d+ tokens`).MatchString(stats) {
		t.Errorf("the second answer's line %q does not say what came from the cache", stats)
	}
	b.shot("chat-prompt-from-cache")
}
