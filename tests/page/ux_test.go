package page

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/service/install/installtest"
)

// visible counts the elements of sel that are shown.
const visible = `((sel) => [...document.querySelectorAll(sel)].filter((e) => !e.hidden && e.offsetParent !== null).length)`

// TestRegenerateOnTheLastAnswerAndAnswerAnUnansweredQuestion: the
// server answers the last question again, so only the last answer
// offers Regenerate; a question left without an answer (the model was
// switched off) offers Answer, and the banner says what to do.
func TestRegenerateOnTheLastAnswerAndAnswerAnUnansweredQuestion(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	for i, q := range []string{"first question", "second question"} {
		up.script(time.Millisecond, "Answer ", "number ", string(rune('1'+i)), ".")
		b.run(chromedp.SendKeys("#composer-input", q, chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
		b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === `+string(rune('1'+i))+` && !a[a.length-1].classList.contains('streaming') && !document.querySelector('[data-testid=send]').hidden })()`, 20*time.Second)
	}
	if n := eval[float64](b, visible+`('button.regenerate')`); n != 1 {
		t.Errorf("%v answers offer Regenerate; only the last should", n)
	}
	if !eval[bool](b, `!document.querySelectorAll('[data-role=assistant]')[1].querySelector('button.regenerate').hidden`) {
		t.Error("the last answer offers no Regenerate")
	}
	// The same after a reload (the server renders the messages).
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 4`, 10*time.Second)
	if n := eval[float64](b, visible+`('button.regenerate')`); n != 1 {
		t.Errorf("after a reload %v answers offer Regenerate", n)
	}

	// The model off: the question stays, unanswered, with Answer.
	if st, out := apiCall(t, "POST", srv.URL+"/api/model/stop", "", ""); st != 200 {
		t.Fatalf("stop: %d %s", st, out)
	}
	b.waitJS(`document.getElementById('status-text').textContent.includes('switched off')`, 10*time.Second)
	b.run(chromedp.SendKeys("#composer-input", "third question", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden && !document.querySelector('[data-testid=send]').hidden`, 20*time.Second)
	banner := eval[string](b, `document.getElementById('error-banner').textContent`)
	if !strings.HasPrefix(banner, "The model is switched off.") || !strings.Contains(banner, "press Answer") {
		t.Errorf("banner %q", banner)
	}
	if n := eval[float64](b, visible+`('button.regenerate')`); n != 0 {
		t.Errorf("%v answers offer Regenerate while the last question has none", n)
	}
	if n := eval[float64](b, visible+`('[data-role=user]:last-of-type button.answer, article.message:last-of-type button.answer')`); n != 1 {
		t.Fatalf("the unanswered question offers no Answer: %s", eval[string](b, `document.getElementById('messages').innerText`))
	}
	b.shot("answer-unanswered")
	// The banner can be dismissed; Answer while still off says it again.
	b.run(chromedp.Click("#error-close", chromedp.ByQuery))
	b.waitJS(`document.getElementById('error-banner').hidden && document.activeElement === document.getElementById('composer-input')`, 5*time.Second)
	b.run(chromedp.Click("button.answer", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden && !document.querySelector('[data-testid=send]').hidden && document.querySelectorAll('button.answer').length === 1`, 20*time.Second)
	if got := eval[string](b, `document.getElementById('error-banner').textContent.trim()`); !strings.HasPrefix(got, "The model is switched off.") || strings.Contains(got, "✕") {
		t.Errorf("banner %q", got)
	}
	// Switched on (here from elsewhere: the tray), the banner goes.
	apiCall(t, "POST", srv.URL+"/api/model/start", "", `{"model": "scripted"}`)
	b.waitJS(`document.getElementById('model-status').dataset.state !== 'off' && !document.getElementById('status-text').textContent.includes('switched off') && document.getElementById('error-banner').hidden`, 10*time.Second)
	up.script(time.Millisecond, "Answer ", "three.")
	b.run(chromedp.Click("button.answer", chromedp.ByQuery))
	b.waitJS(`(() => { const m = document.querySelectorAll('[data-testid=message]'); const a = m[m.length-1]; return m.length === 6 && a.dataset.role === 'assistant' && a.querySelector('.body').textContent === 'Answer three.' && !a.classList.contains('streaming') })()`, 20*time.Second)
	if n := eval[float64](b, visible+`('button.answer')`); n != 0 {
		t.Errorf("%v Answer buttons left", n)
	}
	if n := eval[float64](b, visible+`('button.regenerate')`); n != 1 {
		t.Errorf("%v answers offer Regenerate", n)
	}
	if banner := eval[string](b, `document.getElementById('error-banner').hidden ? '' : document.getElementById('error-banner').textContent`); banner != "" {
		t.Errorf("the banner stays: %q", banner)
	}
}

// TestFallbackReasonUnderTheAnswer: on a machine without a ready NPU the
// automatic engine answers on the CPU, and the answer says why, on a
// line of its own, before and after a reload.
func TestFallbackReasonUnderTheAnswer(t *testing.T) {
	hub := installtest.Start(t)
	base := t.TempDir()
	env := installtest.Env(hub, base)
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"chat": {"max_tokens": 8}}`), 0o644)
	install := exec.Command(npuchat, "install", "minicpm5:2b")
	for k, v := range env {
		install.Env = append(install.Env, k+"="+v)
	}
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npuchat install: %v\n%s", err, out)
	}
	srv := serve(t, env, "--engine", "auto")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "hello", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	const done = `(() => { const a = document.querySelector('[data-role=assistant]'); return a && !a.classList.contains('streaming') && a.querySelector('.stats').textContent !== '' })()`
	b.waitJS(done, 150*time.Second)
	check := func(when string) {
		got := eval[map[string]string](b, `(() => { const a = document.querySelector('[data-role=assistant]'); const f = a.querySelector('[data-testid=fallback]');
			return {stats: a.querySelector('.stats').textContent, fallback: f ? f.textContent : ''} })()`)
		if !strings.Contains(got["stats"], "CPU (in-process engine)") || strings.Contains(got["stats"], "fell back") ||
			!strings.HasPrefix(got["fallback"], "Answered on the CPU (in-process engine) instead of the NPU: The NPU is not ready (") ||
			!strings.HasSuffix(got["fallback"], ").") || strings.ContainsAny(got["fallback"], "`") || strings.Contains(got["fallback"], "npuchat ") || strings.Contains(got["fallback"], "backend") {
			t.Errorf("%s: %q", when, got)
		}
	}
	check("as it ends")
	live := eval[string](b, `document.querySelector('[data-testid=fallback]').textContent`)
	if s := eval[string](b, `document.getElementById('status-engine').textContent`); !strings.Contains(s, "NPU is not ready (") {
		t.Errorf("status line %q", s)
	}
	b.shot("fallback")
	b.open(srv.URL + eval[string](b, `location.pathname`))
	b.waitJS(done, 10*time.Second)
	check("after a reload")
	if reloaded := eval[string](b, `document.querySelector('[data-testid=fallback]').textContent`); reloaded != live {
		t.Errorf("the server renders %q, the page %q", reloaded, live)
	}
}

// TestSearchResultsAndHeadingsRead: a search result keeps its buttons on
// the title's line and does not repeat a title as its snippet; Markdown
// headings are larger than the text; a streaming answer has no stats
// line until the engine is known.
func TestSearchResultsAndHeadingsRead(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	for _, title := range []string{"Holiday plans", "Tax return"} {
		body, _ := json.Marshal(map[string]string{"title": title})
		apiCall(t, "POST", srv.URL+"/api/conversations", "", string(body))
	}
	b := newBrowser(t)
	b.open(srv.URL + "/")
	up.script(60*time.Millisecond, "# Big\n\n", "## Less\n\n", "### Small\n\n", "Body text about holiday ", "plans ", "and ", "more.")
	b.run(chromedp.SendKeys("#composer-input", "headings", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return a && a.classList.contains('streaming') && !!a.querySelector('h3') })()`, 20*time.Second)
	if s := eval[string](b, `document.querySelector('[data-role=assistant] .stats').textContent`); s != "" {
		t.Errorf("a streaming answer's stats: %q", s)
	}
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return a && !a.classList.contains('streaming') })()`, 20*time.Second)
	sizes := eval[[]float64](b, `['h3', 'h4', 'h5', 'p'].map((t) => parseFloat(getComputedStyle(document.querySelector('[data-role=assistant] .body ' + t)).fontSize))`)
	if !(sizes[0] > sizes[1] && sizes[1] > sizes[2] && sizes[2] > sizes[3]) {
		t.Errorf("heading sizes h3 h4 h5 p: %v", sizes)
	}

	// Copy twice in a row: the button says Copy again afterwards.
	b.run(chromedp.Click("[data-role=assistant] button.copy", chromedp.ByQuery), chromedp.Click("[data-role=assistant] button.copy", chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-role=assistant] button.copy').textContent !== 'Copy'`, 5*time.Second)
	b.waitJS(`document.querySelector('[data-role=assistant] button.copy').textContent === 'Copy'`, 5*time.Second)

	b.run(chromedp.SendKeys("[data-testid=search]", "holiday", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('#conversations li.conversation').length === 2`, 10*time.Second)
	got := eval[[]map[string]any](b, `[...document.querySelectorAll('#conversations li.conversation')].map((li) => {
		const top = (sel) => li.querySelector(sel).getBoundingClientRect().top;
		const s = li.querySelector('.snippet');
		return {title: li.querySelector('.conv-link').textContent, snippet: s ? s.textContent : '', rowGap: Math.abs(top('.conv-actions') - top('.conv-link')), height: li.getBoundingClientRect().height};
	})`)
	for _, li := range got {
		if li["rowGap"].(float64) > 12 {
			t.Errorf("the buttons of %q are not on its title's line: %v", li["title"], li)
		}
		if li["title"] == "Holiday plans" && li["snippet"] != "" {
			t.Errorf("the title is repeated as its snippet: %v", li)
		}
		if li["title"] == "headings" && !strings.Contains(li["snippet"].(string), "holiday") {
			t.Errorf("no snippet of the matching answer: %v", li)
		}
	}
	b.shot("search-results")
}

// TestAPIKeyAskedInThePage: a server with an API key and a browser
// without it: the page asks once, in a dialog of its own (never the
// browser's prompt), and everything loads with the key; a wrong key is
// asked again, and Cancel says what to do.
func TestAPIKeyAskedInThePage(t *testing.T) {
	const key = "ux-test-key-31c7"
	up := newUpstream(t)
	srv := serve(t, home(t, t.TempDir(), map[string]string{"NPUCHAT_API_KEY": key}),
		"--engine", "remote", "--remote-url", up.URL+"/v1", "--model", "scripted")
	body, _ := json.Marshal(map[string]string{"title": "Kept chat"})
	apiCall(t, "POST", srv.URL+"/api/conversations", key, string(body))
	b := newBrowser(t)
	b.allow(srv.URL)
	// prompt() and confirm() would block the page; record any use.
	b.run(chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`window.prompt = () => { window.prompted = (window.prompted || 0) + 1; return null; }; window.confirm = window.prompt;`).Do(ctx)
		return err
	}))
	b.run(chromedp.Navigate(srv.URL + "/"))
	dialogOpen := `(() => { const d = document.querySelector('dialog[data-testid=dialog]'); return !!d && d.open })()`
	// Every request the page has in flight waits for this one dialog.
	b.waitJS(dialogOpen+` && (() => { const d = document.getElementById('app').dataset; return Number(d.requests) > 0 && d.requests === d.keyWaits })()`, 20*time.Second)
	if n := eval[float64](b, `document.querySelectorAll('dialog[data-testid=dialog]').length`); n != 1 {
		t.Errorf("%v dialogs for one key", n)
	}
	got := eval[map[string]string](b, `({text: document.querySelector('dialog').textContent, type: document.querySelector('[data-testid=dialog-input]').type,
		focus: document.activeElement.getAttribute('data-testid') || ''})`)
	if !strings.Contains(got["text"], "needs an API key") || got["type"] != "password" || got["focus"] != "dialog-input" {
		t.Errorf("key dialog: %q", got)
	}
	b.shot("dialog-api-key")
	// A wrong key is refused, and asked again.
	b.run(chromedp.KeyEvent("wrong-key"), chromedp.KeyEvent(kb.Enter))
	b.waitJS(dialogOpen+` && document.querySelector('dialog').textContent.includes('refused')`, 10*time.Second)
	b.run(chromedp.KeyEvent(key), chromedp.KeyEvent(kb.Enter))
	b.waitJS(`document.querySelector('dialog[data-testid=dialog]') === null && document.querySelectorAll('#conversations li.conversation').length === 1 && document.getElementById('status-text').textContent.includes('scripted')`, 20*time.Second)
	if k := eval[string](b, `localStorage.getItem('npuchat-key')`); k != key {
		t.Errorf("kept key %q", k)
	}
	// The events reconnect with the key: the switch's change shows.
	apiCall(t, "POST", srv.URL+"/api/model/stop", key, "")
	b.waitJS(`document.getElementById('status-text').textContent.includes('switched off')`, 10*time.Second)
	if n := eval[float64](b, `window.prompted || 0`); n != 0 {
		t.Errorf("the browser's prompt was used %v times", n)
	}

	// Cancel: no more asking, and the banner says what to do.
	b.run(chromedp.Evaluate(`localStorage.removeItem('npuchat-key')`, nil), chromedp.Reload())
	b.waitJS(dialogOpen, 20*time.Second)
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`document.querySelector('dialog[data-testid=dialog]') === null && document.getElementById('error-banner').textContent.includes('Reload the page to enter it')`, 10*time.Second)
	// A request refused after the Cancel (the list, searched again) does
	// not ask again.
	refusals := eval[float64](b, `Number(document.getElementById('app').dataset.keyRefusals)`)
	b.run(chromedp.Evaluate(`document.getElementById('search').dispatchEvent(new Event('input'))`, nil))
	b.waitJS(fmt.Sprintf(`Number(document.getElementById('app').dataset.keyRefusals) > %v`, refusals), 10*time.Second)
	b.waitJS(`document.getElementById('app').dataset.requests === '0' || `+dialogOpen, 30*time.Second)
	if eval[bool](b, dialogOpen) {
		t.Error("the page asks again after Cancel")
	}
}

// TestTitleFocusSettingsAndSmallScreenList: the window's title follows
// the chat (named as soon as its first message is taken), opening a
// chat puts the focus in the message box, the settings of a server on
// the remote engine show and keep it, and at 360 px the chat list
// closes with Escape or a click beside it.
func TestTitleFocusSettingsAndSmallScreenList(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	if got := eval[string](b, `document.title`); got != "NPU Chat" {
		t.Errorf("a new chat's title %q", got)
	}
	// The empty chat says what to do, and where answers come from.
	if got := eval[string](b, `document.getElementById('empty').hidden ? '' : document.getElementById('empty').innerText`); !strings.Contains(got, "What can I help you with?") || !strings.Contains(got, "remote server") {
		t.Errorf("empty chat: %q", got)
	}
	words := make([]string, 100)
	for i := range words {
		words[i] = "word "
	}
	up.script(30*time.Millisecond, words...)
	b.run(chromedp.SendKeys("#composer-input", "Plan a trip to Lisbon", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`document.querySelector('[data-role=assistant].streaming') !== null && document.title === 'Plan a trip to Lisbon – NPU Chat' && document.getElementById('chat-title').textContent === 'Plan a trip to Lisbon'`, 10*time.Second)
	// A streaming answer has no Copy or Regenerate yet.
	if got := eval[string](b, `getComputedStyle(document.querySelector('[data-role=assistant].streaming .actions')).visibility`); got != "hidden" {
		t.Errorf("a streaming answer's buttons are %s", got)
	}
	b.waitJS(`document.querySelector('[data-role=assistant].streaming') === null && !document.querySelector('[data-testid=send]').hidden`, 20*time.Second)
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	if got := eval[string](b, `document.title`); got != "Plan a trip to Lisbon – NPU Chat" {
		t.Errorf("the server's title %q", got)
	}
	b.run(chromedp.Click("[data-testid=new-chat]", chromedp.ByQuery))
	b.waitJS(`document.title === 'NPU Chat' && location.pathname === '/'`, 5*time.Second)
	b.run(chromedp.Click("#conversations .conv-link", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2 && document.activeElement === document.getElementById('composer-input')`, 10*time.Second)

	// Settings: the remote engine is shown, and saving keeps it.
	b.run(chromedp.Click("#open-settings", chromedp.ByQuery))
	b.waitJS(`document.querySelector('input[name=engine][value=remote]').checked && !document.getElementById('engine-remote').hidden`, 10*time.Second)
	b.run(chromedp.Click("#settings-form button[type=submit]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('settings-note').textContent.startsWith('Saved')`, 10*time.Second)
	if _, out := apiCall(t, "GET", srv.URL+"/api/settings", "", ""); !strings.Contains(out, `"engine":"remote"`) {
		t.Errorf("after saving: %s", out)
	}
	b.run(chromedp.Click("#view-settings .close-view", chromedp.ByQuery))

	// 360 px: the list closes with Escape and with a click beside it.
	b.run(chromedp.EmulateViewport(360, 740))
	b.open(srv.URL + path)
	open := `document.body.classList.contains('sidebar-open')`
	// The chat's title has a line of its own rather than three letters.
	if w := eval[float64](b, `document.getElementById('chat-title').getBoundingClientRect().width`); w < 300 {
		t.Errorf("at 360 px the chat's title is %v px wide", w)
	}
	b.shot("chat-head-360")
	// Editing a question: the text box has the width, the message's own
	// buttons wait, and Escape gives the focus back to Edit.
	b.run(chromedp.Click("[data-role=user] button.edit", chromedp.ByQuery))
	b.waitJS(`document.activeElement === document.querySelector('.edit-form textarea')`, 5*time.Second)
	edit := eval[map[string]any](b, `({width: document.querySelector('.edit-form textarea').getBoundingClientRect().width,
		actions: getComputedStyle(document.querySelector('[data-role=user] .actions')).display})`)
	if edit["width"].(float64) < 300 || edit["actions"] != "none" {
		t.Errorf("editing at 360 px: %v", edit)
	}
	b.shot("edit-360")
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`document.querySelector('.edit-form') === null && document.activeElement === document.querySelector('[data-role=user] button.edit')`, 5*time.Second)
	b.run(chromedp.Click("#menu", chromedp.ByQuery))
	b.waitJS(open, 5*time.Second)
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`!`+open+` && document.activeElement === document.getElementById('menu')`, 5*time.Second)
	b.run(chromedp.Click("#menu", chromedp.ByQuery))
	b.waitJS(open, 5*time.Second)
	b.waitStill("#sidebar")
	b.shot("list-360-open")
	b.run(chromedp.MouseClickXY(340, 120)) // on the dimmed chat, where Export .md is
	b.waitJS(`!`+open, 5*time.Second)
	if p := eval[string](b, `location.pathname`); p != path {
		t.Errorf("the click that closed the list also went through: at %s", p)
	}
}
