package page

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestPageWithoutTheLinkSaysHowToGetIn: a browser that was not opened
// through the tray's (or serve's) one-time link sees no chat, no
// settings, and a banner that says how to get in, not a bare error; a
// used link says it was used. With the session the link starts, the
// same page shows the history.
func TestPageWithoutTheLinkSaysHowToGetIn(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	body, _ := json.Marshal(map[string]string{"title": "Private plans"})
	if st, out := apiCall(t, "POST", srv.URL+"/api/conversations", "", string(body)); st != 201 {
		t.Fatalf("create: %d %s", st, out)
	}
	b := newBrowser(t)
	b.allow(srv.URL)
	// The link serve printed was used (by the harness): opened again, it
	// starts nothing.
	b.run(chromedp.Navigate(srv.Link), chromedp.WaitReady("#app", chromedp.ByQuery))
	banner := `document.getElementById('history-problem')`
	b.waitJS(banner+`.textContent.includes('tray icon') && !`+banner+`.hidden`, 20*time.Second)
	got := eval[map[string]any](b, `({text: `+banner+`.textContent, list: document.querySelectorAll('#conversations li.conversation').length,
		page: document.body.innerText, path: location.pathname + location.search})`)
	if !strings.Contains(got["text"].(string), "already used") || !strings.Contains(got["text"].(string), "npuchat serve") {
		t.Errorf("the banner says %q", got["text"])
	}
	if got["list"].(float64) != 0 || strings.Contains(got["page"].(string), "Private plans") {
		t.Errorf("the history shows without the session: %v chats", got["list"])
	}
	if got["path"] != "/" {
		t.Errorf("the address keeps %q", got["path"])
	}
	if n := eval[float64](b, `document.querySelectorAll('dialog[open]').length`); n != 0 {
		t.Errorf("%v dialogs: with no API key set there is no key to ask for", n)
	}
	b.shot("session-locked")
	// The session (as the tray's fresh link sets it): the history shows.
	name, value, _ := strings.Cut(srv.Cookie, "=")
	b.run(network.SetCookie(name, value).WithURL(srv.URL + "/").WithHTTPOnly(true).WithSameSite(network.CookieSameSiteStrict))
	b.open(srv.URL + "/")
	b.waitJS(`document.querySelectorAll('#conversations li.conversation').length === 1 && `+banner+`.hidden`, 20*time.Second)
}
