package page

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/npuchat/npuchat/history"
)

// seedHistory writes chats last active at the given ages into the data
// folder of home(t, base, …), before a server opens it.
func seedHistory(t *testing.T, base string, chats map[string]time.Time) {
	t.Helper()
	var at time.Time
	st, err := history.Open(context.Background(), filepath.Join(base, "data", "history.db"), history.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for title, when := range chats {
		at = when
		c, err := st.Create(context.Background(), title, history.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Ask(context.Background(), c.ID, "about "+title); err != nil {
			t.Fatal(err)
		}
	}
}

const listJS = `[...document.querySelectorAll('#conversations > li')].map((li) => li.classList.contains('conv-group') ? '# ' + li.textContent : li.querySelector('.conv-link').textContent)`

// TestHistoryAtScale: the chat list is grouped by date, a title has the
// whole width (its buttons show on hover or focus only), the list is one
// Tab stop that the arrow keys move in, Ctrl+K searches and the matches
// are marked, renaming keeps a chat's place, an unknown chat's address
// says so, and an answer cut by its length limit or by switching the
// model off says which.
func TestHistoryAtScale(t *testing.T) {
	base := t.TempDir()
	long := "A rather long title about tiling matrix kernels for the NPU and the CPU"
	day := 24 * time.Hour
	// Times from today's local midnight, so that the groups do not
	// depend on the time of day the test runs at (a chat of "25 hours
	// ago" is the day before yesterday after 23:00): today's two chats
	// between midnight and now, the newer first in the list.
	now := time.Now()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	sinceMidnight := now.Sub(midnight)
	seedHistory(t, base, map[string]time.Time{
		"morning chat": midnight.Add(sinceMidnight / 3), long: midnight.Add(sinceMidnight * 2 / 3),
		"chat of yesterday": midnight.Add(-12 * time.Hour), "three days ago": midnight.Add(-3*day + 12*time.Hour), "an old chat": midnight.Add(-45 * day),
	})
	up := newUpstream(t)
	srv := remoteServer(t, up, base)
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.querySelectorAll('[data-testid=conv-group]').length > 0`, 10*time.Second)
	old := midnight.Add(-45 * day)
	month := old.Format("January 2006")
	want := fmt.Sprint([]string{"# Today", long, "morning chat", "# Yesterday", "chat of yesterday", "# Last 7 days", "three days ago", "# " + month, "an old chat"})
	if got := fmt.Sprint(eval[[]string](b, listJS)); got != want {
		t.Errorf("the list reads %s, want %s", got, want)
	}
	// The buttons do not take a title's room: hidden until hover or focus.
	widths := eval[map[string]float64](b, `(() => { const li = document.querySelectorAll('#conversations li.conversation')[0]; const a = li.querySelector('.conv-link');
		return {link: a.getBoundingClientRect().width, row: li.getBoundingClientRect().width, opacity: Number(getComputedStyle(li.querySelector('.conv-actions')).opacity)} })()`)
	if widths["link"] < widths["row"]-16 || widths["opacity"] != 0 {
		t.Errorf("a title is %v px of its %v px row, its buttons' opacity %v", widths["link"], widths["row"], widths["opacity"])
	}
	b.shot("list-groups")
	// One Tab stop; Down moves to the next chat, Right to its buttons.
	if n := eval[float64](b, `[...document.querySelectorAll('#conversations a, #conversations button')].filter((e) => e.tabIndex >= 0).length`); n != 1 {
		t.Errorf("the list has %v Tab stops, want 1", n)
	}
	b.run(chromedp.Focus("#conversations a.conv-link[tabindex='0']", chromedp.ByQuery))
	b.run(chromedp.KeyEvent(kb.ArrowDown))
	if got := eval[string](b, `document.activeElement.textContent`); got != "morning chat" {
		t.Errorf("Down went to %q", got)
	}
	b.run(chromedp.KeyEvent(kb.ArrowRight))
	if got := eval[string](b, `document.activeElement.getAttribute('aria-label') + ' ' + getComputedStyle(document.activeElement.closest('.conv-actions')).opacity`); got != "Rename morning chat 1" {
		t.Errorf("Right went to %q", got)
	}
	b.shot("list-focus-actions")
	b.run(chromedp.KeyEvent(kb.ArrowLeft), chromedp.KeyEvent(kb.End))
	if got := eval[string](b, `document.activeElement.textContent`); got != "an old chat" {
		t.Errorf("End went to %q", got)
	}
	// F2 renames; the chat keeps its place.
	b.run(chromedp.KeyEvent(kb.ArrowUp), chromedp.KeyEvent(kb.F2))
	b.waitJS(`!!document.querySelector('dialog[open] [data-testid=dialog-input]')`, 5*time.Second)
	b.run(chromedp.SetValue("[data-testid=dialog-input]", "renamed, three days ago", chromedp.ByQuery), chromedp.Click("[data-testid=dialog-confirm]", chromedp.ByQuery))
	b.waitJS(`[...document.querySelectorAll('.conv-link')].some((a) => a.textContent === 'renamed, three days ago')`, 10*time.Second)
	want = strings.Replace(want, "three days ago", "renamed, three days ago", 1)
	if got := fmt.Sprint(eval[[]string](b, listJS)); got != want {
		t.Errorf("after a rename the list reads %s, want %s", got, want)
	}
	// Ctrl+K searches; the matches are marked.
	b.run(chromedp.Click("#composer-input", chromedp.ByQuery), chromedp.KeyEvent("k", chromedp.KeyModifiers(2)))
	if !eval[bool](b, `document.activeElement === document.getElementById('search')`) {
		t.Fatalf("Ctrl+K did not go to the search: %s", eval[string](b, `document.activeElement.outerHTML.slice(0, 80)`))
	}
	b.run(chromedp.SendKeys("#search", "chat", chromedp.ByQuery))
	b.waitJS(`document.querySelectorAll('#conversations mark').length > 0 && !document.querySelector('[data-testid=conv-group]')`, 10*time.Second)
	if marks := eval[[]string](b, `[...document.querySelectorAll('#conversations mark')].map((m) => m.textContent.toLowerCase())`); len(marks) < 3 || strings.Count(strings.Join(marks, " "), "chat") != len(marks) {
		t.Errorf("marked: %q", marks)
	}
	b.shot("list-search")
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	b.shot("list-search-dark")
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))

	// An unknown chat's address says the chat does not exist.
	b.open(srv.URL + "/c/99999")
	if got := eval[string](b, `(document.querySelector('[data-testid=missing]') || {}).textContent`); got != "There is no chat number 99999" {
		t.Errorf("/c/99999 shows %q", got)
	}
	b.shot("chat-missing")

	// An answer cut by its length limit says so.
	up.mu.Lock()
	up.finish = "length"
	up.mu.Unlock()
	up.script(time.Millisecond, "A ", "long ", "story")
	b.run(chromedp.SendKeys("#composer-input", "tell a story"+kb.Enter, chromedp.ByQuery))
	b.answered(2)
	if got := eval[string](b, `(document.querySelector('[data-role=assistant] [data-testid=length]') || {}).textContent`); !strings.HasPrefix(got, "Stopped at the length limit (3 tokens)") {
		t.Errorf("the length mark reads %q", got)
	}
	b.open(srv.URL + eval[string](b, `location.pathname`))
	if got := eval[string](b, `(document.querySelector('[data-role=assistant] [data-testid=length]') || {}).textContent`); !strings.HasPrefix(got, "Stopped at the length limit (3 tokens)") {
		t.Errorf("after reload the length mark reads %q", got)
	}
	b.shot("answer-length")
	// Switching the model off mid-answer cuts it, and says so.
	up.mu.Lock()
	up.finish = ""
	up.mu.Unlock()
	words := make([]string, 200)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	up.script(40*time.Millisecond, words...)
	b.run(chromedp.SendKeys("#composer-input", "count"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-role=assistant]'); return a.length === 2 && a[1].textContent.includes('w5 ') })()`, 20*time.Second)
	if st, out := apiCall(t, "POST", srv.URL+"/api/model/stop", "", ""); st != 200 {
		t.Fatalf("stop: %d %s", st, out)
	}
	b.waitJS(`(() => { const c = document.querySelectorAll('[data-role=assistant]')[1].querySelector('[data-testid=cut]'); return c && !document.querySelector('.message.streaming') })()`, 20*time.Second)
	b.open(srv.URL + eval[string](b, `location.pathname`))
	if got := eval[string](b, `document.querySelectorAll('[data-role=assistant]')[1].querySelector('[data-testid=cut]').textContent`); got != "Cut short: the model was switched off" {
		t.Errorf("an answer cut by switching the model off reads %q", got)
	}
}
