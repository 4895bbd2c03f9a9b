// md.js: Markdown for model output, per CommonMark and GFM, with math,
// safe by construction.
//
// Parsing is markdown-it's (web/static/vendor/README.md names the pinned
// versions): CommonMark, plus GFM tables with alignment, strikethrough,
// bare-URL autolinks (linkify-it, bundled in markdown-it), task lists
// (markdown-it-task-lists) and TeX math in $…$, $$…$$, \(…\) and \[…\]
// (markdown-it-texmath with KaTeX); code is highlighted by highlight.js.
// markdown-it runs with html: false, so raw HTML in an answer is text.
//
// Model text is untrusted. The HTML string those libraries make is never
// put into the page as markup: it is parsed in an inert document
// (DOMParser: no script runs, nothing loads there), and this file builds
// the page's nodes itself with createElement, copying only the elements
// and attributes on its allowlists below; anything else is dropped and
// its text kept. There is no innerHTML, no insertAdjacentHTML, no
// outerHTML anywhere in it. Links keep only http:, https: and mailto:
// targets (parsed with URL, so "java\tscript:" and entity tricks cannot
// sneak through) and open in a new tab without a referrer; images are
// shown as links, never loaded, so an answer cannot make the page fetch
// anything. KaTeX's inline styles are set through the CSSOM
// (element.style), which the page's CSP (style-src 'self') allows, and
// only inside a formula. Code blocks get a copy button.
//
// Without the vendored libraries (they failed to load) the text is shown
// as plain paragraphs: still everything, still safe.
"use strict";

(function () {
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  // safeHref returns an allowed absolute URL, or "" for anything else.
  function safeHref(raw) {
    const s = String(raw).trim();
    let u;
    try {
      u = new URL(s);
    } catch (_) {
      return "";
    }
    if (u.protocol !== "http:" && u.protocol !== "https:" && u.protocol !== "mailto:") return "";
    return u.href;
  }

  // ---- The parser ----

  let parser = null;

  // md returns the configured markdown-it, or null without the libraries.
  function md() {
    if (parser) return parser;
    if (typeof window.markdownit !== "function") return null;
    const hljs = window.hljs;
    const m = window.markdownit({
      html: false, // raw HTML in the text stays text
      linkify: true, // GFM's bare www.… and https://… addresses
      typographer: false,
      breaks: false,
      highlight(code, lang) {
        if (!hljs || !lang || !hljs.getLanguage(lang)) return "";
        try {
          return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
        } catch (_) {
          return "";
        }
      },
    });
    gfmAutolinks(m);
    if (typeof window.markdownitTaskLists === "function") m.use(window.markdownitTaskLists, { enabled: false, label: false });
    // trust: false keeps \href, \url, \htmlClass and the like off; the
    // limits keep a hostile formula from eating the page.
    const katexOptions = { throwOnError: false, trust: false, strict: "ignore", maxSize: 20, maxExpand: 500, output: "htmlAndMathml" };
    if (typeof window.texmath === "function" && window.katex) {
      m.use(window.texmath, {
        engine: window.katex,
        // $…$ and $$…$$, and the \(…\) and \[…\] Qwen and DeepSeek write.
        delimiters: ["dollars", "brackets"],
        katexOptions,
      });
      bracketDisplay(m, katexOptions);
    }
    // An image is shown as a link to it, never loaded.
    m.renderer.rules.image = (tokens, idx, options, env, self) => {
      const t = tokens[idx];
      const esc = m.utils.escapeHtml;
      const src = t.attrGet("src") || "";
      const title = t.attrGet("title");
      const alt = self.renderInlineAsText(t.children, options, env);
      return '<a href="' + esc(src) + '" data-image="1"' + (title ? ' title="' + esc(title) + '"' : "") + ">" + esc(alt || src) + "</a>";
    };
    parser = m;
    return m;
  }

  // gfmAutolinks narrows linkify-it to GFM's extended autolinks: a
  // scheme (http:, https:, mailto:…), "www." or an e-mail address, and
  // only at the start of a line, after white space or after * _ ~ ( (so
  // the address in a quoted src="http://…" stays text). The markdown-it
  // inline linkify rule cannot see what comes before the scheme, so it
  // is off and the core rule (which filters through match) links all.
  function gfmAutolinks(m) {
    const lk = m.linkify;
    lk.set({ fuzzyLink: true, fuzzyEmail: true });
    const match = lk.match.bind(lk);
    const gfm = (text) =>
      (match(text) || []).filter((l) => (l.index === 0 || /[\s*_~(]/.test(text[l.index - 1])) &&
        (l.schema !== "" || /^www\./i.test(l.raw)));
    // (match calls test itself, so test stays linkify-it's; the core
    // rule takes an empty list as "no link here".)
    lk.match = gfm;
    m.inline.ruler.disable("linkify");
  }

  // bracketDisplay adds \[…\] inside a paragraph, over lines too, as
  // $$…$$ is (texmath's brackets take \[…\] only as a block of its own).
  // Like every math rule it runs before markdown-it's escapes, so \\[
  // stays text, and never inside code, which its own rules take whole.
  // A formula holds more than backslashes and spaces: "\[\\\]" is
  // CommonMark's escaped "[\]".
  function bracketDisplay(m, opts) {
    const tm = window.texmath;
    const rule = { name: "math_inline_bracket", rex: /\\\[((?:(?!\\\])[\s\S])*?[^\s\\](?:(?!\\\])[\s\S])*?)\\\]/gy, tmpl: "<section><eqn>$1</eqn></section>", tag: "\\[", displayMode: true };
    m.inline.ruler.before("escape", rule.name, tm.inline(rule));
    m.renderer.rules[rule.name] = (tokens, idx) => rule.tmpl.replace(/\$1/, () => tm.render(tokens[idx].content, true, opts));
  }

  // toHTML is the parser's HTML for text (what the CommonMark spec test
  // compares); it never goes into the page as markup.
  function toHTML(text) {
    const m = md();
    return m ? m.render(String(text)) : "";
  }

  // ---- From the inert document to the page's own nodes ----

  const HTML_TAGS = new Set(("p h1 h2 h3 h4 h5 h6 em strong s del code pre blockquote ul ol li hr br " +
    "table thead tbody tr th td a span div input").split(" "));
  const MATHML = "http://www.w3.org/1998/Math/MathML";
  const SVG = "http://www.w3.org/2000/svg";
  const MATH_TAGS = new Set(("math semantics annotation mrow mi mo mn ms mtext mspace msup msub msubsup mfrac " +
    "msqrt mroot mstyle mtable mtr mtd mlabeledtr munder mover munderover mpadded mphantom menclose " +
    "mmultiscripts mprescripts none merror").split(" "));
  const MATH_ATTRS = new Set(("mathvariant display displaystyle scriptlevel stretchy fence separator form lspace rspace " +
    "accent accentunder largeop movablelimits symmetric minsize maxsize width height depth voffset " +
    "linethickness columnalign rowalign columnspacing rowspacing columnlines rowlines frame " +
    "notation encoding align").split(" "));
  const SVG_TAGS = new Set("svg path line g rect".split(" "));
  const SVG_ATTRS = new Set(("width height viewBox preserveAspectRatio d x y x1 y1 x2 y2 " +
    "stroke stroke-width fill").split(" "));
  // highlight.js classes onto the page's own token colours.
  const TOKENS = { "hljs-keyword": "tok-keyword", "hljs-built_in": "tok-keyword", "hljs-type": "tok-keyword",
    "hljs-string": "tok-string", "hljs-comment": "tok-comment", "hljs-number": "tok-number", "hljs-literal": "tok-number" };

  function classesOf(src) {
    const out = [];
    for (const c of (src.getAttribute("class") || "").split(/\s+/)) {
      if (!/^[\w-]{1,64}$/.test(c)) continue;
      out.push(c);
      if (TOKENS[c]) out.push(TOKENS[c]);
    }
    return out;
  }

  const CONTAINERS = new Set("body ul ol blockquote table thead tbody tr section".split(" "));
  const BLOCKS = new Set("p h1 h2 h3 h4 h5 h6 ul ol li blockquote pre hr table thead tbody tr th td div section eqn".split(" "));
  const isBlock = (n) => !!n && n.nodeType === 1 && BLOCKS.has(n.localName);

  // copyNodes appends to parent a copy of src's children, allowlisted.
  function copyNodes(parent, src, inMath) {
    for (const n of src.childNodes) {
      if (n.nodeType === 3) {
        // The newlines markdown-it writes between blocks are not text.
        if (/^\s*$/.test(n.nodeValue) && (CONTAINERS.has(src.localName) || isBlock(n.previousSibling) || isBlock(n.nextSibling))) continue;
        parent.appendChild(document.createTextNode(n.nodeValue));
        continue;
      }
      if (n.nodeType !== 1) continue;
      const out = copyElement(n, inMath);
      if (out) parent.appendChild(out);
      else copyNodes(parent, n, inMath); // not allowed: its text stays
    }
  }

  function copyElement(n, inMath) {
    const ns = n.namespaceURI;
    const tag = n.localName;
    if (ns === MATHML) return copyForeign(n, MATHML, MATH_TAGS, MATH_ATTRS);
    if (ns === SVG) return copyForeign(n, SVG, SVG_TAGS, SVG_ATTRS);
    // texmath's wrappers: <eq> inline, <section><eqn> for display.
    if (tag === "eq") return wrapMath(n, "span", "math-inline");
    if (tag === "eqn") return wrapMath(n, "div", "math-display");
    if (tag === "section") {
      const d = el("div", "math-block");
      copyNodes(d, n, inMath);
      return d;
    }
    if (!HTML_TAGS.has(tag)) return null;
    if (tag === "a") return link(n);
    if (tag === "input") return taskBox(n);
    if (tag === "pre") {
      const code = n.querySelector("code");
      if (code) return codeBlock(code);
    }
    // Headings start at h3: the page has its own h1 and h2.
    const h = /^h([1-6])$/.exec(tag);
    // ~~text~~ is <s> in markdown-it, <del> in GFM's spec: GFM's.
    const e = document.createElement(h ? "h" + Math.min(6, +h[1] + 2) : tag === "s" ? "del" : tag);
    const cls = classesOf(n);
    if (tag === "li" && cls.includes("task-list-item")) cls.push("task-item");
    if (tag === "th" || tag === "td") {
      const a = /text-align:\s*(left|center|right)/.exec(n.getAttribute("style") || "");
      if (a) cls.push("align-" + a[1]);
    }
    if (tag === "ol" && n.hasAttribute("start")) {
      const s = parseInt(n.getAttribute("start"), 10);
      if (Number.isFinite(s)) e.setAttribute("start", String(s));
    }
    const math = inMath || cls.includes("katex");
    if (math && n.hasAttribute("style")) e.style.cssText = n.getAttribute("style");
    if (math && n.hasAttribute("aria-hidden")) e.setAttribute("aria-hidden", "true");
    if (cls.length) e.className = cls.join(" ");
    copyNodes(e, n, math);
    return e;
  }

  function copyForeign(n, ns, tags, attrs) {
    if (!tags.has(n.localName)) return null;
    const e = document.createElementNS(ns, n.localName);
    for (const a of n.attributes) {
      if (attrs.has(a.name)) e.setAttribute(a.name, a.value);
      else if (a.name === "class") e.setAttribute("class", classesOf(n).join(" "));
    }
    if (n.hasAttribute("style")) e.style.cssText = n.getAttribute("style");
    copyNodes(e, n, true);
    return e;
  }

  function wrapMath(n, tag, cls) {
    const e = el(tag, cls);
    copyNodes(e, n, true);
    return e;
  }

  function link(n) {
    const href = safeHref(n.getAttribute("href") || "");
    const a = href ? el("a") : el("span", "bad-link");
    if (href) {
      a.href = href;
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
      if (n.hasAttribute("data-image")) a.className = "image-link";
      if (n.hasAttribute("title")) a.title = n.getAttribute("title");
    } else {
      a.title = "link removed: only http, https and mailto links are allowed";
    }
    copyNodes(a, n, false);
    return a;
  }

  // taskBox is a GFM task item's (read-only) box.
  function taskBox(n) {
    if (n.getAttribute("type") !== "checkbox") return null;
    const box = el("input", "task");
    box.type = "checkbox";
    box.disabled = true;
    box.checked = n.hasAttribute("checked");
    box.setAttribute("aria-label", box.checked ? "done" : "not done");
    return box;
  }

  function codeBlock(code) {
    const lang = ((code.getAttribute("class") || "").match(/(?:^|\s)language-([\w+#.-]{1,40})/) || [])[1] || "";
    const text = code.textContent.replace(/\n$/, "");
    const wrap = el("div", "code-block");
    const bar = el("div", "code-bar");
    bar.appendChild(el("span", "code-lang", lang || "text"));
    const btn = el("button", "copy-code", "Copy");
    btn.type = "button";
    btn.setAttribute("data-testid", "copy-code");
    btn.setAttribute("aria-label", "Copy code");
    btn.addEventListener("click", () => copyText(text, btn));
    bar.appendChild(btn);
    wrap.appendChild(bar);
    const pre = el("pre");
    const c = el("code");
    if (lang) c.setAttribute("data-lang", lang);
    copyNodes(c, code, false);
    pre.appendChild(c);
    wrap.appendChild(pre);
    return wrap;
  }

  function copyText(text, btn) {
    const done = (ok) => {
      if (!btn) return;
      // The label from before the first click: a second click within
      // the 1.5 s must not keep "Copied" for good.
      if (!btn.dataset.label) btn.dataset.label = btn.textContent;
      btn.textContent = ok ? "Copied" : "Copy failed";
      clearTimeout(btn.copyTimer);
      btn.copyTimer = setTimeout(() => (btn.textContent = btn.dataset.label), 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(() => done(true), () => done(fallbackCopy(text)));
    } else {
      done(fallbackCopy(text));
    }
  }

  function fallbackCopy(text) {
    const ta = el("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.className = "offscreen";
    document.body.appendChild(ta);
    ta.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (_) {}
    ta.remove();
    return ok;
  }

  // render turns Markdown text into a DocumentFragment.
  function render(text) {
    const root = document.createDocumentFragment();
    const m = md();
    if (!m) {
      for (const para of String(text).split(/\n{2,}/)) root.appendChild(el("p", "", para));
      return root;
    }
    const inert = new DOMParser().parseFromString("<!DOCTYPE html><body>" + m.render(String(text)), "text/html");
    // Tables scroll on their own on a small screen.
    copyNodes(root, inert.body, false);
    for (const t of root.querySelectorAll("table")) {
      const scroll = el("div", "table-scroll");
      t.replaceWith(scroll);
      scroll.appendChild(t);
    }
    return root;
  }

  window.NPUMarkdown = { render, toHTML, safeHref, copyText };
})();
