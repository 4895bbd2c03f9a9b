package page

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// answered waits until the chat shows n messages and no answer streams.
func (b *browser) answered(n int) {
	b.t.Helper()
	b.waitJS(`(() => { const m = document.querySelectorAll('[data-testid=message]'); return m.length === `+itoa(n)+` && !document.querySelector('.message.streaming') && !document.querySelector('[data-testid=send]').hidden })()`, 20*time.Second)
}

func itoa(n int) string { return strconv.Itoa(n) }

// shown is the chat as "role:text[version]" lines.
const shownJS = `[...document.querySelectorAll('[data-testid=message]')].map((m) => m.dataset.role + ':' + m.querySelector('.body').textContent + (m.querySelector('[data-testid=version-n]') ? '[' + m.querySelector('[data-testid=version-n]').textContent + ']' : '')).join(' | ')`

// TestAnswerVersionsKeptAcrossReload: Regenerate and Edit keep the
// earlier answer and question as versions (‹ 1 / 2 ›), the arrows switch
// between them, and the choice is the server's: a reload shows it.
func TestAnswerVersionsKeptAcrossReload(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	up.script(time.Millisecond, "First ", "answer.")
	b.run(chromedp.SendKeys("#composer-input", "a question"+kb.Enter, chromedp.ByQuery))
	b.answered(2)
	up.script(time.Millisecond, "Second ", "answer.")
	b.run(chromedp.Click("[data-role=assistant] button.regenerate", chromedp.ByQuery))
	b.waitJS(`(() => { const e = document.querySelector('[data-role=assistant] .body'); return e && e.textContent === 'Second answer.' })()`, 20*time.Second)
	b.answered(2)
	if got := eval[string](b, shownJS); got != "user:a question | assistant:Second answer.[2 / 2]" {
		t.Fatalf("after regenerate: %s", got)
	}
	b.shot("versions-2-of-2")
	// ‹ goes back to the first answer; the focus stays on the arrows.
	b.run(chromedp.Click("[data-role=assistant] [data-testid=version-prev]", chromedp.ByQuery))
	b.waitJS(`(() => { const e = document.querySelector('[data-role=assistant] .body'); return e && e.textContent === 'First answer.' })()`, 10*time.Second)
	if got := eval[string](b, shownJS); got != "user:a question | assistant:First answer.[1 / 2]" {
		t.Fatalf("after ‹: %s", got)
	}
	if !eval[bool](b, `document.activeElement && document.activeElement.matches('[data-role=assistant] button.version')`) {
		t.Errorf("the focus left the version arrows: %s", eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	// Kept across a reload (the server renders it).
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	b.answered(2)
	if got := eval[string](b, shownJS); got != "user:a question | assistant:First answer.[1 / 2]" {
		t.Fatalf("after reload: %s", got)
	}
	// Edit the question: the old one stays as version 1, with its answers.
	up.script(time.Millisecond, "Answer ", "to the edit.")
	b.run(chromedp.Click("[data-role=user] button.edit", chromedp.ByQuery))
	b.run(chromedp.SetValue(".edit-form textarea", "an edited question", chromedp.ByQuery), chromedp.Click(".edit-form button[type=submit]", chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant] .body'); return a && a.textContent === 'Answer to the edit.' })()`, 20*time.Second)
	b.answered(2)
	if got := eval[string](b, shownJS); got != "user:an edited question[2 / 2] | assistant:Answer to the edit." {
		t.Fatalf("after edit: %s", got)
	}
	b.run(chromedp.Click("[data-role=user] [data-testid=version-prev]", chromedp.ByQuery))
	b.waitJS(`(() => { const e = document.querySelector('[data-role=user] .body'); return e && e.textContent === 'a question' })()`, 10*time.Second)
	if got := eval[string](b, shownJS); got != "user:a question[1 / 2] | assistant:First answer.[1 / 2]" {
		t.Fatalf("back to the first question: %s", got)
	}
	b.shot("versions-question-1-of-2")
	// The export has every version.
	st, out := apiCall(t, "GET", srv.URL+"/api/conversations/"+strings.TrimPrefix(path, "/c/")+"/export?format=json", "", "")
	for _, want := range []string{"a question", "an edited question", "First answer.", "Second answer.", "Answer to the edit.", `"other_versions"`} {
		if st != 200 || !strings.Contains(out, want) {
			t.Errorf("the export (%d) lacks %q", st, want)
		}
	}
}

// TestThinkingStreamsFoldedApartFromTheAnswer: a reasoning model's
// <think> text (its tags cut across pieces) streams into an open
// "Thinking" section, which folds when the answer starts; the answer
// has no tags, and a reload shows the same, folded.
func TestThinkingStreamsFoldedApartFromTheAnswer(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	pieces := []string{"<thi", "nk>\nThe user ", "says hello. ", "I should greet ", "them back.", "\n</th", "ink>\n\n", "Hello", " there!"}
	up.script(400*time.Millisecond, pieces...)
	b.run(chromedp.SendKeys("#composer-input", "hello"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const d = document.querySelector('.message.streaming details.thinking'); return d && d.open && d.textContent.includes('I should greet') })()`, 20*time.Second)
	mid := eval[map[string]any](b, `(() => { const a = document.querySelector('[data-role=assistant]'); return {summary: a.querySelector('summary').textContent, body: a.querySelector('.body').textContent} })()`)
	if mid["summary"] != "Thinking…" || mid["body"] != "" {
		t.Errorf("while thinking: %v", mid)
	}
	b.shot("thinking-streaming")
	b.answered(2)
	got := eval[map[string]any](b, `(() => { const a = document.querySelector('[data-role=assistant]'); const d = a.querySelector('details.thinking'); return {open: d.open, summary: d.querySelector('summary').textContent, think: d.querySelector('.thinking-body').textContent, body: a.querySelector('.body').textContent} })()`)
	if got["open"] != false || got["summary"] != "Thinking" || got["body"] != "Hello there!" || !strings.Contains(got["think"].(string), "The user says hello. I should greet them back.") {
		t.Fatalf("after the answer: %v", got)
	}
	b.shot("thinking-folded")
	path := eval[string](b, `location.pathname`)
	b.open(srv.URL + path)
	b.answered(2)
	got = eval[map[string]any](b, `(() => { const a = document.querySelector('[data-role=assistant]'); const d = a.querySelector('details.thinking'); return {open: d.open, think: d.querySelector('.thinking-body').textContent, body: a.querySelector('.body').textContent} })()`)
	if got["open"] != false || got["body"] != "Hello there!" || !strings.Contains(got["think"].(string), "I should greet them back.") {
		t.Fatalf("after reload: %v", got)
	}
	b.run(chromedp.Click("[data-role=assistant] details.thinking summary", chromedp.ByQuery))
	b.waitJS(`document.querySelector('details.thinking').open`, 5*time.Second)
	b.shot("thinking-opened")
	// Copy copies the answer, not the thoughts.
	if raw := eval[string](b, `document.querySelector('[data-role=assistant] .body').dataset.raw`); raw != "Hello there!" {
		t.Errorf("the answer's text is %q", raw)
	}
}
