package page

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestChatContextLength: the chat's options take a context length of
// its own, with the KV memory it takes beside it; one longer than the
// loaded model holds says what the chat gets instead, one out of range
// is refused at the field, and a chat of a short context is answered
// without its oldest messages, the page saying so.
func TestChatContextLength(t *testing.T) {
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
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 4}, "context_length": 512}`), 0o644)
	srv := serve(t, env, "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)
	note := func() string { return eval[string](b, `document.getElementById('cs-context-kv').textContent`) }
	typeContext := func(v string) {
		b.run(chromedp.Evaluate(`document.getElementById("cs-context").value = ""`, nil), chromedp.SendKeys("#cs-context", v, chromedp.ByQuery))
	}

	b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
	b.waitJS(`document.getElementById('cs-context-kv').textContent.includes('memory')`, 10*time.Second)
	if got := note(); !regexp.MustCompile(`^Empty: the loaded model's context, 512 tokens \(about [\d.]+ [KMG]B of memory for its keys and values\)\.$`).MatchString(got) {
		t.Errorf("the empty field says %q", got)
	}
	typeContext("100000")
	if got := note(); !strings.HasPrefix(got, "The model on now holds 512 tokens: this chat gets 512 (about ") || !strings.HasSuffix(got, "), not 100,000.") {
		t.Errorf("a context longer than the model's says %q", got)
	}
	if !eval[bool](b, `document.getElementById('cs-context-kv').classList.contains('clamped')`) {
		t.Error("the clamped note is not marked")
	}
	b.shot("chat-context-clamped")
	b.run(chromedp.Click("#theme-toggle", chromedp.ByQuery))
	b.shot("chat-context-clamped-dark")
	b.run(chromedp.Click("#theme-toggle", chromedp.ByQuery))

	typeContext("10")
	if got := note(); !strings.Contains(got, "from 64 to 1,048,576") || !eval[bool](b, `document.getElementById('cs-context').getAttribute('aria-invalid') === 'true' && !document.getElementById('cs-context').checkValidity()`) {
		t.Errorf("a context of 10 says %q at the field, and is not marked invalid", got)
	}

	typeContext("128")
	if got := note(); !regexp.MustCompile(`^128 tokens: about [\d.]+ [KMG]B of memory for its keys and values\.$`).MatchString(got) {
		t.Errorf("a context of 128 says %q", got)
	}
	b.run(chromedp.Click("#chat-settings button[type=submit]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('cs-note').textContent === 'Saved.'`, 10*time.Second)
	send := func(text string, answers int) {
		b.run(chromedp.Evaluate(`document.getElementById("composer-input").value = ""`, nil), chromedp.Click("#composer-input", chromedp.ByQuery),
			chromedp.SendKeys("#composer-input", text, chromedp.ByQuery), chromedp.KeyEvent(kb.Enter))
		b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === `+string(rune('0'+answers))+
			` && !a[a.length-1].classList.contains('streaming') && a[a.length-1].querySelector('.stats').textContent.includes('CPU') })()`, 60*time.Second)
	}
	for i := range 4 {
		send(strings.Repeat("tell me about the cat and the dog and the tree ", 3)+string(rune('a'+i)), i+1)
	}
	last := `(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a[a.length-1] })()`
	stats := eval[string](b, last+`.querySelector('.stats').textContent`)
	if !regexp.MustCompile(`context \d+ / 128`).MatchString(stats) {
		t.Errorf("the last answer's line %q does not give the chat's context", stats)
	}
	omitted := eval[string](b, `(() => { const o = `+last+`.querySelector('.omitted'); return o ? o.textContent : '' })()`)
	if !regexp.MustCompile(`^The model did not see the \d+ oldest messages$`).MatchString(omitted) {
		t.Errorf("the last answer says %q about the messages left out", omitted)
	}
	// the status line says what the KV cache holds now
	b.waitJS(`document.getElementById('status-engine').textContent.includes('KV cache:')`, 10*time.Second)
	engine := eval[string](b, `document.getElementById('status-engine').textContent`)
	if !regexp.MustCompile(`^on CPU \(in-process engine\) · KV cache: [\d,]+ tokens, [\d.]+ [KMG]B$`).MatchString(engine) {
		t.Errorf("the status line says %q", engine)
	}
	if title := eval[string](b, `document.getElementById('status-engine').title`); !regexp.MustCompile(`^\d+ prompts? kept in memory \([\d.]+ [KMG]B of a budget of [\d.]+ [KMG]B\), keys and values as f32`).MatchString(title) {
		t.Errorf("the status line's tooltip says %q", title)
	}
	b.shot("chat-context-128")

	// with the model off, a context past the model's own longest says
	// what the chat will get
	b.run(chromedp.Click("#model-toggle", chromedp.ByQuery))
	b.waitJS(`document.getElementById('model-status').dataset.state === 'off'`, 30*time.Second)
	typeContext("100000")
	if got := note(); !regexp.MustCompile(`^minicpm5:2b holds at most [\d,]+ tokens: this chat gets [\d,]+ \(about [\d.]+ [KMG]B of memory for its keys and values\), not 100,000\.$`).MatchString(got) {
		t.Errorf("with the model off, a context past the model's says %q", got)
	}
}
