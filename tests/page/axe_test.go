package page

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// axeJS is axe-core (tests/page/axe, pinned in its package-lock.json),
// installed by scripts/setup.d/axe.sh.
func axeJS(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is missing (%v): run scripts/setup", err)
	}
	return string(src)
}

type axeViolation struct {
	ID, Impact, Help string
	Nodes            []string
}

// axe runs axe-core on the page as it is and fails the test on every
// serious or critical violation, naming the elements.
func (b *browser) axe(src, where string) {
	b.t.Helper()
	var loaded bool
	b.run(chromedp.Evaluate(`typeof window.axe === 'object'`, &loaded))
	if !loaded {
		// Through the DevTools protocol: the page's CSP (script-src
		// 'self') does not apply, and the page itself never loads it.
		b.run(chromedp.Evaluate(src, nil))
	}
	var out []axeViolation
	b.run(chromedp.Evaluate(`axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations
		.filter((v) => v.impact === 'serious' || v.impact === 'critical')
		.map((v) => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 6).map((n) => n.target.join(' ') + ' — ' + (n.failureSummary || '').replace(/\s+/g, ' '))})))`,
		&out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	for _, v := range out {
		b.t.Errorf("%s: axe %s (%s): %s\n\t%s", where, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
	}
}

func (b *browser) scheme(s string) {
	b.t.Helper()
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}}))
}

// TestAccessibilityOfEveryView: axe-core finds no serious or critical
// violation on any view of the page (a chat with thinking, versions,
// code and a table; the NPU check; settings; the log; a dialog; the
// list at 360 px), in light and in dark.
func TestAccessibilityOfEveryView(t *testing.T) {
	src := axeJS(t)
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`document.getElementById('model-status').dataset.state === 'on'`, 30*time.Second)
	up.script(time.Millisecond, "<think>Let me think.</think>", "Here is **bold**, `code` and a table:\n\n", "| a | b |\n|---|--:|\n| 1 | 2 |\n\n", "```go\nfunc main() {}\n```\n", "[a link](https://example.org/), see https://example.org/docs. ~~old~~\n\n", "- [x] done\n- [ ] to do\n")
	b.run(chromedp.SendKeys("#composer-input", "show me"+kb.Enter, chromedp.ByQuery))
	b.answered(2)
	// GFM: the table's alignment, a bare address linked, strikethrough,
	// a task list.
	md := eval[map[string]any](b, `(() => { const a = document.querySelector('[data-role=assistant] .body');
		return {align: [...a.querySelectorAll('td')].map((c) => c.className).join(','), links: [...a.querySelectorAll('a')].map((x) => x.href).join(' '),
			del: a.querySelectorAll('del').length, boxes: [...a.querySelectorAll('li.task-item input[type=checkbox]')].map((x) => x.checked + '/' + x.disabled).join(',')} })()`)
	if md["align"] != ",align-right" || md["links"] != "https://example.org/ https://example.org/docs" || md["del"] != 1.0 || md["boxes"] != "true/true,false/true" {
		t.Errorf("GFM rendering: %v", md)
	}
	up.script(time.Millisecond, "Another ", "answer.")
	b.run(chromedp.Click("[data-role=assistant] button.regenerate", chromedp.ByQuery))
	b.waitJS(`!!document.querySelector('[data-testid=version-n]') && !document.querySelector('.message.streaming')`, 20*time.Second)
	b.run(chromedp.Click("[data-role=assistant] [data-testid=version-prev]", chromedp.ByQuery))
	b.waitJS(`(() => { const n = document.querySelector('[data-role=assistant] [data-testid=version-n]'); return n && n.textContent === '1 / 2' })()`, 10*time.Second)
	for _, scheme := range []string{"light", "dark"} {
		b.scheme(scheme)
		b.run(chromedp.EmulateViewport(1280, 860))
		b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
		b.axe(src, scheme+" chat")
		b.shot("axe-chat-" + scheme)
		b.run(chromedp.Click("#open-chat-settings", chromedp.ByQuery))
		for _, view := range []string{"library", "check", "settings", "logs"} {
			b.run(chromedp.Click("#sidebar [data-view="+view+"]", chromedp.ByQuery))
			b.waitJS(`!document.getElementById('view-`+view+`').hidden`, 5*time.Second)
			switch view {
			case "check":
				b.waitJS(`!document.getElementById('check-summary').textContent.startsWith('Checking')`, 60*time.Second)
			case "library":
				// The catalog's rows, each saying what can run it.
				b.waitJS(`document.querySelectorAll('#library-catalog li').length > 0`, 20*time.Second)
			}
			b.axe(src, scheme+" "+view)
			b.shot("axe-" + view + "-" + scheme)
			b.run(chromedp.Click("#view-"+view+" .close-view", chromedp.ByQuery))
		}
		// A dialog.
		b.run(chromedp.Click("#conversations li.conversation button.rename", chromedp.ByQuery))
		b.waitJS(`!!document.querySelector('dialog[open]')`, 5*time.Second)
		b.axe(src, scheme+" rename dialog")
		b.run(chromedp.KeyEvent(kb.Escape))
		b.waitJS(`!document.querySelector('dialog[open]')`, 5*time.Second)
		// 360 px, with the list open.
		b.run(chromedp.EmulateViewport(360, 740))
		b.axe(src, scheme+" chat at 360 px")
		b.waitJS(`!document.body.classList.contains('sidebar-open')`, 5*time.Second)
		b.run(chromedp.Evaluate(`document.getElementById('menu').click()`, nil))
		b.waitJS(`document.body.classList.contains('sidebar-open')`, 5*time.Second)
		b.waitStill("#sidebar") // the slide-in
		b.axe(src, scheme+" list at 360 px")
		b.shot("axe-list-360-" + scheme)
		b.run(chromedp.KeyEvent(kb.Escape))
		b.waitJS(`!document.body.classList.contains('sidebar-open')`, 5*time.Second)
	}
}
