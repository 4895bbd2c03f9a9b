// md.js: a small Markdown renderer for model output, safe by
// construction. Model text is untrusted, so this file never parses HTML:
// it builds elements with document.createElement and puts text in with
// textContent (or text nodes) only. There is no innerHTML, no
// insertAdjacentHTML, no outerHTML anywhere in it, so a "<script>" or
// "<img onerror>" in an answer is shown as those characters. Links keep
// only http:, https: and mailto: targets (parsed with URL, so
// "java\tscript:" and entity tricks cannot sneak through) and open in a
// new tab without a referrer; images are shown as links, never loaded,
// so an answer cannot make the page fetch anything.
//
// Supported: paragraphs, headings (#), emphasis (* _ ** __), inline code,
// fenced code blocks (``` or ~~~, with a language), indented lists
// (- * + and 1.) with GFM task items ([ ] and [x]), block quotes,
// horizontal rules, GFM tables (| a | b |, aligned by :--, :-: and --:),
// ~~strikethrough~~, links [text](url), <https://autolinks> and GFM's bare
// https://… and www.… addresses. It is not a full CommonMark parser (no
// spec-example test runs on it yet). Code blocks get a copy button
// and a light syntax highlighter (strings, comments, numbers, keywords).
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

  // Inline text: code spans, links, autolinks, emphasis.
  function inline(parent, text) {
    let i = 0;
    let buf = "";
    const flush = () => {
      if (buf) parent.appendChild(document.createTextNode(buf));
      buf = "";
    };
    while (i < text.length) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length && /[\\`*_{}\[\]()#+\-.!|<>~]/.test(text[i + 1])) {
        buf += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "`") {
        let n = 1;
        while (text[i + n] === "`") n++;
        const fence = "`".repeat(n);
        const end = text.indexOf(fence, i + n);
        if (end > 0) {
          flush();
          parent.appendChild(el("code", "", text.slice(i + n, end).replace(/^ (.*) $/, "$1")));
          i = end + n;
          continue;
        }
      }
      if (c === "!" && text[i + 1] === "[") {
        const m = linkAt(text, i + 1);
        if (m) {
          flush();
          // An image is never loaded: it becomes a link to it.
          addLink(parent, "image: " + (m.label || m.url), m.url);
          i = m.end;
          continue;
        }
      }
      if (c === "[") {
        const m = linkAt(text, i);
        if (m) {
          flush();
          addLink(parent, m.label, m.url, true);
          i = m.end;
          continue;
        }
      }
      if (c === "<") {
        const m = /^<((?:https?|mailto):[^\s<>]+)>/i.exec(text.slice(i));
        if (m) {
          flush();
          addLink(parent, m[1], m[1]);
          i += m[0].length;
          continue;
        }
      }
      // GFM's extended autolinks: a bare http(s):// or www. address at
      // the start, after white space or one of * _ ~ ( is a link (the
      // trailing punctuation of a sentence is not part of it).
      if ((c === "h" || c === "w") && /^[\s*_~(]?$/.test(text[i - 1] || "")) {
        const m = /^(?:https?:\/\/|www\.)[^\s<>]+/i.exec(text.slice(i));
        if (m) {
          let url = m[0].replace(/[?!.,:*_~'"]+$/, "");
          // A closing parenthesis without its opening one ends the link.
          while (url.endsWith(")") && (url.match(/\(/g) || []).length < (url.match(/\)/g) || []).length) url = url.slice(0, -1);
          if (url.length > 4 && !/^www\.$/i.test(url)) {
            flush();
            addLink(parent, url, /^www\./i.test(url) ? "http://" + url : url);
            i += url.length;
            continue;
          }
        }
      }
      if ((c === "*" || c === "_") && text[i + 1] !== " ") {
        const dbl = text[i + 1] === c;
        const mark = dbl ? c + c : c;
        const start = i + mark.length;
        const end = findClose(text, mark, start);
        if (end > start && (c === "*" || !/\w/.test(text[i - 1] || ""))) {
          flush();
          const e = el(dbl ? "strong" : "em");
          inline(e, text.slice(start, end));
          parent.appendChild(e);
          i = end + mark.length;
          continue;
        }
      }
      if (c === "~" && text[i + 1] === "~") {
        const end = text.indexOf("~~", i + 2);
        if (end > i + 2) {
          flush();
          const e = el("del");
          inline(e, text.slice(i + 2, end));
          parent.appendChild(e);
          i = end + 2;
          continue;
        }
      }
      buf += c;
      i++;
    }
    flush();
  }

  function findClose(text, mark, from) {
    let j = from;
    while (j < text.length) {
      const k = text.indexOf(mark, j);
      if (k < 0) return -1;
      if (text[k - 1] !== " " && text[k - 1] !== "\\" && (mark.length === 2 || text[k + 1] !== mark)) return k;
      j = k + 1;
    }
    return -1;
  }

  // linkAt parses [label](url) at i.
  function linkAt(text, i) {
    let depth = 0;
    let j = i;
    for (; j < text.length; j++) {
      if (text[j] === "[") depth++;
      else if (text[j] === "]" && --depth === 0) break;
    }
    if (j >= text.length || text[j + 1] !== "(") return null;
    const close = text.indexOf(")", j + 2);
    if (close < 0) return null;
    let url = text.slice(j + 2, close).trim();
    const sp = url.search(/\s/);
    if (sp > 0) url = url.slice(0, sp);
    return { label: text.slice(i + 1, j), url: url.replace(/^<|>$/g, ""), end: close + 1 };
  }

  function addLink(parent, label, url, rich) {
    const href = safeHref(url);
    if (!href) {
      // Not a link we allow: the label stays, as text.
      const s = el("span", "bad-link");
      s.title = "link removed: only http, https and mailto links are allowed";
      if (rich) inline(s, label);
      else s.textContent = label;
      parent.appendChild(s);
      return;
    }
    const a = el("a");
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    if (rich) inline(a, label);
    else a.textContent = label;
    parent.appendChild(a);
  }

  // Syntax highlighting: a small tokenizer that is right for most
  // C-like, Python, shell and JSON code. Each token is a span with text.
  const KEYWORDS = new Set(("if else elif for while do return func function def class struct type interface " +
    "import from package export const let var new delete try catch finally throw raise with as in of is not and or " +
    "switch case default break continue go defer select chan map range fn pub mut impl use mod match enum trait " +
    "static public private protected void int float double char bool string true false null nil None True False " +
    "self this async await yield lambda echo then fi done esac local").split(" "));

  function highlight(code, lang) {
    const frag = document.createDocumentFragment();
    const hashComments = /^(py|python|sh|bash|shell|zsh|ruby|rb|yaml|yml|toml|perl|r|make|makefile|dockerfile|ps1|powershell)$/i.test(lang || "");
    const re = hashComments
      ? /(#[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(\b\d[\d_.]*(?:e[+-]?\d+)?\b)|([A-Za-z_][\w]*)/g
      : /(\/\/[^\n]*|\/\*[\s\S]*?\*\/|<!--[\s\S]*?-->)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\b\d[\d_.xXa-fA-F]*\b)|([A-Za-z_$][\w$]*)/g;
    let last = 0;
    let m;
    while ((m = re.exec(code)) !== null) {
      if (m.index > last) frag.appendChild(document.createTextNode(code.slice(last, m.index)));
      let cls = "";
      if (m[1]) cls = "tok-comment";
      else if (m[2]) cls = "tok-string";
      else if (m[3]) cls = "tok-number";
      else if (m[4] && KEYWORDS.has(m[4])) cls = "tok-keyword";
      if (cls) frag.appendChild(el("span", cls, m[0]));
      else frag.appendChild(document.createTextNode(m[0]));
      last = re.lastIndex;
    }
    if (last < code.length) frag.appendChild(document.createTextNode(code.slice(last)));
    return frag;
  }

  function codeBlock(code, lang) {
    const wrap = el("div", "code-block");
    const bar = el("div", "code-bar");
    bar.appendChild(el("span", "code-lang", lang || "text"));
    const btn = el("button", "copy-code", "Copy");
    btn.type = "button";
    btn.setAttribute("data-testid", "copy-code");
    btn.setAttribute("aria-label", "Copy code");
    btn.addEventListener("click", () => copyText(code, btn));
    bar.appendChild(btn);
    wrap.appendChild(bar);
    const pre = el("pre");
    const c = el("code");
    if (lang) c.setAttribute("data-lang", lang);
    c.appendChild(highlight(code, lang));
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

  const isTableSep = (l) => /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(l);
  const cells = (l) => l.trim().replace(/^\||\|$/g, "").split("|").map((s) => s.trim());

  // render turns Markdown text into a DocumentFragment.
  function render(text) {
    const root = document.createDocumentFragment();
    const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
    blocks(root, lines);
    return root;
  }

  function blocks(parent, lines) {
    let i = 0;
    let para = [];
    const endPara = () => {
      if (!para.length) return;
      const p = el("p");
      para.forEach((l, k) => {
        if (k) p.appendChild(document.createElement("br"));
        inline(p, l);
      });
      parent.appendChild(p);
      para = [];
    };
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/.exec(line))) {
        endPara();
        const fence = m[1];
        const body = [];
        i++;
        while (i < lines.length && !lines[i].trimStart().startsWith(fence)) body.push(lines[i++]);
        i++; // the closing fence (or the end: a streaming block is shown as it grows)
        parent.appendChild(codeBlock(body.join("\n"), m[2]));
        continue;
      }
      if (/^\s*$/.test(line)) {
        endPara();
        i++;
        continue;
      }
      if ((m = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line))) {
        endPara();
        const h = el("h" + Math.min(6, m[1].length + 2));
        inline(h, m[2]);
        parent.appendChild(h);
        i++;
        continue;
      }
      if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
        endPara();
        parent.appendChild(el("hr"));
        i++;
        continue;
      }
      if (/^\s{0,3}>/.test(line)) {
        endPara();
        const inner = [];
        while (i < lines.length && /^\s{0,3}>/.test(lines[i])) inner.push(lines[i++].replace(/^\s{0,3}>\s?/, ""));
        const q = el("blockquote");
        blocks(q, inner);
        parent.appendChild(q);
        continue;
      }
      if ((m = /^(\s*)([-*+]|\d{1,9}[.)])\s+/.exec(line))) {
        endPara();
        i = list(parent, lines, i);
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && isTableSep(lines[i + 1])) {
        endPara();
        const table = el("table");
        const head = el("thead");
        const tr = el("tr");
        // GFM alignment from the delimiter row (:--, :-:, --:), as classes.
        const align = cells(lines[i + 1]).map((d) => (/^:-+:$/.test(d) ? "align-center" : /-:$/.test(d) ? "align-right" : /^:-/.test(d) ? "align-left" : ""));
        cells(line).forEach((c, k) => {
          const th = el("th", align[k] || "");
          inline(th, c);
          tr.appendChild(th);
        });
        head.appendChild(tr);
        table.appendChild(head);
        const body = el("tbody");
        i += 2;
        while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
          const r = el("tr");
          cells(lines[i]).forEach((c, k) => {
            const td = el("td", align[k] || "");
            inline(td, c);
            r.appendChild(td);
          });
          body.appendChild(r);
          i++;
        }
        table.appendChild(body);
        const scroll = el("div", "table-scroll");
        scroll.appendChild(table);
        parent.appendChild(scroll);
        continue;
      }
      para.push(line.trim());
      i++;
    }
    endPara();
  }

  // list renders the list that starts at lines[i] and returns the index
  // after it. Items hold their following indented lines (nested lists,
  // code) as blocks.
  function list(parent, lines, i) {
    const first = /^(\s*)([-*+]|\d{1,9}[.)])\s+/.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const listEl = el(ordered ? "ol" : "ul");
    if (ordered && parseInt(first[2], 10) !== 1) listEl.start = parseInt(first[2], 10);
    while (i < lines.length) {
      const m = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(lines[i]);
      if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
      const item = [m[3]];
      i++;
      while (i < lines.length) {
        const l = lines[i];
        if (/^\s*$/.test(l)) {
          if (i + 1 < lines.length && lines[i + 1].length - lines[i + 1].trimStart().length > indent) {
            item.push("");
            i++;
            continue;
          }
          break;
        }
        const lead = l.length - l.trimStart().length;
        if (lead <= indent && /^(\s*)([-*+]|\d{1,9}[.)])\s+/.test(l)) break;
        if (lead <= indent && !/^\s/.test(l) && item.length && /^\s*$/.test(item[item.length - 1])) break;
        item.push(l.slice(Math.min(lead, indent + 2)));
        i++;
      }
      const li = el("li");
      // GFM task list items: "[ ] " and "[x] " are a (read-only) box.
      const task = /^\[([ xX])\]\s+/.exec(item[0]);
      if (task) {
        item[0] = item[0].slice(task[0].length);
        const box = el("input", "task");
        box.type = "checkbox";
        box.disabled = true;
        box.checked = task[1] !== " ";
        box.setAttribute("aria-label", box.checked ? "done" : "not done");
        li.className = "task-item";
        li.appendChild(box);
        li.appendChild(document.createTextNode(" "));
      }
      if (item.length === 1) inline(li, item[0]);
      else blocks(li, item);
      listEl.appendChild(li);
      if (i < lines.length && /^\s*$/.test(lines[i])) {
        const next = lines[i + 1] || "";
        const nm = /^(\s*)([-*+]|\d{1,9}[.)])\s+/.exec(next);
        if (nm && nm[1].length === indent) i++;
        else break;
      }
    }
    parent.appendChild(listEl);
    return i;
  }

  window.NPUMarkdown = { render, safeHref, copyText };
})();
