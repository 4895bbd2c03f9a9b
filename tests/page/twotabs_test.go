package page

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestChatStartedInOneTabAppearsInTheOther: a chat started in one tab
// appears, under its title, in another tab's list without a reload, by
// the server's "conversations" event.
func TestChatStartedInOneTabAppearsInTheOther(t *testing.T) {
	up := newUpstream(t)
	up.script(time.Millisecond, "Hello ", "there.")
	srv := remoteServer(t, up, t.TempDir())
	one, other := newBrowser(t), newBrowser(t)
	one.open(srv.URL + "/")
	other.open(srv.URL + "/")
	other.waitIdle()
	if n := eval[int](other, `document.querySelectorAll('#conversations li.conversation').length`); n != 0 {
		t.Fatalf("%d chats listed at the start", n)
	}
	one.run(chromedp.SendKeys("#composer-input", "from the first tab"+kb.Enter, chromedp.ByQuery))
	other.waitJS(`[...document.querySelectorAll('#conversations .conv-link')].map((a) => a.textContent).join('|') === 'from the first tab'`, 30*time.Second)
	if n := eval[string](other, `document.getElementById('app').dataset.conversationEvents || ''`); n == "" {
		t.Errorf("the list changed without a conversations event")
	}
}
