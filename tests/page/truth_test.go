package page

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/service/install/installtest"
)

// statusJS is the page's one status: dot state, status text, switch
// (disabled or not), banner (or "").
const statusJS = `(() => { const t = document.querySelector('[data-testid=model-toggle]'); const b = document.getElementById('error-banner');
	return {state: document.getElementById('model-status').dataset.state, text: document.getElementById('status-text').textContent,
		disabled: t.disabled, banner: b.hidden ? '' : b.textContent} })()`

// TestStatusWithTheServerKilledAndBack: with the server gone, the dot,
// the status line, the switch and the banner all say it cannot be
// reached (not "Failed to fetch" beside a green dot); when it is back
// on the same port, the banner goes by itself and the switch works.
func TestStatusWithTheServerKilledAndBack(t *testing.T) {
	up := newUpstream(t)
	base := t.TempDir()
	srv := remoteServer(t, up, base)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 30*time.Second)
	srv.kill()
	b.waitJS(`document.getElementById('model-status').dataset.state === 'unreachable' && !document.getElementById('error-banner').hidden`, 30*time.Second)
	got := eval[map[string]any](b, statusJS)
	if got["text"] != "NPU Chat cannot be reached." || got["disabled"] != true || !strings.HasPrefix(got["banner"].(string), "NPU Chat cannot be reached: it may have stopped.") {
		t.Errorf("with the server killed: %v", got)
	}
	if strings.Contains(got["banner"].(string), "Failed to fetch") && !eval[bool](b, `!!document.querySelector('#error-banner details')`) {
		t.Errorf("the browser's words are not folded under Details: %v", got)
	}
	b.shot("status-unreachable")
	// Back, on the same address, with the same history.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	back := serve(t, home(t, base, nil), "--addr", "127.0.0.1:"+port, "--engine", "remote", "--remote-url", up.URL+"/v1", "--model", "scripted")
	if back.URL != srv.URL {
		t.Fatalf("the server came back on %s, not %s", back.URL, srv.URL)
	}
	b.waitJS(`document.getElementById('model-status').dataset.state !== 'unreachable' && document.getElementById('error-banner').hidden`, 30*time.Second)
	got = eval[map[string]any](b, statusJS)
	if got["disabled"] != false || got["banner"] != "" || strings.Contains(got["text"].(string), "reached") {
		t.Errorf("after the server came back: %v", got)
	}
	b.shot("status-recovered")
}

// TestSendingWithoutTheModelKeepsTheMessage: with no model installed, a
// message sent from a chat stays on screen, unanswered, with Answer
// under it; the banner says in words what is wrong and offers the
// install as a button of its own (no command line, no button that is
// not there).
func TestSendingWithoutTheModelKeepsTheMessage(t *testing.T) {
	hub := installtest.Start(t)
	env := installtest.Env(hub, t.TempDir())
	env["NPUCHAT_ENGINE"] = "cpu"
	env["PATH"] = "/usr/bin:/bin"
	srv := serve(t, env)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`!document.getElementById('view-install').hidden`, 20*time.Second)
	// The install view, light and dark, has no serious accessibility fault.
	src := axeJS(t)
	for _, scheme := range []string{"dark", "light"} {
		b.scheme(scheme)
		b.axe(src, scheme+" install")
		b.shot("axe-install-" + scheme)
	}
	b.run(chromedp.Click("#new-chat", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('view-chat').hidden`, 5*time.Second)
	b.run(chromedp.SendKeys("#composer-input", "are you there?"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden && !document.querySelector('[data-testid=send]').hidden`, 30*time.Second)
	got := eval[map[string]any](b, `({chat: !document.getElementById('view-chat').hidden, install: !document.getElementById('view-install').hidden,
		messages: [...document.querySelectorAll('[data-testid=message]')].map((m) => m.dataset.role + ':' + m.querySelector('.body').textContent),
		answer: [...document.querySelectorAll('button.answer')].filter((b) => b.offsetParent !== null).length,
		banner: document.getElementById('error-text').innerText, action: document.querySelector('[data-testid=banner-action]') ? document.querySelector('[data-testid=banner-action]').textContent : ''})`)
	if got["chat"] != true || got["install"] != false {
		t.Errorf("sending moved the page away from the chat: %v", got)
	}
	if msgs, _ := got["messages"].([]any); len(msgs) != 1 || msgs[0] != "user:are you there?" {
		t.Errorf("the message is not shown: %v", got["messages"])
	}
	banner := got["banner"].(string)
	if !strings.Contains(banner, "not installed yet") || strings.Contains(banner, "npuchat ") || got["action"] != "Install minicpm5:2b" {
		t.Errorf("banner %q, action %q", banner, got["action"])
	}
	if strings.Contains(banner, "Press Answer") && got["answer"] != 1.0 {
		t.Errorf("the banner points at an Answer button that is not on screen: %v", got)
	}
	b.shot("send-without-model")
	b.axe(src, "banner without the model")
	b.run(chromedp.Click("[data-testid=banner-action]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('view-install').hidden && document.getElementById('error-banner').hidden`, 5*time.Second)

	// The NPU check without an NPU: one entry for the checks skipped
	// for one reason, in words, and the CPU still answers.
	b.run(chromedp.Click("[data-view=check]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('check-summary').textContent.startsWith('Checking') && document.querySelectorAll('#check-list > li').length > 0`, 60*time.Second)
	check := eval[map[string]any](b, `(() => { const reasons = [...document.querySelectorAll('[data-testid=check-skipped] > p')].map((p) => p.textContent);
		return {summary: document.getElementById('check-summary').textContent, ready: document.getElementById('check-summary').dataset.ready, reasons, unique: new Set(reasons).size,
		badges: [...document.querySelectorAll('#check-list .badge')].map((b) => b.textContent), text: document.getElementById('check-list').innerText} })()`)
	if check["ready"] == "false" && !strings.Contains(check["summary"].(string), "answers on the CPU") {
		t.Errorf("the check does not say the CPU still works: %q", check["summary"])
	}
	if check["unique"] != float64(len(check["reasons"].([]any))) {
		t.Errorf("skipped checks with one reason are shown apart: %v", check["reasons"])
	}
	for _, bd := range check["badges"].([]any) {
		switch bd {
		case "Passed", "Warning", "Failed", "Not checked":
		default:
			t.Errorf("a check's status reads %q", bd)
		}
	}
	if strings.Contains(check["text"].(string), "SKIPPED") || strings.Contains(check["text"].(string), "skipped:") {
		t.Errorf("the check list shows internal words: %s", check["text"])
	}
	b.shot("check-view")
}
