package page

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBannerStaysWithItsChat: an error raised in one chat (a message
// too large to send) is not shown in another chat, a new chat or
// another view (Settings, Log); coming back to that chat shows it
// again, until it is closed.
func TestBannerStaysWithItsChat(t *testing.T) {
	up := newUpstream(t)
	up.script(time.Millisecond, "Fine, ", "thanks.")
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	// Two chats: B, then A.
	for _, q := range []string{"chat B", "chat A"} {
		b.run(chromedp.Click("#new-chat", chromedp.ByQuery))
		b.waitJS(`location.pathname === '/'`, 10*time.Second)
		b.run(chromedp.SendKeys("#composer-input", q+kb.Enter, chromedp.ByQuery))
		b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return location.pathname.startsWith('/c/') && a && !a.classList.contains('streaming') && document.querySelectorAll('#conversations li.conversation').length === `+map[string]string{"chat B": "1", "chat A": "2"}[q]+` })()`, 30*time.Second)
	}
	chatA := eval[string](b, `location.pathname`)
	// In A: a message over the server's 8 MiB is refused.
	b.run(chromedp.Evaluate(`document.getElementById('composer-input').value = 'x'.repeat(9 << 20)`, nil),
		chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden && !document.querySelector('[data-testid=send]').hidden`, 30*time.Second)
	raised := eval[string](b, `document.getElementById('error-text').textContent`)
	if !strings.Contains(raised, "too large") {
		t.Fatalf("the banner in A reads %q", raised)
	}
	b.run(chromedp.Evaluate(`document.getElementById('composer-input').value = ''`, nil))
	banner := `document.getElementById('error-banner').hidden ? '' : document.getElementById('error-text').textContent`
	for _, step := range []struct {
		name, click, wait string
		shown             bool
	}{
		{"chat B", `#conversations li.conversation[aria-current=false] .conv-link`, `document.getElementById('chat-title').textContent === 'chat B' && document.querySelectorAll('[data-testid=message]').length === 2`, false},
		{"back to A", `#conversations li.conversation[aria-current=false] .conv-link`, `location.pathname === '` + chatA + `' && document.querySelectorAll('[data-testid=message]').length === 2`, true},
		{"a new chat", `#new-chat`, `location.pathname === '/' && !document.getElementById('empty').hidden`, false},
		{"back to A again", `#conversations li.conversation .conv-link[href='` + chatA + `']`, `location.pathname === '` + chatA + `' && document.querySelectorAll('[data-testid=message]').length === 2`, true},
		{"Settings", `#open-settings`, `!document.getElementById('view-settings').hidden`, false},
		{"Log", `#open-logs`, `!document.getElementById('view-logs').hidden`, false},
		{"closing the Log, back in A", `#view-logs .close-view`, `!document.getElementById('view-chat').hidden`, true},
	} {
		b.run(chromedp.Click(step.click, chromedp.ByQuery))
		b.waitJS(step.wait, 15*time.Second)
		b.waitIdle()
		got := eval[string](b, banner)
		if step.shown && got != raised || !step.shown && got != "" {
			t.Errorf("%s: the banner reads %q (shown: want %v)", step.name, got, step.shown)
		}
	}
	b.shot("banner-with-its-chat")
	// Closed, it is gone for good.
	b.run(chromedp.Click("#error-close", chromedp.ByQuery))
	b.run(chromedp.Click(`#conversations li.conversation[aria-current=false] .conv-link`, chromedp.ByQuery))
	b.waitJS(`location.pathname !== '`+chatA+`' && document.querySelectorAll('[data-testid=message]').length === 2`, 15*time.Second)
	b.run(chromedp.Click(`#conversations li.conversation .conv-link[href='`+chatA+`']`, chromedp.ByQuery))
	b.waitJS(`location.pathname === '`+chatA+`' && document.querySelectorAll('[data-testid=message]').length === 2`, 15*time.Second)
	b.waitIdle()
	if got := eval[string](b, banner); got != "" {
		t.Errorf("a closed banner came back: %q", got)
	}
}
