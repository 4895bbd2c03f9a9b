package page

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// apiCall makes one request to the server's API as a program would.
func apiCall(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	} else if c := sessionFor(url); c != "" {
		req.Header.Set("Cookie", c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIKeyReloadDirectLinkAndExport: with an API key, a reload of
// /c/{id} or a link to it opens that conversation (the server renders
// none of the history; the page fetches it with the key), and export
// downloads the file with the key in a header, never in a URL.
func TestAPIKeyReloadDirectLinkAndExport(t *testing.T) {
	const key = "page-test-key-8f3a"
	up := newUpstream(t)
	up.script(time.Millisecond, "The ", "answer ", "is ", "42.")
	srv := serve(t, home(t, t.TempDir(), map[string]string{"NPUCHAT_API_KEY": key}),
		"--engine", "remote", "--remote-url", up.URL+"/v1", "--model", "scripted")
	b := newBrowser(t)
	b.allow(srv.URL)
	// The key, as the page's key prompt stores it.
	b.run(chromedp.Navigate(srv.URL+"/static/icon.svg"), chromedp.Evaluate(`localStorage.setItem("npuchat-key", "`+key+`")`, nil))
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "what is the answer"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelector('[data-role=assistant]'); return a && !a.classList.contains('streaming') && a.querySelector('.body').textContent === 'The answer is 42.' })()`, 30*time.Second)
	path := eval[string](b, `location.pathname`)
	if !strings.HasPrefix(path, "/c/") {
		t.Fatalf("the page is at %q", path)
	}
	// A reload, and the link opened afresh from another page.
	for _, how := range []string{"reload", "link"} {
		if how == "reload" {
			b.run(chromedp.Reload())
		} else {
			b.open(srv.URL + "/")
			b.run(chromedp.Navigate(srv.URL + path))
		}
		b.run(chromedp.WaitReady("#app", chromedp.ByQuery))
		b.waitJS(`(() => { const m = document.querySelectorAll('[data-testid=message]'); return m.length === 2 && m[1].querySelector('.body').textContent === 'The answer is 42.' })()`, 15*time.Second)
		if got := eval[string](b, `document.getElementById('chat-title').textContent.trim() + '|' + !document.getElementById('export-md').hidden`); got != "what is the answer|true" {
			t.Errorf("%s of %s: title and export %q", how, path, got)
		}
	}
	// A link to a conversation that is not there says so, at a new chat.
	b.run(chromedp.Navigate(srv.URL + "/c/999"))
	b.waitJS(`(() => { const m = document.querySelector('[data-testid=missing]'); return m && m.textContent === 'There is no chat number 999' && !document.getElementById('empty').hidden && location.pathname === '/' })()`, 15*time.Second)

	// Export: the file arrives, from a Blob, with the key in a header.
	b.run(chromedp.Navigate(srv.URL + path))
	b.waitJS(`document.querySelectorAll('[data-testid=message]').length === 2`, 15*time.Second)
	dir := t.TempDir()
	done := make(chan string, 4)
	names := make(chan string, 4)
	chromedp.ListenTarget(b.ctx, func(ev any) {
		if e, ok := ev.(*cdpbrowser.EventDownloadWillBegin); ok {
			names <- e.SuggestedFilename
		}
		if e, ok := ev.(*cdpbrowser.EventDownloadProgress); ok && e.State == cdpbrowser.DownloadProgressStateCompleted {
			done <- e.GUID
		}
	})
	b.run(cdpbrowser.SetDownloadBehavior(cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName).WithDownloadPath(dir).WithEventsEnabled(true))
	for _, c := range []struct{ id, want, name string }{
		{"#export-md", "The answer is 42.", "what is the answer.md"},
		{"#export-json", `"content": "The answer is 42."`, "what is the answer.json"},
	} {
		b.run(chromedp.Click(c.id, chromedp.ByQuery))
		var guid string
		select {
		case guid = <-done:
			// The file is named for the chat's title, not its number.
			if name := <-names; name != c.name {
				t.Errorf("%s saved as %q, want %q", c.id, name, c.name)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no download; banner %q", c.id, eval[string](b, `document.getElementById('error-banner').textContent`))
		}
		got, err := os.ReadFile(filepath.Join(dir, guid))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(got), `":"`, `": "`), c.want) || !strings.Contains(string(got), "what is the answer") {
			t.Errorf("%s downloaded %q (%v)", c.id, got, err)
		}
	}
	if banner := eval[string](b, `document.getElementById('error-banner').textContent`); banner != "" {
		t.Errorf("error shown: %q", banner)
	}
	b.mu.Lock()
	for _, u := range b.urls {
		// EventSource cannot send headers: /api/events alone takes ?key=.
		if strings.Contains(u, key) && !strings.Contains(u, "/api/events?") {
			t.Errorf("the API key is in a URL: %s", u)
		}
	}
	b.mu.Unlock()
	b.shot("chat-with-key")
}

// TestRefusedSendKeepsTheMessage: a message the server refuses (too
// large, the queue full) or cannot take (the server is down) stays in
// the message box, and the page says what happened and what to do.
func TestRefusedSendKeepsTheMessage(t *testing.T) {
	up := newUpstream(t)
	words := make([]string, 2000)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	up.script(20*time.Millisecond, words...)
	base := t.TempDir()
	env := home(t, base, nil)
	os.WriteFile(env["NPUCHAT_CONFIG"], []byte(`{"queue_size": 1}`), 0o644)
	srv := serve(t, env, "--engine", "remote", "--remote-url", up.URL+"/v1", "--model", "scripted")
	b := newBrowser(t)
	b.open(srv.URL + "/")
	boxAndBanner := `(() => ({box: document.getElementById('composer-input').value, banner: document.getElementById('error-banner').hidden ? '' : document.getElementById('error-banner').textContent, messages: document.querySelectorAll('[data-testid=message]').length}))()`

	// Too large: over the server's 8 MiB.
	b.run(chromedp.Evaluate(`document.getElementById('composer-input').value = 'x'.repeat(9 << 20)`, nil),
		chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`!document.getElementById('error-banner').hidden && !document.querySelector('[data-testid=send]').hidden`, 30*time.Second)
	got := eval[map[string]any](b, boxAndBanner)
	if n := eval[float64](b, `document.getElementById('composer-input').value.length`); n != 9<<20 {
		t.Errorf("a message too large was taken out of the box: %v characters left", n)
	}
	if banner := got["banner"].(string); !strings.Contains(banner, "too large") || !strings.Contains(banner, "still in the box") {
		t.Errorf("too large: %q", banner)
	}

	// The queue full: one answer runs, one waits, the page's is refused.
	// (One after the other: a request holds a queue place until it runs.)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, want := range []struct{ running, waiting int }{{1, 0}, {1, 1}} {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"scripted","stream":true,"messages":[{"role":"user","content":"long"}]}`))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		eventually(t, fmt.Sprintf("the queue to fill to %+v", want), func() bool {
			_, body := apiCall(t, "GET", srv.URL+"/api/status", "", "")
			var st struct{ Running, Waiting int }
			json.Unmarshal([]byte(body), &st)
			return st.Running == want.running && st.Waiting == want.waiting
		})
	}
	b.run(chromedp.Evaluate(`document.getElementById('composer-input').value = ''`, nil),
		// Send with the button: CDP's Enter also types a line break
		// after the page has taken the key, which no keyboard does.
		chromedp.SendKeys("#composer-input", "are you there?", chromedp.ByQuery), chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('error-banner').textContent.includes('busy') && !document.querySelector('[data-testid=send]').hidden`, 30*time.Second)
	got = eval[map[string]any](b, boxAndBanner)
	if got["box"] != "are you there?" || !strings.Contains(got["banner"].(string), "Try again") || got["messages"] != 0.0 {
		t.Errorf("queue full: %v", got)
	}
	// No empty chat is left behind by the refused messages.
	b.waitJS(`document.querySelectorAll('#conversations li.conversation').length === 0 && location.pathname === '/' && document.getElementById('export-md').hidden`, 10*time.Second)
	if _, out := apiCall(t, "GET", srv.URL+"/api/conversations", "", ""); !strings.Contains(out, `"conversations":[]`) {
		t.Errorf("chats left: %s", out)
	}
	b.shot("send-refused")
	cancel()

	// The server is down.
	srv.kill()
	b.run(chromedp.Click("[data-testid=send]", chromedp.ByQuery))
	b.waitJS(`document.getElementById('error-banner').textContent.includes('cannot be reached')`, 30*time.Second)
	got = eval[map[string]any](b, boxAndBanner)
	if got["box"] != "are you there?" || !strings.Contains(got["banner"].(string), "still in the box") {
		t.Errorf("server down: %v", got)
	}
}

// TestRenameAndDeleteUseInPageDialogs: rename and delete ask in a
// dialog of the page (keyboard: Escape cancels, Enter confirms, the
// focus comes back), and a hostile title stays text.
func TestRenameAndDeleteUseInPageDialogs(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	const hostile = `<img src=x onerror="window.pwned=1">Plans`
	for _, title := range []string{"Other chat", hostile} {
		body, _ := json.Marshal(map[string]string{"title": title})
		if st, out := apiCall(t, "POST", srv.URL+"/api/conversations", "", string(body)); st != 201 {
			t.Fatalf("create: %d %s", st, out)
		}
	}
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.querySelectorAll('#conversations li.conversation').length === 2`, 10*time.Second)
	first := `document.querySelector('#conversations li.conversation')`
	id := eval[string](b, first+`.dataset.id`)
	li := `#conversations li[data-id="` + id + `"]`
	dialogOpen := `(() => { const d = document.querySelector('dialog[data-testid=dialog]'); return !!d && d.open })()`
	noDialog := `document.querySelector('dialog[data-testid=dialog]') === null`
	focused := func(sel string) bool {
		return eval[bool](b, `document.activeElement === document.querySelector('`+sel+`')`)
	}

	// Rename, then Escape: nothing changes, the focus is back.
	b.run(chromedp.Focus(li+" button.rename", chromedp.ByQuery), chromedp.KeyEvent(kb.Enter))
	b.waitJS(dialogOpen, 5*time.Second)
	if v := eval[string](b, `document.querySelector('[data-testid=dialog-input]').value`); v != hostile {
		t.Errorf("the rename field holds %q", v)
	}
	if !focused("[data-testid=dialog-input]") {
		t.Error("the rename field does not have the focus")
	}
	if n := eval[float64](b, `document.querySelectorAll('dialog img, #conversations img').length`); n != 0 || eval[bool](b, `window.pwned !== undefined`) {
		t.Error("the title became markup")
	}
	b.shot("dialog-rename")
	b.run(chromedp.KeyEvent(kb.Escape))
	b.waitJS(noDialog, 5*time.Second)
	if !focused(li + " button.rename") {
		t.Errorf("after Escape the focus is on %s", eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	if got := eval[string](b, `document.querySelector('`+li+` .conv-link').textContent`); got != hostile {
		t.Errorf("Escape renamed the chat to %q", got)
	}

	// An empty name is refused in the dialog; a new one is saved.
	b.run(chromedp.Click(li+" button.rename", chromedp.ByQuery))
	b.waitJS(dialogOpen, 5*time.Second)
	// (The dialog is in the top layer, where chromedp's node actions do
	// not reach: keys go to the focused element, clicks through script.)
	b.run(chromedp.Evaluate(`document.querySelector('[data-testid=dialog-input]').value = '  '`, nil), chromedp.KeyEvent(kb.Enter))
	b.waitJS(`document.querySelector('dialog .error-text') && !document.querySelector('dialog .error-text').hidden`, 5*time.Second)
	if !eval[bool](b, dialogOpen) || !focused("[data-testid=dialog-input]") {
		t.Error("an empty name closed the dialog or lost the focus")
	}
	b.run(chromedp.Evaluate(`document.querySelector('[data-testid=dialog-input]').value = ''`, nil),
		chromedp.KeyEvent("Trip <b>plans</b>"), chromedp.KeyEvent(kb.Enter))
	b.waitJS(noDialog+` && document.querySelector('`+li+` .conv-link').textContent === 'Trip <b>plans</b>'`, 10*time.Second)
	if !focused(li + " button.rename") {
		t.Errorf("after renaming the focus is on %s", eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	if _, body := apiCall(t, "GET", srv.URL+"/api/conversations/"+id, "", ""); !strings.Contains(body, `"title":"Trip \u003cb\u003eplans\u003c/b\u003e"`) && !strings.Contains(body, `"title":"Trip <b>plans</b>"`) {
		t.Errorf("the server has %s", body)
	}

	// Delete, then Cancel: still there. Delete and confirm: gone.
	b.run(chromedp.Click(li+" button.delete", chromedp.ByQuery))
	b.waitJS(dialogOpen, 5*time.Second)
	if txt := eval[string](b, `document.querySelector('dialog').textContent`); !strings.Contains(txt, "“Trip <b>plans</b>”") || !strings.Contains(txt, "cannot be undone") {
		t.Errorf("delete dialog says %q", txt)
	}
	if !focused("[data-testid=dialog-cancel]") {
		t.Error("the delete dialog does not start on Cancel")
	}
	b.shot("dialog-delete")
	b.run(chromedp.KeyEvent(kb.Enter)) // on Cancel
	b.waitJS(noDialog, 5*time.Second)
	if n := eval[float64](b, `document.querySelectorAll('#conversations li.conversation').length`); n != 2 || !focused(li+" button.delete") {
		t.Errorf("after Cancel: %v chats, focus on %s", n, eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	b.run(chromedp.Click(li+" button.delete", chromedp.ByQuery))
	b.waitJS(dialogOpen, 5*time.Second)
	b.run(chromedp.KeyEvent(kb.Tab))
	if !focused("[data-testid=dialog-confirm]") {
		t.Error("Tab does not move from Cancel to Delete")
	}
	b.run(chromedp.KeyEvent(kb.Enter))
	b.waitJS(noDialog+` && document.querySelectorAll('#conversations li.conversation').length === 1`, 10*time.Second)
	if st, _ := apiCall(t, "GET", srv.URL+"/api/conversations/"+id, "", ""); st != 404 {
		t.Errorf("the deleted chat answers %d", st)
	}
	if !focused("#search") {
		t.Errorf("after deleting the focus is on %s", eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
	}
}
