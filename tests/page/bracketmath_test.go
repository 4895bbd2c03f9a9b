package page

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBracketMath: \(…\) and \[…\] (as Qwen and DeepSeek write math)
// render as $…$ and $$…$$ do, inline and displayed, on a line of their
// own or inside a paragraph; inside code spans and blocks, and escaped
// (\\( … \\)), they stay text.
func TestBracketMath(t *testing.T) {
	up := newUpstream(t)
	up.script(5*time.Millisecond,
		"The area is \\(\\pi r^2\\) for a circle.\n\n",
		"\\[\n\\int_0^1 x^2\\,dx = \\frac{1}{3}\n\\]\n\n",
		"So \\[a^2 + b^2 = c^2\\] holds.\n",
	)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "area of a circle"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-testid=message][data-role=assistant]'); return a.length === 1 && a[0].querySelector('.stats').textContent.includes('remote') })()`, 30*time.Second)
	type shown struct {
		Inline  int    `json:"inline"`
		Display int    `json:"display"`
		TeX     string `json:"tex"`
		Code    string `json:"code"`
		Text    string `json:"text"`
	}
	const measure = `((body) => ({
		inline: body.querySelectorAll('.math-inline .katex').length,
		display: body.querySelectorAll('.math-display .katex-display').length,
		tex: [...body.querySelectorAll('annotation')].map((x) => x.textContent.trim()).join(' | '),
		code: [...body.querySelectorAll('code')].map((x) => x.textContent.trim()).join(' | '),
		text: body.textContent.replace(/\s+/g, ' ').trim(),
	}))`
	got := eval[shown](b, measure+`(document.querySelector('[data-role=assistant] .body'))`)
	want := shown{Inline: 1, Display: 2, TeX: `\pi r^2 | \int_0^1 x^2\,dx = \frac{1}{3} | a^2 + b^2 = c^2`}
	if got.Inline != want.Inline || got.Display != want.Display || got.TeX != want.TeX {
		t.Errorf("the answer shows %d inline and %d displayed formulas (%q), want %d, %d (%q)", got.Inline, got.Display, got.TeX, want.Inline, want.Display, want.TeX)
	}
	b.waitJS(`document.fonts.check('16px KaTeX_Main')`, 10*time.Second)
	b.shot("bracket-math-light")
	b.run(chromedp.Evaluate(`document.documentElement.dataset.theme = 'dark'`, nil))
	b.shot("bracket-math-dark")
	b.run(chromedp.EmulateViewport(360, 780))
	b.waitJS(`!document.body.classList.contains('sidebar-open')`, 5*time.Second)
	b.waitStill("#sidebar")
	b.shot("bracket-math-360")

	for _, c := range []struct {
		name, text string
		want       shown
	}{
		{"inline", `mass \(m\) and speed \(v\)`, shown{Inline: 2, TeX: "m | v"}},
		{"display block", "\\[\nE = mc^2\n\\]", shown{Display: 1, TeX: "E = mc^2"}},
		{"display over lines in a paragraph", "The formula:\n\\[\nE = mc^2\n\\]\nholds.", shown{Display: 1, TeX: "E = mc^2"}},
		{"dollars still", `$x$ and $$y$$`, shown{Inline: 1, Display: 1, TeX: "x | y"}},
		{"code span", "write `\\(x\\)` and `\\[y\\]`", shown{Code: `\(x\) | \[y\]`, Text: `write \(x\) and \[y\]`}},
		{"code block", "```\n\\[\nx\n\\]\n\\(y\\)\n```", shown{Code: "\\[\nx\n\\]\n\\(y\\)", Text: `textCopy\[ x \] \(y\)`}},
		{"escaped", `\\(x\\) and \\[y\\]`, shown{Text: `\(x\) and \[y\]`}},
		{"escaped brackets (CommonMark example 12)", `a \[\\\] b`, shown{Text: `a [\] b`}},
		// Until it closes, \( is CommonMark's escaped "(".
		{"unclosed while streaming", `a \(x + `, shown{Text: `a (x +`}},
	} {
		in, _ := json.Marshal(c.text)
		got := eval[shown](b, measure+`((() => { const d = document.createElement('div'); d.appendChild(NPUMarkdown.render(`+string(in)+`)); return d; })())`)
		if c.want.Text == "" {
			got.Text = ""
		}
		if c.want.Code == "" {
			got.Code = ""
		}
		if got != c.want {
			t.Errorf("%s: %q shows %+v, want %+v", c.name, c.text, got, c.want)
		}
	}
}
