package page

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// specExample is one example of the CommonMark spec.
type specExample struct {
	Markdown string `json:"markdown"`
	HTML     string `json:"html"`
	Example  int    `json:"example"`
	Section  string `json:"section"`
}

// specExamples reads testdata/commonmark/spec.txt (CommonMark 0.31.2, from
// the npm package commonmark-spec 0.31.2, CC-BY-SA 4.0, its LICENSE
// beside it) the way that package's index.js does: each example is
// between a line of 32 backticks and " example" and a line of 32
// backticks, markdown and HTML split by a line ".", with "→" for a tab.
func specExamples(t *testing.T) []specExample {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "commonmark", "spec.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if i := strings.Index(text, "\n<!-- END TESTS -->"); i >= 0 {
		text = text[:i]
	}
	fence := strings.Repeat("`", 32)
	re := regexp.MustCompile("(?ms)^" + fence + " example\n(.*?)^\\.\n(.*?)^" + fence + "$|^#{1,6} *(.*?)$")
	var out []specExample
	section := ""
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if m[3] != "" {
			section = m[3]
			continue
		}
		out = append(out, specExample{
			Markdown: strings.ReplaceAll(m[1], "→", "\t"),
			HTML:     strings.ReplaceAll(m[2], "→", "\t"),
			Example:  len(out) + 1,
			Section:  section,
		})
	}
	return out
}

// specRunJS compares, in the page, md.js's parser output (NPUMarkdown.toHTML)
// with each example's HTML, both parsed in an inert document and written
// out in one canonical form (sorted attributes, whitespace collapsed
// outside pre, none between blocks: what the spec's own test normalizer
// does). It also renders each example the way the page shows a message
// (NPUMarkdown.render) and checks that what is left is on md.js's
// allowlist: no script, no handler, no link other than http(s)/mailto.
const specRunJS = `((examples) => {
	const BLOCK = new Set("p h1 h2 h3 h4 h5 h6 ul ol li blockquote pre hr table thead tbody tr th td div section".split(" "));
	const parse = (s) => new DOMParser().parseFromString("<!DOCTYPE html><body>" + s, "text/html").body;
	const canon = (node, inPre) => {
		let out = "";
		for (const n of node.childNodes) {
			if (n.nodeType === 3) {
				let v = n.nodeValue;
				if (!inPre) {
					v = v.replace(/\s+/g, " ");
					const prev = n.previousSibling, next = n.nextSibling;
					if (!prev || (prev.nodeType === 1 && BLOCK.has(prev.localName)) || BLOCK.has(node.localName) && !prev) v = v.replace(/^ /, "");
					if (!next || (next.nodeType === 1 && BLOCK.has(next.localName))) v = v.replace(/ $/, "");
					if (prev && prev.nodeType === 1 && prev.localName === "br") v = v.replace(/^ /, "");
				}
				out += v.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
			} else if (n.nodeType === 8) {
				out += "<!--" + n.nodeValue + "-->";
			} else if (n.nodeType === 1) {
				const attrs = [...n.attributes].map((a) => a.name + '="' + a.value.replace(/&/g, "&amp;").replace(/"/g, "&quot;") + '"').sort();
				out += "<" + n.localName + (attrs.length ? " " + attrs.join(" ") : "") + ">";
				if (/^(br|hr|img|input)$/.test(n.localName)) continue;
				out += canon(n, inPre || n.localName === "pre");
				out += "</" + n.localName + ">";
			}
		}
		return out;
	};
	// An image is shown as a link to it (md.js): the spec's <img> as that link.
	const asLinks = (root) => {
		for (const img of [...root.querySelectorAll("img")]) {
			const a = document.createElement("a");
			a.setAttribute("href", img.getAttribute("src") || "");
			a.setAttribute("data-image", "1");
			if (img.hasAttribute("title")) a.setAttribute("title", img.getAttribute("title"));
			a.textContent = img.getAttribute("alt") || img.getAttribute("src") || "";
			img.replaceWith(a);
		}
		return root;
	};
	const allowed = (root) => {
		for (const e of root.querySelectorAll("*")) {
			if (/^(script|style|iframe|object|embed|img|form|textarea|select|button|link|meta|base|video|audio|svg|math|frame|frameset)$/.test(e.localName) && !e.closest(".katex") && !(e.localName === "button" && e.classList.contains("copy-code"))) return "element " + e.localName;
			for (const a of e.attributes) {
				if (/^on/i.test(a.name)) return "attribute " + a.name;
				if (a.name === "href" && !/^(https?:|mailto:)/.test(a.value)) return "href " + a.value;
				if (a.name === "src" || a.name === "srcdoc" || a.name === "action") return "attribute " + a.name;
			}
			if (e.localName === "input" && !(e.type === "checkbox" && e.disabled)) return "an input";
		}
		return "";
	};
	return examples.map((ex) => {
		const want = parse(ex.html);
		// A raw-HTML example: a tag (or comment, declaration, processing
		// instruction) written in the Markdown is markup in the spec's HTML.
		const written = ex.markdown.match(/<\/?[A-Za-z][A-Za-z0-9-]*(?=[\s\/>]|$)|<!--|<\?|<![A-Z]|<!\[CDATA\[/g) || [];
		const raw = ex.section === "HTML blocks" || ex.section === "Raw HTML" || written.some((t) => ex.html.includes(t));
		const gotHTML = NPUMarkdown.toHTML(ex.markdown);
		// highlight.js's token spans are an addition to the spec's <code>.
		const plain = (root) => {
			for (const s of [...root.querySelectorAll("pre code span")]) s.replaceWith(...s.childNodes);
			root.normalize();
			return root;
		};
		const got = canon(plain(parse(gotHTML)));
		// Both sides through the HTML parser the same way (a link in a link).
		const wantText = canon(parse(canon(asLinks(want))));
		const same = got === wantText;
		// With every link whose text is its address taken out on both
		// sides: the difference is only GFM's bare-URL autolinks.
		const unlink = (root) => {
			for (const a of [...root.querySelectorAll("a")]) {
				const h = a.getAttribute("href") || "", x = a.textContent;
				if (h === x || h === "http://" + x || h === "mailto:" + x || (() => { try { return decodeURI(h) === x } catch (_) { return false } })()) a.replaceWith(...a.childNodes);
			}
			root.normalize();
			return canon(root);
		};
		const linkify = !same && unlink(plain(parse(gotHTML))) === unlink(parse(wantText));
		const math = !same && gotHTML.includes("katex");
		const box = document.createElement("div");
		box.appendChild(NPUMarkdown.render(ex.markdown));
		let rawText = "";
		if (raw) {
			// Every tag written in the example is shown as its characters.
			const text = box.textContent;
			rawText = written.filter((t) => !text.includes(t)).join(" ");
		}
		return { example: ex.example, section: ex.section, raw, same, linkify, math, rawText,
			unsafe: allowed(box), got: got.slice(0, 400), want: wantText.slice(0, 400) };
	});
})`

type specResult struct {
	Example int    `json:"example"`
	Section string `json:"section"`
	Raw     bool   `json:"raw"`
	Same    bool   `json:"same"`
	Linkify bool   `json:"linkify"`
	Math    bool   `json:"math"`
	RawText string `json:"rawText"`
	Unsafe  string `json:"unsafe"`
	Got     string `json:"got"`
	Want    string `json:"want"`
}

// TestCommonMarkSpecExamples runs every example of the CommonMark spec
// 0.31.2 through the page's Markdown in Chromium. An example passes when
// md.js's parser gives the spec's HTML; raw HTML is never rendered, so
// the raw-HTML examples pass when every tag in them is shown as text
// instead; the only other differences allowed are GFM's bare-URL
// autolinks (linkify). Every example's rendering is also checked to hold
// nothing off md.js's allowlist.
func TestCommonMarkSpecExamples(t *testing.T) {
	examples := specExamples(t)
	if len(examples) != 652 {
		t.Fatalf("read %d examples from spec.txt; CommonMark 0.31.2 has 652", len(examples))
	}
	up := newUpstream(t)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.waitJS(`typeof NPUMarkdown === 'object' && NPUMarkdown.toHTML('*a*').includes('<em>')`, 10*time.Second)
	in, _ := json.Marshal(examples)
	results := eval[[]specResult](b, specRunJS+"("+string(in)+")")
	if len(results) != len(examples) {
		t.Fatalf("%d results for %d examples", len(results), len(examples))
	}
	var pass, rawPass, linkify, fail int
	for _, r := range results {
		switch {
		case r.Unsafe != "":
			t.Errorf("example %d (%s): the rendering holds %s", r.Example, r.Section, r.Unsafe)
			fail++
		case r.Raw:
			if r.RawText != "" {
				t.Errorf("example %d (%s): raw HTML %q is not shown as text", r.Example, r.Section, r.RawText)
				fail++
			} else {
				rawPass++
			}
		case r.Same:
			pass++
		case r.Linkify:
			linkify++
		default:
			t.Errorf("example %d (%s):\n\tgot  %s\n\twant %s", r.Example, r.Section, r.Got, r.Want)
			fail++
		}
	}
	t.Logf("CommonMark 0.31.2: %d of %d examples give the spec's HTML, %d raw-HTML examples show their tags as text, %d differ only by GFM bare-URL autolinks, %d fail",
		pass, len(examples), rawPass, linkify, fail)
}

// TestGFMAndMath: a GFM table with alignment, a bare URL, strikethrough,
// a task list and math, inline and displayed, as an answer streams in;
// a price with two dollar signs stays text; screenshots light, dark, 360 px.
func TestGFMAndMath(t *testing.T) {
	answer := []string{
		"## Results\n\n",
		"| Left | Centre | Right |\n|:-----|:------:|------:|\n| a | b | 1.50 |\n| long cell | c | 22.00 |\n\n",
		"See www.example.org and https://example.com/x?y=1 for ~~old~~ new notes.\n\n",
		"- [x] done item\n- [ ] open item\n\n",
		"Euler: $e^{i\\pi} + 1 = 0$, and it costs $5 or $10.\n\n",
		"$$\n\\int_0^1 x^2\\,dx = \\frac{1}{3}\n$$\n\n",
		"```python\ndef f(x):\n    return \"s\"  # note\n```\n",
	}
	up := newUpstream(t)
	up.script(5*time.Millisecond, answer...)
	srv := remoteServer(t, up, t.TempDir())
	b := newBrowser(t)
	b.open(srv.URL + "/")
	b.run(chromedp.SendKeys("#composer-input", "show me gfm"+kb.Enter, chromedp.ByQuery))
	b.waitJS(`(() => { const a = document.querySelectorAll('[data-testid=message][data-role=assistant]'); return a.length === 1 && a[0].querySelector('.stats').textContent.includes('remote') })()`, 30*time.Second)
	got := eval[map[string]any](b, `(() => {
		const a = document.querySelector('[data-role=assistant] .body');
		const cs = (e) => e ? getComputedStyle(e).textAlign : '';
		const row = a.querySelector('tbody tr');
		return {
			align: [...row.children].map(cs).join(' '),
			headAlign: [...a.querySelectorAll('thead th')].map(cs).join(' '),
			links: [...a.querySelectorAll('a')].map((x) => x.href).join(' '),
			del: [...a.querySelectorAll('del')].map((x) => x.textContent).join(' '),
			boxes: [...a.querySelectorAll('li input[type=checkbox]')].map((x) => x.checked + ':' + x.disabled).join(' '),
			inlineMath: a.querySelectorAll('.math-inline .katex').length,
			displayMath: a.querySelectorAll('.katex-display').length,
			mathml: [...a.querySelectorAll('annotation')].map((x) => x.textContent).join(' | '),
			mathHeight: (a.querySelector('.katex-display .katex-html') || {getBoundingClientRect: () => ({height: 0})}).getBoundingClientRect().height,
			mathFont: getComputedStyle(a.querySelector('.katex') || a).fontFamily,
			price: a.textContent.includes('costs $5 or $10'),
			keywords: [...a.querySelectorAll('.code-block .tok-keyword')].map((x) => x.textContent).join(' '),
			comments: a.querySelectorAll('.code-block .tok-comment').length,
			heading: a.querySelector('h4') ? a.querySelector('h4').textContent : '',
			pwned: window.pwned === undefined ? 0 : 1,
		};
	})()`)
	check := func(key, want string) {
		t.Helper()
		if fmt.Sprint(got[key]) != want {
			t.Errorf("%s = %q, want %q", key, got[key], want)
		}
	}
	check("align", "left center right")
	check("headAlign", "left center right")
	check("links", "http://www.example.org/ https://example.com/x?y=1")
	check("del", "old")
	check("boxes", "true:true false:true")
	check("inlineMath", "1")
	check("displayMath", "1")
	check("price", "true")
	check("keywords", "def return")
	check("comments", "1")
	check("heading", "Results")
	check("pwned", "0")
	if m := fmt.Sprint(got["mathml"]); !strings.Contains(m, `e^{i\pi} + 1 = 0`) || !strings.Contains(m, `\frac{1}{3}`) {
		t.Errorf("the formulas' TeX is not in their MathML: %q", m)
	}
	if h, _ := got["mathHeight"].(float64); h < 20 {
		t.Errorf("the displayed formula is %v px high: KaTeX's styles did not apply", h)
	}
	if f := fmt.Sprint(got["mathFont"]); !strings.Contains(f, "KaTeX") {
		t.Errorf("formulas use %q, not KaTeX's fonts", f)
	}
	// KaTeX's fonts come from this server (the CSP allows nothing else).
	b.waitJS(`document.fonts.check('16px KaTeX_Main')`, 10*time.Second)
	b.shot("markdown-light")
	b.run(chromedp.Evaluate(`document.documentElement.dataset.theme = 'dark'`, nil))
	b.shot("markdown-dark")
	b.run(chromedp.EmulateViewport(360, 780))
	b.waitJS(`!document.body.classList.contains('sidebar-open')`, 5*time.Second)
	b.waitStill("#sidebar") // the list's slide-out
	b.shot("markdown-360")
	if w := eval[float64](b, `document.documentElement.scrollWidth`); w > 362 {
		t.Errorf("at 360 px the page is %v px wide: the table or a formula does not scroll on its own", w)
	}
}
