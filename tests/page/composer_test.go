package page

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestComposerScrollbarOnlyWhenNeeded: the message box shows no
// scrollbar empty, with one line or with a few (it grows instead); only
// text taller than its 40 % cap scrolls. At 1280 and 360 px.
func TestComposerScrollbarOnlyWhenNeeded(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	// scrollable: the text is taller than the box and it may scroll
	// (a scrollbar shows); bar: the width a scrollbar takes.
	const measure = `(() => { const i = document.getElementById('composer-input'); const cs = getComputedStyle(i);
		const border = parseFloat(cs.borderLeftWidth) + parseFloat(cs.borderRightWidth);
		return { scrollable: i.scrollHeight > i.clientHeight && cs.overflowY !== 'hidden', bar: i.offsetWidth - border - i.clientWidth, height: i.offsetHeight }; })()`
	type box struct {
		Scrollable bool
		Bar        float64
		Height     float64
	}
	for _, width := range []int64{1280, 360} {
		b.run(chromedp.EmulateViewport(width, 780))
		var oneLine float64
		for _, c := range []struct {
			name, text string
			scroll     bool
		}{
			{"empty", "", false},
			{"one line", "hello there", false},
			{"three lines", "one\ntwo\nthree", false},
			{"eighty lines", strings.Repeat("a line\n", 79) + "the end", true},
			{"one line again", "short", false},
		} {
			b.run(chromedp.Evaluate(`(() => { const i = document.getElementById('composer-input'); i.value = ''; i.dispatchEvent(new Event('input')); })()`, nil),
				chromedp.Focus("#composer-input", chromedp.ByQuery))
			if c.text != "" {
				b.run(chromedp.Evaluate(`(() => { const i = document.getElementById('composer-input'); i.value = `+jsString(c.text[:len(c.text)-1])+`; i.dispatchEvent(new Event('input')); })()`, nil),
					chromedp.SendKeys("#composer-input", c.text[len(c.text)-1:], chromedp.ByQuery))
			} else {
				b.run(chromedp.SendKeys("#composer-input", "x"+kb.Backspace, chromedp.ByQuery))
			}
			got := eval[box](b, measure)
			if n := eval[int](b, `document.querySelectorAll('[data-testid=message]').length`); n != 0 {
				t.Fatalf("%s: typing sent a message", c.name)
			}
			if got.Scrollable != c.scroll || (!c.scroll && got.Bar > 0) {
				t.Errorf("%d px, %s: %+v, want a scrollbar %v", width, c.name, got, c.scroll)
			}
			switch c.name {
			case "one line":
				oneLine = got.Height
			case "three lines":
				if got.Height <= oneLine {
					t.Errorf("%d px: three lines are %v px high, one line %v: the box did not grow", width, got.Height, oneLine)
				}
			}
		}
		b.run(chromedp.Evaluate(`(() => { const i = document.getElementById('composer-input'); i.value = 'one line'; i.dispatchEvent(new Event('input')); })()`, nil))
		b.shot("composer-one-line-" + map[int64]string{1280: "light", 360: "360"}[width])
	}
}

// TestAttachFocusIsVisible: reached with Tab, "Attach a file" (a label
// for a hidden file input) shows a focus ring, in light and dark.
func TestAttachFocusIsVisible(t *testing.T) {
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	for _, theme := range []string{"light", "dark"} {
		b.run(chromedp.Evaluate(`document.documentElement.dataset.theme = '`+theme+`'`, nil), chromedp.Focus("#composer-input", chromedp.ByQuery))
		for range 6 {
			if eval[string](b, `document.activeElement.id`) == "attach-input" {
				break
			}
			b.run(chromedp.KeyEvent(kb.Tab))
		}
		if id := eval[string](b, `document.activeElement.id`); id != "attach-input" {
			t.Fatalf("Tab does not reach the file input (at %q)", id)
		}
		ring := eval[map[string]string](b, `(() => { const cs = getComputedStyle(document.querySelector('[data-testid=attach]'));
			return { style: cs.outlineStyle, width: cs.outlineWidth, color: cs.outlineColor, bg: getComputedStyle(document.body).backgroundColor }; })()`)
		if ring["style"] != "solid" || ring["width"] != "2px" || ring["color"] == ring["bg"] || strings.Contains(ring["color"], "0)") {
			t.Errorf("%s: the focused Attach a file has the outline %v", theme, ring)
		}
		b.shot("attach-focus-" + theme)
		var png []byte
		b.run(chromedp.ScreenshotScale(".composer", 2, &png, chromedp.ByQuery))
		os.WriteFile(filepath.Join(artifacts(t), "attach-focus-"+theme+"-close.png"), png, 0o644)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
