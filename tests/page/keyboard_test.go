package page

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// tabStop is one element the focus reached with Tab.
type tabStop struct {
	Name    string `json:"name"`
	Visible bool   `json:"visible"` // a focus ring: an outline or a box shadow
	Ordered bool   `json:"ordered"` // after the stop before it in the document
}

// tabStopJS describes the focused element, in the view's order.
const tabStopJS = `(() => {
	const e = document.activeElement;
	if (!e || e === document.body) return {name: "body", visible: false, ordered: true};
	const name = e.id ? "#" + e.id : (e.dataset.testid ? "[" + e.dataset.testid + "]" : e.localName + "." + [...e.classList].join(".")) +
		" " + (e.getAttribute("aria-label") || e.textContent || e.value || "").trim().slice(0, 30);
	const cs = getComputedStyle(e);
	const ring = (cs.outlineStyle !== "none" && parseFloat(cs.outlineWidth) > 0) || (cs.boxShadow && cs.boxShadow !== "none");
	const prev = window.__lastStop;
	const ordered = !prev || !prev.isConnected || !!(prev.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING);
	window.__lastStop = e;
	window.__reached.add(e);
	return {name, visible: ring && e.matches(":focus-visible"), ordered};
})()`

// tabbableJS lists the controls a keyboard user must reach: everything
// focusable, shown, enabled and in the Tab order, that the Tab walk did
// not reach.
const tabbableJS = `(() => {
	const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden" && !e.closest("[hidden], [inert]");
	const all = [...document.querySelectorAll("a[href], button, input, textarea, select, summary, [tabindex]")]
		.filter((e) => e.tabIndex >= 0 && !e.disabled && shown(e) && !(e.localName === "input" && e.type === "hidden"));
	// A radio group is one Tab stop (the arrow keys move in it).
	const reachedGroup = (e) => e.localName === "input" && e.type === "radio" && [...window.__reached].some((r) => r.localName === "input" && r.type === "radio" && r.name === e.name);
	const missed = all.filter((e) => !window.__reached.has(e) && !reachedGroup(e)).map((e) => e.outerHTML.slice(0, 120));
	const positive = [...document.querySelectorAll("[tabindex]")].filter((e) => e.tabIndex > 0).map((e) => e.outerHTML.slice(0, 120));
	return {count: all.length, missed, positive};
})()`

// tabThrough walks the page with Tab from the skip link until the focus
// comes back round, and checks that every control was reached, in
// document order (which is the page's reading order), each with a
// visible focus ring.
func tabThrough(t *testing.T, b *browser, where string) []string {
	t.Helper()
	b.run(chromedp.Evaluate(`window.__reached = new Set(); window.__lastStop = null; document.querySelector('a.skip').focus()`, nil))
	var names []string
	first := eval[tabStop](b, tabStopJS)
	names = append(names, first.Name)
	for i := 0; i < 150; i++ {
		b.run(chromedp.KeyEvent(kb.Tab))
		s := eval[tabStop](b, tabStopJS)
		if s.Name == first.Name || s.Name == "body" {
			break
		}
		names = append(names, s.Name)
		if !s.Visible {
			t.Errorf("%s: the focus on %s is not visible (no outline or ring under :focus-visible)", where, s.Name)
		}
		if !s.Ordered {
			t.Errorf("%s: Tab went back up the page to %s (after %s)", where, s.Name, names[len(names)-2])
		}
	}
	got := eval[struct {
		Count    int      `json:"count"`
		Missed   []string `json:"missed"`
		Positive []string `json:"positive"`
	}](b, tabbableJS)
	for _, m := range got.Missed {
		t.Errorf("%s: Tab never reaches %s", where, m)
	}
	for _, p := range got.Positive {
		t.Errorf("%s: a positive tabindex changes the order: %s", where, p)
	}
	if got.Count < 5 {
		t.Errorf("%s: only %d controls found: the walk is not looking at the page", where, got.Count)
	}
	t.Logf("%s: %d Tab stops: %s", where, len(names), strings.Join(names, " → "))
	return names
}

// pressEnter is Enter as a keyboard gives it to the page: one keyDown
// that carries its text ("\r"), so that a handler's preventDefault on
// keydown also stops the newline, as in a browser with a real keyboard.
// (chromedp's kb.Enter sends the text as a separate "char" event, which
// preventDefault on keydown cannot stop: a test artefact.)
func pressEnter(b *browser) {
	b.run(chromedp.ActionFunc(func(ctx context.Context) error {
		down := input.DispatchKeyEvent(input.KeyDown).WithKey("Enter").WithCode("Enter").
			WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13).WithText("\r").WithUnmodifiedText("\r")
		if err := down.Do(ctx); err != nil {
			return err
		}
		return input.DispatchKeyEvent(input.KeyUp).WithKey("Enter").WithCode("Enter").WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13).Do(ctx)
	}))
}

// TestKeyboardOnly: Enter sends and leaves the composer empty (with a
// keyboard's Enter and with chromedp's), and Tab goes through every
// control of the chat, the NPU check, Settings and the Log, in order,
// each focus visible; views are opened and closed with the keyboard.
func TestKeyboardOnly(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 30*time.Second)

	up.script(time.Millisecond, "A first ", "answer with a [link](https://example.org/).\n\n```go\nfunc main() {}\n```\n")
	b.run(chromedp.Focus("#composer-input", chromedp.ByQuery), chromedp.KeyEvent("first question"))
	pressEnter(b)
	b.answered(2)
	if v := eval[string](b, `document.getElementById('composer-input').value`); v != "" {
		t.Errorf("after Enter sent the message the composer holds %q", v)
	}
	up.script(time.Millisecond, "A second answer.")
	b.run(chromedp.SendKeys("#composer-input", "second question"+kb.Enter, chromedp.ByQuery))
	b.answered(4)
	if v := eval[string](b, `document.getElementById('composer-input').value`); v != "" {
		t.Errorf("after chromedp's Enter sent the message the composer holds %q", v)
	}
	if s := eval[string](b, `[...document.querySelectorAll('[data-role=user] .body')].map((x) => x.textContent).join('|')`); s != "first question|second question" {
		t.Errorf("the sent messages are %q", s)
	}

	names := tabThrough(t, b, "chat")
	// The sidebar (left) comes before the chat, the chat's head before
	// its messages, the message box before Send.
	at := func(w string) int {
		for i, n := range names {
			if strings.HasPrefix(n, w) {
				return i
			}
		}
		t.Errorf("chat: Tab never reaches %s (%s)", w, strings.Join(names, ", "))
		return -1
	}
	order := []string{"#new-chat", "#search", "a.conv-link", "#open-settings", "#model-toggle", "#open-chat-settings", "[copy-code]", "button.act.regenerate", "#composer-input", "#send"}
	for i := 1; i < len(order); i++ {
		if a, b := at(order[i-1]), at(order[i]); a >= b {
			t.Errorf("chat: Tab reaches %s (stop %d) before %s (stop %d)", order[i], b, order[i-1], a)
		}
	}
	b.shot("keyboard-chat")

	for _, view := range []string{"check", "settings", "logs"} {
		// Open the view from the sidebar with the keyboard.
		b.run(chromedp.Focus("[data-view="+view+"]", chromedp.ByQuery))
		pressEnter(b)
		b.waitJS(`!document.getElementById('view-`+view+`').hidden`, 5*time.Second)
		if view == "check" {
			b.waitJS(`!document.getElementById('check-summary').textContent.startsWith('Checking')`, 60*time.Second)
		}
		tabThrough(t, b, view)
		b.shot("keyboard-" + view)
		// And close it with the keyboard.
		b.run(chromedp.Focus("#view-"+view+" .close-view", chromedp.ByQuery))
		pressEnter(b)
		b.waitJS(`document.getElementById('view-`+view+`').hidden && !document.getElementById('view-chat').hidden`, 5*time.Second)
	}
}
