package page

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	apiCall(t, "POST", srv.URL+"/api/model/start", "", `{"model": "scripted"}`)
	b.waitJS(`document.getElementById('model-status').dataset.state !== 'off' && !document.getElementById('status-text').textContent.includes('switched off')`, 10*time.Second)
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
