// Package page tests NPU Chat's chat page in a real headless Chromium
// (Debian's chromium, driven with github.com/chromedp/chromedp v0.16.0,
// pinned: the last release of its classic Run(ctx, actions...) API),
// against real `npuchat serve` processes built from this tree: one on the
// in-process engine with a small generated model, one on the remote
// engine in front of a scripted OpenAI-compatible server written here,
// so that exact answers can be checked, and one installing from the fake
// Hugging Face hub the install tests use. Screenshots go to
// $NPUCHAT_ARTIFACTS/page (or .artifacts/page).
//
// No test sleeps before it asserts: it waits for what the page shows, or
// for what app.js counts on #app (browser.waitIdle: no request in
// flight; data-key-waits, data-install-event), for a transition to end
// (waitStill), or it feeds the scripted upstream a piece at a time
// (upstream.feed, say). A wait's timeout only bounds a failure, which
// then says what was awaited.
package page

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/engine/testmodel"
	"github.com/npuchat/npuchat/models/hub/hubtest"
	"github.com/npuchat/npuchat/service/install/installtest"
)

// remoteServer serves the scripted upstream through the remote engine.
func remoteServer(t *testing.T, up *upstream, base string) *server {
	return serve(t, home(t, base, nil), "--engine", "remote", "--remote-url", up.URL+"/v1", "--model", "scripted")
}

// hostile is an answer that tries everything a model's text must not do.
var hostile = []string{
	"Here is **bold** and a list:\n\n",
	"- one\n- two\n\n",
	"<script>window.pwned = 1</script>\n\n",
	`<img src="http://192.0.2.1/x.png" onerror="window.pwned = 2">` + "\n\n",
	"[click me](javascript:window.pwned=3) and [java\tscript](java\tscript:window.pwned=4) and ![pic](http://192.0.2.1/pic.png)\n\n",
	"[data](data:text/html,<script>window.pwned=5</script>) [entity](&#106;avascript:window.pwned=6) [upper](JaVaScRiPt:window.pwned=7) <javascript:window.pwned=8>\n\n",
	"```go\nfunc main() {\n\treturn \"<b>not bold</b>\" // done\n}\n```\n",
	"Visit [the docs](https://example.org/docs).",
}

func TestMarkdownIsSafeAndHighlighted(t *testing.T) {
	up := newUpstream(t)
	up.script(5*time.Millisecond, hostile...)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "show me markdown"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-testid=message][data-role=assistant]'); return a.length === 1 && a[0].querySelector('.stats').textContent.includes('remote') })()`, 30*time.Second)

	got := eval[map[string]any](b, `(() => {
		const m = document.querySelector('[data-testid=messages]');
		const a = m.querySelector('[data-role=assistant] .body');
		return {
			pwned: window.pwned === undefined ? 0 : window.pwned,
			scripts: m.querySelectorAll('script').length,
			imgs: document.querySelectorAll('img').length,
			js: [...m.querySelectorAll('a')].filter(x => !/^https?:/.test(x.href)).length,
			links: [...a.querySelectorAll('a')].map(x => x.href),
			strong: a.querySelectorAll('strong').length,
			items: a.querySelectorAll('li').length,
			text: a.textContent,
			keywords: [...a.querySelectorAll('.code-block .tok-keyword')].map(x => x.textContent),
			strings: a.querySelectorAll('.code-block .tok-string').length,
			comments: a.querySelectorAll('.code-block .tok-comment').length,
			copy: a.querySelectorAll('[data-testid=copy-code]').length,
			bold: a.querySelector('.code-block b') !== null,
			cut: a.closest('[data-testid=message]').dataset.cut,
		};
	})()`)
	if got["pwned"] != 0.0 || got["scripts"] != 0.0 || got["imgs"] != 0.0 || got["js"] != 0.0 || got["bold"] != false ||
		strings.Contains(fmt.Sprint(got["links"]), "data:") {
		t.Errorf("model output became markup or ran: %v", got)
	}
	text := got["text"].(string)
	for _, want := range []string{"<script>window.pwned = 1</script>", `onerror="window.pwned = 2"`, "click me", "return \"<b>not bold</b>\""} {
		if !strings.Contains(text, want) {
			t.Errorf("the answer does not show %q as text: %q", want, text)
		}
	}
	if fmt.Sprint(got["links"]) != "[http://192.0.2.1/pic.png https://example.org/docs]" {
		t.Errorf("links: %v (want the https one, and the image as a link, not loaded)", got["links"])
	}
	if got["strong"] != 1.0 || got["items"] != 2.0 || got["copy"] != 1.0 || got["strings"] != 1.0 || got["comments"] != 1.0 ||
		!strings.Contains(fmt.Sprint(got["keywords"]), "func") || !strings.Contains(fmt.Sprint(got["keywords"]), "return") {
		t.Errorf("markdown or highlighting missing: %v", got)
	}
	if got["cut"] != "false" {
		t.Errorf("a finished answer is marked cut")
	}
	// The copy button copies the code exactly.
	b.run(chromedp.ActionFunc(func(ctx context.Context) error {
		for _, name := range []string{"clipboard-read", "clipboard-write"} {
			if err := cdpbrowser.SetPermission(&cdpbrowser.PermissionDescriptor{Name: name}, cdpbrowser.PermissionSettingGranted).WithOrigin(srv.URL).Do(ctx); err != nil {
				return err
			}
		}
		return nil
	}))
	b.run(chromedp.Click("[data-testid=copy-code]", chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-testid=copy-code]').textContent === 'Copied'`, 5*time.Second)
	var clip string
	b.run(chromedp.Evaluate(`navigator.clipboard.readText()`, &clip, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if clip != "func main() {\n\treturn \"<b>not bold</b>\" // done\n}" {
		t.Errorf("copied %q", clip)
	}
	b.shot("chat-light")

	// Reload: the conversation is found again, rendered the same way.
	path := eval[string](b, `location.pathname`)
	if !strings.HasPrefix(path, "/c/") {
		t.Fatalf("the page is at %q, not at its conversation", path)
	}
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2`, 10*time.Second)
	if n := eval[float64](b, `document.querySelectorAll('[data-testid=conversations] li.conversation').length`); n != 1 {
		t.Errorf("%v conversations listed after reload", n)
	}
	if p := eval[float64](b, `window.pwned === undefined ? 0 : window.pwned`); p != 0 {
		t.Errorf("reloaded history ran model output: %v", p)
	}
	// Search finds the chat by its answer's text, and says when nothing matches.
	b.run(chromedp.SendKeys("[data-testid=search]", "docs", chromedp.ByQuery))
	b.waitJS(`(() => { const l = document.querySelectorAll('[data-testid=conversations] li.conversation'); return l.length === 1 && l[0].querySelector('.snippet') && l[0].querySelector('.snippet').textContent.includes('docs') })()`, 5*time.Second)
	b.run(chromedp.SendKeys("[data-testid=search]", "zzzz", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=conversations] li.conversation').length === 0 && document.querySelector('[data-testid=conversations] li.none') !== null`, 5*time.Second)
	// A 4K screen: the text column stays readable, nothing stretches.
	b.run(chromedp.EmulateViewport(3840, 2160))
	b.open(srv.URL + path)
	if w := eval[float64](b, `document.querySelector('[data-role=assistant]').getBoundingClientRect().width`); w > 1400 {
		t.Errorf("at 4K the answer is %v px wide: too long lines to read", w)
	}
	b.shot("chat-4k")
}

func TestStopKeepsTheCutAnswer(t *testing.T) {
	up := newUpstream(t)
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	up.script(30*time.Millisecond, words...)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "count", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant] .body'); return a && a.textContent.includes('w10 ') })()`, 20*time.Second)
	if !eval[bool](b, `!document.querySelector('[data-testid=stop]').hidden`) {
		t.Fatal("no stop button while the answer streams")
	}
	// Esc stops, as the stop button does.
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`document.querySelector('[data-role=assistant]').dataset.cut === 'true'`, 5*time.Second)
	shown := eval[string](b, `document.querySelector('[data-role=assistant] .body').textContent`)
	// Once the server has cancelled the upstream request and the page has
	// no request left, nothing more can arrive.
	eventually(t, "the upstream request to be cancelled by the stop", func() bool { _, c := up.counts(); return c >= 1 })
	b.waitIdle()
	if after := eval[string](b, `document.querySelector('[data-role=assistant] .body').textContent`); after != shown {
		t.Fatalf("the answer kept growing after stop: %q then %q", shown, after)
	}
	if _, cancelled := up.counts(); cancelled != 1 {
		t.Errorf("the upstream request was not cancelled by the stop (%d cancelled)", cancelled)
	}
	// Reload: the stored answer holds everything shown, marked cut.
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2`, 10*time.Second)
	stored := eval[map[string]string](b, `(() => { const a = document.querySelector('[data-role=assistant]'); return {cut: a.dataset.cut, text: a.querySelector('.body').textContent, note: a.querySelector('.cut').textContent} })()`)
	if stored["cut"] != "true" || !strings.HasPrefix(stored["text"], strings.TrimSpace(shown)) || !strings.Contains(stored["note"], "Stopped") {
		t.Fatalf("after reload: %v; shown before: %q", stored, shown)
	}
	// Regenerate answers again, completely this time.
	up.script(time.Millisecond, "A ", "whole ", "answer.")
	b.run(chromedp.Click("[data-role=assistant] button.regenerate", chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === 1 && a[0].dataset.cut === 'false' && a[0].querySelector('.body').textContent === 'A whole answer.' })()`, 10*time.Second)
	// Edit and resend the question.
	up.script(time.Millisecond, "Edited ", "reply.")
	b.run(chromedp.Click("[data-role=user] button.edit", chromedp.ByQuery))
	b.run(chromedp.SetValue(".edit-form textarea", "count again", chromedp.ByQuery), chromedp.Click(".edit-form button[type=submit]", chromedp.ByQuery))
	b.waitJS(`(() => { const m = document.querySelectorAll('[data-testid=message]'); return m.length === 2 && m[0].querySelector('.body').textContent === 'count again' && m[1].querySelector('.body').textContent === 'Edited reply.' })()`, 10*time.Second)
}

func TestKilledServerKeepsEveryWordShown(t *testing.T) {
	up := newUpstream(t)
	words := make([]string, 400)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	up.script(25*time.Millisecond, words...)
	base := t.TempDir()
	srv := remoteServer(t, up, base)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "count slowly"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant] .body'); return a && a.textContent.includes('w40 ') })()`, 20*time.Second)
	srv.kill() // SIGKILL mid-answer
	b.waitJS(`document.querySelector('[data-role=assistant]').dataset.cut === 'true'`, 10*time.Second)
	shown := strings.TrimSpace(eval[string](b, `document.querySelector('[data-role=assistant] .body').textContent`))
	path := eval[string](b, `location.pathname`)

	again := remoteServer(t, up, base) // the same data folder
	b.open(again.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2`, 10*time.Second)
	stored := eval[map[string]string](b, `(() => { const a = document.querySelector('[data-role=assistant]'); return {cut: a.dataset.cut, text: a.querySelector('.body').textContent, note: a.querySelector('.cut').textContent} })()`)
	if !strings.HasPrefix(stored["text"], shown) {
		t.Fatalf("words shown before the kill are lost:\nshown  %q\nstored %q", shown, stored["text"])
	}
	if stored["cut"] != "true" || !strings.Contains(stored["note"], "Interrupted") {
		t.Fatalf("the interrupted answer is not shown as cut: %v", stored)
	}
}

func TestInProcessEngineChatSwitchThemeAndSmallScreen(t *testing.T) {
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
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 24}}`), 0o644)
	srv := serve(t, env, "--model", model, "--name", "minicpm5:2b", "--engine", "cpu")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 60*time.Second)

	// Shift+Enter is a new line; Enter sends.
	b.run(chromedp.Click("#composer-input", chromedp.ByQuery), chromedp.SendKeys("#composer-input", "Hello", chromedp.ByQuery),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(input.ModifierShift)), chromedp.SendKeys("#composer-input", "there", chromedp.ByQuery))
	if v := eval[string](b, `document.getElementById('composer-input').value`); v != "Hello\nthere" {
		t.Fatalf("Shift+Enter: the box holds %q", v)
	}
	if n := eval[float64](b, `document.querySelectorAll('[data-testid=message]').length`); n != 0 {
		t.Fatal("Shift+Enter sent the message")
	}
	b.run(chromedp.KeyEvent(kb.Enter))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return a && !a.classList.contains('streaming') && a.querySelector('.stats').textContent.includes('CPU (in-process engine)') })()`, 60*time.Second)
	stats := eval[string](b, `document.querySelector('[data-role=assistant] .stats').textContent`)
	for _, want := range []string{"tok/s", "first token", "context "} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats line %q lacks %q", stats, want)
		}
	}
	if ctxText := eval[string](b, `document.getElementById('context').textContent`); !strings.Contains(ctxText, "Context used:") {
		t.Errorf("context used is not shown: %q", ctxText)
	}
	if q := eval[string](b, `document.querySelector('[data-role=user] .body').dataset.raw`); q != "Hello\nthere" {
		t.Errorf("question %q", q)
	}

	// The model switch turns it off and on. The status event can show
	// "switched off" before the stop request has returned; the switch is
	// disabled until it has, and a click on it then does nothing: wait
	// for it to be usable again before the next click.
	const toggleReady = `!document.querySelector('[data-testid=model-toggle]').disabled`
	b.run(chromedp.Click("[data-testid=model-toggle]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('status-text').textContent.includes('switched off') && document.querySelector('[data-testid=model-toggle]').getAttribute('aria-checked') === 'false' && `+toggleReady, 60*time.Second)
	b.run(chromedp.Click("[data-testid=model-toggle]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on' && document.querySelector('[data-testid=model-toggle]').getAttribute('aria-checked') === 'true' && `+toggleReady, 120*time.Second)

	// Dark mode follows the system, and the toggle is remembered.
	bg := func() string { return eval[string](b, `getComputedStyle(document.body).backgroundColor`) }
	light := bg()
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	dark := bg()
	if light != "rgb(255, 255, 255)" || dark == light {
		t.Fatalf("theme does not follow the system: light %s, dark %s", light, dark)
	}
	b.shot("chat-dark")
	b.run(chromedp.Click("[data-testid=theme-toggle]", chromedp.ByQuery))
	if bg() != light {
		t.Fatalf("the toggle did not switch to light: %s", bg())
	}
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	if bg() != light {
		t.Fatalf("the theme choice was not remembered: %s", bg())
	}
	b.run(chromedp.Click("[data-testid=theme-toggle]", chromedp.ByQuery))

	// 360 px: no sideways scrolling, the list behind a menu button.
	b.run(chromedp.EmulateViewport(360, 740))
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2`, 10*time.Second)
	if w := eval[float64](b, `Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)`); w > 360 {
		t.Errorf("the page is %v px wide at 360 px: it scrolls sideways", w)
	}
	b.shot("chat-360")
	b.run(chromedp.Click("#menu", chromedp.ByQuery))
	b.waitJS(`document.body.classList.contains('sidebar-open')`, 5*time.Second)
	b.waitStill("#sidebar")
	b.shot("chat-360-menu")
	b.run(chromedp.Click("[data-testid=new-chat]", chromedp.ByQuery))
	b.waitJS(`location.pathname === '/' && document.querySelectorAll('[data-testid=message]').length === 0`, 5*time.Second)

	// The NPU check report, with its fixes (this machine has no NPU).
	b.run(chromedp.EmulateViewport(1280, 860))
	b.run(chromedp.Click("#open-check", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('check-summary').textContent.startsWith('Checking') && document.querySelectorAll('#check-list li').length > 0`, 60*time.Second)
	if eval[float64](b, `document.querySelectorAll('#check-list .fix').length`) == 0 && !eval[bool](b, `document.getElementById('check-summary').dataset.ready === 'true'`) {
		t.Error("a failed NPU check shows no fix")
	}
	b.shot("check-report")
	// Settings and the log tail open too.
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.querySelector('input[name=engine][value=cpu]').checked && document.getElementById('set-max-tokens').value === '24'`, 10*time.Second)
	b.run(chromedp.Click("#open-logs", chromedp.ByQuery))
	b.waitJS(`document.getElementById('log-lines').textContent.includes('serving')`, 10*time.Second)
}

func TestInstallFromThePage(t *testing.T) {
	hub := installtest.Start(t)
	hub.AddFaults("model.q4nx", hubtest.Fault{Delay: 4 * time.Millisecond})
	base := t.TempDir()
	env := installtest.Env(hub, base)
	env["NPUCHAT_ENGINE"] = "cpu"
	env["PATH"] = "/usr/bin:/bin"
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 16}}`), 0o644)
	srv := serve(t, env)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`!document.getElementById('view-install').hidden && !document.querySelector('[data-testid=install]').hidden`, 20*time.Second)
	if s := eval[string](b, `document.getElementById('status-text').textContent`); !strings.Contains(s, "not installed") {
		t.Errorf("status: %q", s)
	}
	// Nothing to switch on yet: the switch is off and waits.
	if s := eval[string](b, `(() => { const t = document.querySelector('[data-testid=model-toggle]'); return t.getAttribute('aria-checked') + ' ' + t.disabled })()`); s != "false true" {
		t.Errorf("the model switch before the install: checked, disabled = %s", s)
	}
	b.shot("install-view")
	// At 360 px the status keeps its dot beside its words (two lines at most).
	b.run(chromedp.EmulateViewport(360, 740))
	b.waitJS(`(() => { const d = document.querySelector('#model-status .dot').getBoundingClientRect(), s = document.getElementById('status-text').getBoundingClientRect();
		return window.innerWidth === 360 && d.right <= s.left && s.height < 45 && !document.body.classList.contains('sidebar-open') })()`, 5*time.Second)
	b.waitJS(`document.getElementById('sidebar').getBoundingClientRect().right <= 0`, 5*time.Second)
	b.shot("install-view-360")
	b.run(chromedp.EmulateViewport(1280, 860))
	b.run(chromedp.Click("[data-testid=install]", chromedp.ByQuery))
	b.waitJS(`(() => { const p = document.querySelector('[data-testid=install-progress]'); return p.value > 0.05 && p.value < 0.9 })()`, 30*time.Second)
	first := eval[float64](b, `document.querySelector('[data-testid=install-progress]').value`)
	b.waitJS(fmt.Sprintf(`document.querySelector('[data-testid=install-progress]').value > %v`, first), 10*time.Second)
	// The bar and the first line are the whole install's; the second
	// line is the file downloading now, and which of how many it is.
	whole := eval[map[string]string](b, `({all: document.getElementById('install-progress-text').textContent, file: document.getElementById('install-file-text').textContent,
		title: document.getElementById('install-title').textContent, status: document.getElementById('status-text').textContent})`)
	if !regexp.MustCompile(`^\d+% · [\d.]+ [kMG]?B of [\d.]+ [kMG]?B · about \d+ s left$`).MatchString(whole["all"]) ||
		!regexp.MustCompile(`^File [2-9] of [2-9]: model\.q4nx \([\d.]+ [kM]?B of [\d.]+ [kM]?B\) · [\d.]+ [kM]?B/s$`).MatchString(whole["file"]) ||
		whole["title"] != "Installing minicpm5:2b…" || whole["status"] != "Installing minicpm5:2b…" {
		t.Errorf("install progress: %q", whole)
	}
	b.shot("install-progress")
	// The bar never goes back, from one file to the next or on resume.
	b.run(chromedp.Evaluate(`window.bars = []; setInterval(() => window.bars.push(document.querySelector('[data-testid=install-progress]').value), 20)`, nil))
	b.run(chromedp.Click("#install-cancel", chromedp.ByQuery))
	b.waitJS(`document.getElementById('install-progress-text').textContent.startsWith('Cancelled') && document.querySelector('[data-testid=install]').textContent === 'Resume'`, 20*time.Second)
	stopped := eval[float64](b, `document.querySelector('[data-testid=install-progress]').value`)
	// Once the event stream has brought the cancel too (every progress
	// event sent before it is shown) and no answer to an earlier request
	// is on its way, the bar must still be where the cancel left it.
	b.waitJS(`document.getElementById('app').dataset.installEvent === 'cancelled'`, 20*time.Second)
	b.waitIdle()
	if v := eval[float64](b, `document.querySelector('[data-testid=install-progress]').value`); v != stopped {
		t.Errorf("progress moved after cancel: %v then %v", stopped, v)
	}
	b.run(chromedp.Click("[data-testid=install]", chromedp.ByQuery))
	// Done: the page starts the model and goes back to the chat. (13 s
	// on a quiet machine; the load took over 90 s once under make test's
	// parallel packages on 2 cores.)
	b.waitJS(`!document.getElementById('view-chat').hidden && document.getElementById('model-status').dataset.state === 'on'`, 150*time.Second)
	b.waitJS(`(() => { const t = document.querySelector('[data-testid=model-toggle]'); return t.getAttribute('aria-checked') === 'true' && !t.disabled })()`, 10*time.Second)
	bars := eval[[]float64](b, `window.bars`)
	for i := 1; i < len(bars); i++ {
		if bars[i] < bars[i-1] {
			t.Errorf("the install's bar went back from %v to %v", bars[i-1], bars[i])
			break
		}
	}
	if len(bars) < 5 || bars[len(bars)-1] != 1 {
		t.Errorf("the bar: %v", bars)
	}
	b.run(chromedp.SendKeys("#composer-input", "hi"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return a && a.dataset.cut === 'false' && !a.classList.contains('streaming') && a.querySelector('.body').textContent.length > 0 })()`, 60*time.Second)
	var resumed bool
	for _, q := range hub.Requests() {
		if strings.HasSuffix(q.Path, "/model.q4nx") && q.Range != "" && q.Range != "bytes=0-" {
			resumed = true
		}
	}
	if !resumed {
		t.Error("the resumed install downloaded model.q4nx from the start")
	}
}

func TestFollowsTheStreamUnlessScrolledUp(t *testing.T) {
	up := newUpstream(t)
	lines := make([]string, 300)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d\n\n", i)
	}
	up.script(20*time.Millisecond, lines...)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "lines"+kb.Enter, chromedp.ByQuery))
	const atBottom = `(() => { const m = document.getElementById('messages'); return m.scrollHeight > m.clientHeight + 200 && m.scrollHeight - m.scrollTop - m.clientHeight < 60 })()`
	b.waitJS(atBottom, 20*time.Second)
	// Scrolled up, the view stays where the reader is while text arrives.
	b.run(chromedp.Evaluate(`(() => { const m = document.getElementById('messages'); m.scrollTop = 0; m.dispatchEvent(new Event('scroll')); })()`, nil))
	before := eval[float64](b, `document.getElementById('messages').scrollHeight`)
	b.waitJS(fmt.Sprintf(`document.getElementById('messages').scrollHeight > %v + 100`, before), 10*time.Second)
	if top := eval[float64](b, `document.getElementById('messages').scrollTop`); top > 5 {
		t.Errorf("the view jumped to %v px while the reader was scrolled up", top)
	}
	// A button goes to the latest message, and the view follows again.
	if !eval[bool](b, `!document.querySelector('[data-testid=to-bottom]').hidden`) {
		t.Error("scrolled up, there is no button to the latest message")
	}
	b.shot("scrolled-up")
	b.run(chromedp.Click("[data-testid=to-bottom]", chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-testid=to-bottom]').hidden && document.activeElement === document.getElementById('composer-input')`, 5*time.Second)
	h := eval[float64](b, `document.getElementById('messages').scrollHeight`)
	b.waitJS(fmt.Sprintf(`document.getElementById('messages').scrollHeight > %v + 100`, h), 10*time.Second)
	b.waitJS(atBottom, 5*time.Second)
	if busy := eval[string](b, `document.querySelector('[data-role=assistant]').getAttribute('aria-busy') || ''`); busy != "true" {
		t.Errorf("a streaming answer is not aria-busy: %q", busy)
	}
	// Stopped, scrolled up, then a new chat: nothing to scroll to there.
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`!document.querySelector('[data-testid=send]').hidden`, 5*time.Second)
	b.run(chromedp.Evaluate(`(() => { const m = document.getElementById('messages'); m.scrollTop = 0; m.dispatchEvent(new Event('scroll')); })()`, nil))
	b.waitJS(`!document.querySelector('[data-testid=to-bottom]').hidden`, 5*time.Second)
	b.run(chromedp.Click("[data-testid=new-chat]", chromedp.ByQuery))
	b.waitJS(`location.pathname === '/' && document.querySelector('[data-testid=to-bottom]').hidden`, 5*time.Second)
}
