package page

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestEscapeInADialogDoesNotStopTheAnswer: Escape while a dialog is open
// answers the dialog (Cancel) and nothing else; the answer streaming
// behind it goes on (Escape stops an answer only when nothing else is
// open).
func TestEscapeInADialogDoesNotStopTheAnswer(t *testing.T) {
	up := newUpstream(t)
	up.feed(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "count", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	up.say(t, "w0 ")
	shows := func(word string) string {
		return `(() => { const a = document.querySelector('[data-role=assistant] .body'); return !!a && a.textContent.includes('` + word + `') })()`
	}
	b.waitJS(shows("w0")+` && !!document.querySelector('#conversations li.conversation')`, 20*time.Second)
	b.run(chromedp.Click("#conversations li.conversation button.rename", chromedp.ByQuery))
	b.waitJS(`(() => { const d = document.querySelector('dialog[data-testid=dialog]'); return !!d && d.open })()`, 5*time.Second)
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`document.querySelector('dialog[data-testid=dialog]') === null`, 5*time.Second)
	// The answer still streams: a word sent after the Escape shows (a
	// stopped answer's request is gone, and nothing would show it).
	up.say(t, "after-dialog ")
	b.waitJS(shows("after-dialog"), 10*time.Second)
	got := eval[map[string]any](b, `({streaming: document.querySelector('[data-role=assistant].streaming') !== null,
		cut: document.querySelector('[data-role=assistant]').dataset.cut})`)
	if got["streaming"] != true || got["cut"] == "true" {
		t.Errorf("Escape in the dialog stopped the answer: %v", got)
	}
	if _, cancelled := up.counts(); cancelled != 0 {
		t.Errorf("the upstream request was cancelled by an Escape meant for the dialog")
	}
	// At 360 px, Escape closes the open chat list, and only that.
	b.run(chromedp.EmulateViewport(360, 740))
	b.run(chromedp.Evaluate(`document.getElementById('menu').click()`, nil))
	b.waitJS(`document.body.classList.contains('sidebar-open')`, 5*time.Second)
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`!document.body.classList.contains('sidebar-open')`, 5*time.Second)
	up.say(t, "after-list ")
	b.waitJS(shows("after-list"), 10*time.Second)
	if !eval[bool](b, `document.querySelector('[data-role=assistant].streaming') !== null`) {
		t.Error("Escape that closed the chat list also stopped the answer")
	}
	// With nothing open above the chat, Escape stops the answer.
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(`document.querySelector('[data-role=assistant]').dataset.cut === 'true'`, 5*time.Second)
	eventually(t, "the upstream request to be cancelled by the stop", func() bool { _, c := up.counts(); return c == 1 })
}

// TestOneSendAtATimeInANewChat: the chat for a first message is made
// before the message is sent; a second click of Send meanwhile (a
// double click, Enter held down) must not make a second chat with the
// same message, and opening another chat meanwhile must not be undone
// by the new chat (its messages streaming into the other one's view).
func TestOneSendAtATimeInANewChat(t *testing.T) {
	up := newUpstream(t)
	up.script(time.Millisecond, "Hello ", "there.")
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	chats := func() []map[string]any {
		_, out := apiCall(t, "GET", srv.URL+"/api/conversations", "", "")
		var r struct {
			Conversations []map[string]any `json:"conversations"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("list: %v: %s", err, out)
		}
		return r.Conversations
	}

	// A double click on Send.
	b.run(chromedp.SendKeys("#composer-input", "hi twice", chromedp.ByQuery))
	b.run(chromedp.Evaluate(`(() => { const s = document.querySelector('[data-testid=send]'); s.click(); s.click(); })()`, nil))
	b.waitJS(`document.querySelectorAll('[data-role=assistant]').length >= 1 && !document.querySelector('[data-testid=send]').hidden`, 20*time.Second)
	b.waitIdle() // a second chat, had the second click made one, is listed by now
	if n := len(chats()); n != 1 {
		t.Errorf("a double click on Send made %d chats", n)
	}
	if n := eval[float64](b, `document.querySelectorAll('#conversations li.conversation').length`); n != 1 {
		t.Errorf("the list shows %v chats", n)
	}

	// Send in a new chat, and at once open the other chat.
	first := eval[string](b, `location.pathname`)
	b.run(chromedp.Click("[data-testid=new-chat]", chromedp.ByQuery))
	b.waitJS(`location.pathname === '/'`, 5*time.Second)
	b.run(chromedp.SendKeys("#composer-input", "never mind", chromedp.ByQuery))
	b.run(chromedp.Evaluate(`(() => { document.querySelector('[data-testid=send]').click(); document.querySelector('#conversations .conv-link').click(); })()`, nil))
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2 && !document.querySelector('[data-testid=send]').hidden`, 10*time.Second)
	b.waitIdle() // the new chat made for the send is deleted again by now
	got := eval[map[string]any](b, `({path: location.pathname, title: document.getElementById('chat-title').textContent,
		messages: [...document.querySelectorAll('[data-testid=message] .body')].map((m) => m.textContent),
		box: document.getElementById('composer-input').value})`)
	if got["path"] != first || got["title"] != "hi twice" || fmt.Sprint(got["messages"]) != "[hi twice Hello there.]" {
		t.Errorf("after opening the other chat during a send: %v (want %s)", got, first)
	}
	if got["box"] != "never mind" {
		t.Errorf("the message not sent is not kept in the box: %v", got["box"])
	}
	if n := len(chats()); n != 1 {
		t.Errorf("%d chats on the server: the new chat left behind, empty or with the message", n)
	}
	b.shot("review-switch-during-send")
}

// TestRefusedEditKeepsTheChatAndTheEdit: an edit the server refuses (too
// long for a message) changes nothing there; the page shows the chat as
// it still is, not without the messages the edit was to replace, and
// the edited text is still in its box.
func TestRefusedEditKeepsTheChatAndTheEdit(t *testing.T) {
	up := newUpstream(t)
	up.script(time.Millisecond, "An ", "answer.")
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "a question", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('[data-role=assistant]').length === 1 && !document.querySelector('[data-testid=send]').hidden`, 20*time.Second)
	b.run(chromedp.Click("[data-role=user] button.edit", chromedp.ByQuery))
	b.waitJS(`document.activeElement === document.querySelector('.edit-form textarea')`, 5*time.Second)
	// Over the 1 MiB a message may have, under the 8 MiB of a request.
	const n = 1<<20 + 7
	b.run(chromedp.Evaluate(`document.querySelector('.edit-form textarea').value = 'y'.repeat(`+fmt.Sprint(n)+`)`, nil),
		chromedp.Click(".edit-form button[type=submit]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden && !document.querySelector('[data-testid=send]').hidden`, 20*time.Second)
	b.waitIdle() // the chat is shown again as the server has it
	got := eval[map[string]any](b, `({messages: [...document.querySelectorAll('[data-testid=message]')].map((m) => m.dataset.role + ':' + (m.querySelector('.body') ? m.querySelector('.body').textContent : '(editing)')),
		edit: document.querySelector('.edit-form textarea') ? document.querySelector('.edit-form textarea').value.length : -1,
		focus: document.activeElement === document.querySelector('.edit-form textarea'),
		banner: document.getElementById('error-text').textContent})`)
	if fmt.Sprint(got["messages"]) != "[user:(editing) assistant:An answer.]" {
		t.Errorf("after the refused edit the chat shows %v; the server still has the question and its answer", got["messages"])
	}
	if got["edit"] != float64(n) || got["focus"] != true {
		t.Errorf("the refused edit's text is not in its box, with the focus: %v", got)
	}
	b.shot("review-edit-refused")
	if _, out := apiCall(t, "GET", srv.URL+"/api/conversations/"+eval[string](b, `location.pathname.slice(3)`), "", ""); !testContainsAll(out, `"a question"`, `"An answer."`) {
		t.Errorf("the server lost messages: %.300s", out)
	}
}

func testContainsAll(s string, want ...string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
