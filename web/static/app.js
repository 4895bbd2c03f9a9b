// app.js drives the chat page over NPU Chat's API: the conversation
// list and search, the open conversation (rendered with md.js), sending
// with a streamed answer (stop, regenerate, edit and resend, copy), the
// model's status and switch, the install, check, settings and log
// views. It never puts text from the server into innerHTML: every
// string is set with textContent, and Markdown goes through md.js.
// Questions to the user (rename, delete, the API key) are in-page
// dialogs built the same way, never the browser's prompt() or confirm().
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const app = $("app");
  const msgsEl = $("messages");
  const input = $("composer-input");
  const sendBtn = $("send");
  const stopBtn = $("stop");
  const MD = window.NPUMarkdown;

  let conversation = app.dataset.conversation ? Number(app.dataset.conversation) : null;
  let currentView = "chat"; // the view shown (showView)
  let modelName = app.dataset.model || "minicpm5:2b";
  let status = null;
  let streaming = null; // {abort: AbortController}
  let follow = true;
  let lastContext = "";
  let lastUsed = 0; // tokens the last answer's context held (attachments count on it)

  // ---- What tests wait for ----
  // The page counts its work on #app, so that a test waits for the page
  // to have done something instead of sleeping: data-requests is how
  // many calls of api() and answers being sent are in flight,
  // data-key-waits how many of those wait for the API key dialog,
  // data-key-refusals how many answers asked for a key (and
  // data-install-event, set by the event stream, the state of the last
  // install event). A chain of requests one action starts keeps
  // data-requests above 0 until its last one ends (each next request
  // starts before the previous one's promise settles), so 0 after the
  // action means the page has finished with it.
  const work = { requests: 0, keyWaits: 0, keyRefusals: 0 };
  function showWork() {
    app.dataset.requests = work.requests;
    app.dataset.keyWaits = work.keyWaits;
    app.dataset.keyRefusals = work.keyRefusals;
  }
  showWork();
  // tracked counts the promise p as a request in flight until it settles.
  function tracked(p) {
    work.requests++;
    showWork();
    return p.finally(() => {
      work.requests--;
      showWork();
    });
  }

  // ---- API helpers ----
  const key = () => localStorage.getItem("npuchat-key") || "";
  function headers(extra) {
    const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
    if (key()) h["Authorization"] = "Bearer " + key();
    return h;
  }
  function api(method, path, body, tries) {
    return tracked(apiOnce(method, path, body, tries));
  }
  async function apiOnce(method, path, body, tries) {
    const sent = key(); // a refusal of a key replaced meanwhile is retried with the new one, not asked again
    const r = await fetch(path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body) });
    // The history and the settings need the session the tray's link
    // starts (or the API key, when the server has one: it says so with
    // WWW-Authenticate); without either the page says how to get in.
    if (r.status === 401 && !r.headers.get("WWW-Authenticate")) {
      showLocked();
      const err = new Error(lockedText());
      err.status = 401;
      err.code = "session_required";
      throw err;
    }
    if (r.status === 401 && (tries || 0) < 3 && (key() !== sent || (await waitKey(!!key())))) {
      return api(method, path, body, (tries || 0) + 1);
    }
    if (r.status === 204) return null;
    const ct = r.headers.get("Content-Type") || "";
    const data = ct.includes("json") ? await r.json() : await r.text();
    if (!r.ok) {
      const msg = data && data.error ? (data.error.message || data.error) : String(data);
      const err = new Error(msg);
      err.status = r.status;
      err.code = data && (data.code || (data.error && data.error.code));
      err.param = data && (data.param || (data.error && data.error.param)); // the field of a bad setting
      err.fields = data && Array.isArray(data.fields) ? data.fields : null; // every bad setting: [{param, message}]
      throw err;
    }
    return data;
  }
  // Other page scripts (settings.js) call the API through api.
  window.NPUChat = Object.assign(window.NPUChat || {}, { api });

  // askKey asks for the API key in an in-page dialog (one at a time:
  // the requests refused together wait for the same answer), keeps it in
  // this browser and reconnects the event stream with it. It resolves to
  // true when there is a new key to try; after a Cancel it does not ask
  // again until the page is reloaded.
  let keyAsked = null;
  let keyDeclined = false;
  // waitKey is askKey for one refused request, counted for the tests.
  async function waitKey(refused) {
    work.keyRefusals++;
    work.keyWaits++;
    showWork();
    try {
      return await askKey(refused);
    } finally {
      work.keyWaits--;
      showWork();
    }
  }
  function askKey(refused) {
    if (keyDeclined) return Promise.resolve(false);
    if (!keyAsked) {
      keyAsked = ask({
        title: "API key needed",
        text: refused
          ? "This NPU Chat server refused the API key this page has. Enter the right one (the NPUCHAT_API_KEY it was started with)."
          : "This NPU Chat server needs an API key: the NPUCHAT_API_KEY it was started with. The page keeps it in this browser.",
        label: "API key", secret: true, confirm: "Use this key",
        check: (v) => (v.trim() ? "" : "Enter the key, or Cancel."),
      }).then((k) => {
        keyAsked = null;
        if (k === null) {
          keyDeclined = true;
          showError("This NPU Chat server needs an API key. Reload the page to enter it.");
          return false;
        }
        localStorage.setItem("npuchat-key", k.trim());
        connectEvents();
        return true;
      });
    }
    return keyAsked;
  }

  // lockedText says why the history is not shown and how to get in: the
  // page was opened without the link the tray or `npuchat serve` gives.
  const linkUsed = new URLSearchParams(location.search).get("link") === "used";
  function lockedText() {
    return (linkUsed ? "That link to NPU Chat was already used or has expired (each link works once). " : "") +
      "Your chats and settings are shown only to the person at this computer: open the chat from NPU Chat's tray icon (Open the chat), or start NPU Chat again, and it opens a fresh link. " +
      "With npuchat serve, open the link it printed when it started.";
  }
  let locked = false;
  function showLocked() {
    if (locked) return;
    locked = true;
    app.dataset.locked = "true";
    showHistoryProblem(lockedText());
  }

  // showError shows msg, a sentence, in the error banner ("" hides it).
  // opts: kind, the state the message is about ("off": the model is
  // switched off, "missing": not installed, "unreachable": the server
  // does not answer), so that it goes when that state ends; detail, the
  // server's own words, folded under "Details"; action, {label, run}, a
  // button beside the message. No command line goes in: detail has
  // "run npuchat …" advice cut out (the page has a button for it).
  //
  // A banner with a kind is about the model or the server and shows
  // everywhere; any other belongs to the chat or view it was raised in:
  // it is put away when the reader goes elsewhere and shown again on
  // coming back (followPlace).
  let errorKind = "";
  let errorPlace = ""; // the place of the banner shown, "" for everywhere
  let errorArgs = null; // the banner shown, [msg, opts]
  const bannersAway = new Map(); // place -> [msg, opts], put away
  function showError(msg, opts) {
    const o = typeof opts === "object" && opts ? opts : { kind: opts ? "off" : "" };
    errorArgs = msg ? [msg, opts] : null;
    errorPlace = msg && !o.kind ? place() : "";
    const t = $("error-text");
    t.replaceChildren();
    if (msg) {
      t.append(msg);
      if (o.action) {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "btn banner-action";
        b.setAttribute("data-testid", "banner-action");
        b.textContent = o.action.label;
        b.addEventListener("click", () => {
          showError("");
          o.action.run();
        });
        t.append(" ", b);
      }
      const detail = cleanDetail(o.detail || "");
      if (detail && detail !== msg) {
        const d = document.createElement("details");
        d.className = "banner-detail";
        const sm = document.createElement("summary");
        sm.textContent = "Details";
        const p = document.createElement("p");
        p.textContent = detail;
        d.append(sm, p);
        t.append(d);
      }
    }
    $("error-banner").hidden = !msg;
    errorKind = msg ? o.kind || "" : "";
  }
  // place is where the reader is: a chat (by id, "new" for a new one)
  // or another view.
  function place() {
    return currentView === "chat" ? "chat:" + (conversation || "new") : "view:" + currentView;
  }
  // followPlace, after the reader moved, puts away a banner of another
  // place and shows again the one put away here.
  function followPlace() {
    const here = place();
    if (errorArgs && errorPlace && errorPlace !== here) {
      bannersAway.set(errorPlace, errorArgs);
      $("error-text").replaceChildren();
      $("error-banner").hidden = true;
      errorKind = "";
      errorArgs = null;
      errorPlace = "";
    }
    const back = bannersAway.get(here);
    if (back && !errorArgs) {
      bannersAway.delete(here);
      showError(back[0], back[1]);
    }
  }
  // cleanDetail drops advice to run a command from a server's message.
  function cleanDetail(s) {
    return String(s).replace(/[;,]?\s*(run|try) [`']?npuchat [^.;)]*/gi, "").trim();
  }
  $("error-close").addEventListener("click", () => {
    showError("");
    input.focus();
  });
  function showHistoryProblem(msg) {
    const b = $("history-problem");
    b.textContent = msg || "";
    b.hidden = !msg;
  }

  // ---- Messages ----
  function renderMarkdown(body, text) {
    body.replaceChildren(MD.render(text));
  }

  function engineName(kind) {
    return { npu: "NPU (FastFlowLM)", oflm: "NPU (oflm)", cpu: "CPU (in-process engine)", remote: "remote server" }[kind] || kind || "unknown engine";
  }

  function statsText(st) {
    // Nothing before the engine has said who answers (a streaming answer).
    if (!st || !st.engine) return "";
    const parts = [];
    if (st.tokens_per_second > 0) parts.push(st.tokens_per_second.toFixed(1) + " tok/s");
    // Speculative decoding: how many of the answer's tokens were
    // guessed ahead and kept (page.go's guessedText).
    if (st.draft_tokens > 0) parts.push((st.draft_accepted || 0).toLocaleString("en-US") + " of " + st.completion_tokens.toLocaleString("en-US") + " tokens guessed");
    if (st.ttft_ms > 0) parts.push("first token " + st.ttft_ms + " ms");
    parts.push(engineName(st.engine));
    if (st.context_length > 0) parts.push("context " + (st.prompt_tokens + st.completion_tokens) + " / " + st.context_length);
    if (st.cached_tokens > 0) parts.push("prompt from cache: " + st.cached_tokens.toLocaleString("en-US") + " of " + st.prompt_tokens.toLocaleString("en-US") + " tokens");
    return parts.join(" · ");
  }

  // omittedText says how many of the chat's oldest messages the model
  // did not see (page.go's omittedLine).
  function omittedText(st) {
    const n = (st && st.omitted_messages) || 0;
    if (n <= 0) return "";
    return "The model did not see the " + (n === 1 ? "oldest message" : n.toLocaleString("en-US") + " oldest messages");
  }

  function cutText(reason) {
    return { stopped: "Stopped before the end", failed: "Cut short by an error", "switched-off": "Cut short: the model was switched off" }[reason] || "Interrupted (the server stopped)";
  }
  // lengthText marks an answer that ended at its length limit.
  function lengthText(m) {
    if (m.role !== "assistant" || m.cut || !m.stats || m.stats.finish_reason !== "length") return "";
    return "Stopped at the length limit (" + m.stats.completion_tokens + " tokens): raise Max tokens in Chat settings for a longer answer";
  }

  // messageEl builds (or updates) the element of a stored message.
  function messageEl(m, existing) {
    const a = existing || document.createElement("article");
    a.className = "message " + m.role;
    a.setAttribute("data-testid", "message");
    a.dataset.role = m.role;
    a.dataset.id = m.id;
    a.dataset.cut = m.cut ? "true" : "false";
    a.setAttribute("aria-label", m.role === "user" ? "You" : "Assistant");
    a.replaceChildren();
    const who = document.createElement("div");
    who.className = "who";
    who.setAttribute("aria-hidden", "true");
    who.textContent = m.role === "user" ? "You" : "Assistant";
    const body = document.createElement("div");
    body.className = "body md";
    body.dataset.raw = m.content;
    renderMarkdown(body, m.content);
    a.append(who);
    if (m.thinking) a.append(thinkingEl(m.thinking, false));
    a.append(body);
    if (m.cut) {
      const c = document.createElement("div");
      c.className = "cut";
      c.setAttribute("data-testid", "cut");
      c.textContent = cutText(m.cut_reason);
      a.appendChild(c);
    } else if (lengthText(m)) {
      const c = document.createElement("div");
      c.className = "cut length";
      c.setAttribute("data-testid", "length");
      c.textContent = lengthText(m);
      a.appendChild(c);
    }
    if (m.role === "assistant") {
      const s = document.createElement("div");
      s.className = "stats";
      s.setAttribute("data-testid", "stats");
      s.textContent = statsText(m.stats);
      a.appendChild(s);
      // Why the preferred engine did not answer, on a line of its own.
      if (m.stats && m.stats.fallback) {
        const f = document.createElement("div");
        f.className = "fallback";
        f.setAttribute("data-testid", "fallback");
        f.textContent = "Answered on the " + engineName(m.stats.engine) + " instead of the NPU: " + firstSentence(cleanDetail(m.stats.fallback));
        f.title = m.stats.fallback;
        a.appendChild(f);
      }
      if (omittedText(m.stats)) {
        const o = document.createElement("div");
        o.className = "omitted";
        o.setAttribute("data-testid", "omitted");
        o.textContent = omittedText(m.stats);
        a.appendChild(o);
      }
      if (m.stats && m.stats.context_length) {
        lastUsed = m.stats.prompt_tokens + m.stats.completion_tokens;
        lastContext = "Context used: " + lastUsed + " of " + m.stats.context_length + " tokens";
      }
    }
    a.appendChild(actions(m));
    return a;
  }

  // thinkingEl is the folded "Thinking" section of an answer: a reasoning
  // model's thoughts, open while they stream.
  function thinkingEl(text, open) {
    const d = document.createElement("details");
    d.className = "thinking";
    d.setAttribute("data-testid", "thinking");
    d.open = !!open;
    const s = document.createElement("summary");
    s.textContent = open ? "Thinking…" : "Thinking";
    const b = document.createElement("div");
    b.className = "thinking-body md";
    b.dataset.raw = text;
    renderMarkdown(b, text);
    d.append(s, b);
    return d;
  }

  function actions(m) {
    const role = m.role;
    const d = document.createElement("div");
    d.className = "actions";
    const mk = (cls, label, text) => {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "act " + cls;
      b.setAttribute("aria-label", label);
      b.textContent = text;
      return b;
    };
    // ‹ 2/3 ›: the message's other versions (other answers to its
    // question, other edits of it).
    const vs = m.versions || [];
    if (vs.length > 1) {
      const i = Math.max(0, vs.indexOf(m.id));
      const g = document.createElement("span");
      g.className = "versions";
      g.setAttribute("data-testid", "versions");
      g.setAttribute("role", "group");
      g.setAttribute("aria-label", "Versions");
      const prev = mk("version prev", "Previous version", "‹");
      prev.setAttribute("data-testid", "version-prev");
      prev.dataset.to = i > 0 ? vs[i - 1] : 0;
      prev.disabled = i === 0;
      const n = document.createElement("span");
      n.className = "version-n";
      n.setAttribute("data-testid", "version-n");
      n.textContent = i + 1 + " / " + vs.length;
      const next = mk("version next", "Next version", "›");
      next.setAttribute("data-testid", "version-next");
      next.dataset.to = i < vs.length - 1 ? vs[i + 1] : 0;
      next.disabled = i === vs.length - 1;
      g.append(prev, n, next);
      d.appendChild(g);
    }
    d.appendChild(mk("copy", "Copy message", "Copy"));
    d.appendChild(role === "user" ? mk("edit", "Edit and resend", "Edit") : mk("regenerate", "Regenerate: answer again", "Regenerate"));
    return d;
  }

  // upgrade renders the server-rendered messages' text as Markdown.
  function upgradeServerMessages() {
    msgsEl.querySelectorAll("article.message [data-md]").forEach((body) => {
      const raw = body.textContent;
      body.removeAttribute("data-md");
      body.dataset.raw = raw;
      renderMarkdown(body, raw);
    });
  }

  function updateEmpty() {
    $("empty").hidden = !!msgsEl.querySelector("article.message");
    $("context").textContent = lastContext;
    updateActions();
    updateToBottom();
  }

  // updateActions offers Regenerate on the last answer only (the server
  // answers the last question again), and Answer on a last question
  // that has no answer (the model was off, the answer failed).
  function updateActions() {
    const arts = msgsEl.querySelectorAll("article.message");
    arts.forEach((a, i) => {
      const last = i === arts.length - 1;
      const regen = a.querySelector("button.regenerate");
      if (regen) regen.hidden = !last;
      const answer = a.querySelector("button.answer");
      const want = last && a.dataset.role === "user" && !streaming;
      if (want && !answer) {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "act answer";
        b.setAttribute("data-testid", "answer");
        b.setAttribute("aria-label", "Answer this message");
        b.textContent = "Answer";
        a.querySelector(".actions").appendChild(b);
      } else if (!want && answer) {
        answer.remove();
      }
    });
  }

  // sentence makes a message from the server a sentence.
  function sentence(msg) {
    const s = String(msg || "").trim();
    if (!s) return "";
    return s.charAt(0).toUpperCase() + s.slice(1) + (/[.!?]$/.test(s) ? "" : ".");
  }

  function nearBottom() {
    return msgsEl.scrollHeight - msgsEl.scrollTop - msgsEl.clientHeight < 48;
  }
  // The button to the latest message shows while the reader is well
  // above it (the answer goes on streaming below without moving them).
  function updateToBottom() {
    $("to-bottom").hidden = msgsEl.scrollHeight - msgsEl.scrollTop - msgsEl.clientHeight < 200;
  }
  msgsEl.addEventListener("scroll", () => {
    follow = nearBottom();
    updateToBottom();
  });
  function scrollDown(force) {
    if (force || follow) msgsEl.scrollTop = msgsEl.scrollHeight;
    updateToBottom();
  }
  $("to-bottom").addEventListener("click", () => {
    follow = true;
    scrollDown(true);
    input.focus();
  });

  // setTitle shows the open chat's title above it and in the window's
  // (the tab's) title.
  function setTitle(title) {
    const t = title || "New chat";
    $("chat-title").textContent = t;
    document.title = t === "New chat" ? "NPU Chat" : t + " – NPU Chat";
  }

  // titleFromList takes the open chat's title from the list (the server
  // names a chat after its first message).
  function titleFromList() {
    const li = document.querySelector('#conversations li[data-id="' + conversation + '"] .conv-link');
    if (li) setTitle(li.textContent);
  }

  async function openConversation(id, push) {
    stopStreaming();
    conversation = id;
    followPlace();
    lastContext = "";
    lastUsed = 0;
    if (push) history.pushState({ id }, "", id ? "/c/" + id : "/");
    markCurrent();
    msgsEl.querySelectorAll("article.message").forEach((a) => a.remove());
    showMissing(0);
    if (!id) {
      setTitle("");
      fillChatSettings(null);
      updateExport();
      updateEmpty();
      input.focus();
      return;
    }
    try {
      const c = await api("GET", "/api/conversations/" + id);
      setTitle(c.title);
      for (const m of c.messages) msgsEl.insertBefore(messageEl(m), $("empty"));
      fillChatSettings(c);
      updateExport();
      updateEmpty();
      scrollDown(true);
      // Ready to type the next message (not on a phone, where the
      // keyboard would cover the chat just opened).
      if (!window.matchMedia("(max-width: 720px)").matches) input.focus();
      return true;
    } catch (e) {
      if (e.status !== 404) showError("Could not open the conversation: " + e.message);
      return e.status === 404 ? false : true;
    }
  }

  // showMissing says, in the empty chat, that chat id does not exist
  // (a link to a deleted chat); 0 puts the usual greeting back.
  function showMissing(id) {
    const t = $("empty-title");
    if (!t) return;
    t.textContent = id ? "There is no chat number " + id : "What can I help you with?";
    if (id) t.setAttribute("data-testid", "missing");
    else t.removeAttribute("data-testid");
    $("empty-missing").textContent = id ? "It may have been deleted. What you write below starts a new chat." : "";
    $("empty-missing").hidden = !id;
  }

  function updateExport() {
    for (const [id, fmt] of [["export-md", "md"], ["export-json", "json"]]) {
      const a = $(id);
      a.hidden = !conversation;
      a.href = conversation ? "/api/conversations/" + conversation + "/export?format=" + fmt : "#";
    }
  }

  // exportConversation downloads the export through fetch, so that the
  // API key goes in the Authorization header (never in a URL), and saves
  // it from a Blob under the server's file name.
  async function exportConversation(e) {
    const a = e.currentTarget;
    e.preventDefault();
    if (!conversation) return;
    showError("");
    try {
      const r = await fetch(a.getAttribute("href"), { headers: headers() });
      if (!r.ok) {
        const data = await r.json().catch(() => ({}));
        const err = new Error(refusal(r, data, "export"));
        throw err;
      }
      const disp = r.headers.get("Content-Disposition") || "";
      // filename* (UTF-8, the chat's title) first, then the ASCII filename.
      const utf = /filename\*=UTF-8''([^;]+)/i.exec(disp);
      const m = /filename="([^"]+)"/.exec(disp);
      let name = m ? m[1] : "npuchat-conversation-" + conversation;
      if (utf) { try { name = decodeURIComponent(utf[1]); } catch { /* keep the ASCII name */ } }
      const url = URL.createObjectURL(await r.blob());
      const save = document.createElement("a");
      save.href = url;
      save.download = name;
      save.hidden = true;
      document.body.appendChild(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (err) {
      showError("Could not export the chat: " + (err instanceof TypeError ? "NPU Chat cannot be reached (is it still running?)." : err.message));
    }
  }
  $("export-md").addEventListener("click", exportConversation);
  $("export-json").addEventListener("click", exportConversation);

  // refusal explains, for a person, why the server refused a request,
  // and what to do about it.
  function refusal(r, data, what) {
    const msg = (data && data.error && (data.error.message || data.error)) || "";
    switch (r.status) {
      case 401:
        if (!r.headers.get("WWW-Authenticate")) return lockedText();
        return "This NPU Chat server needs an API key, and the one this page has is missing or wrong. Reload the page to enter it.";
      case 413:
        return "The " + what + " is too large for the server (it takes at most 8 MiB). Shorten it and try again.";
      case 429: {
        const after = Number(r.headers.get("Retry-After")) || 0;
        return "NPU Chat is busy: too many requests are waiting for the model. Try again " + (after ? "in " + after + " s" : "in a moment") + ".";
      }
      case 503:
        return (msg || "The model is not available") + (/[.!?]$/.test(msg) ? "" : ".");
      default:
        return msg || "The server answered " + r.status + ".";
    }
  }

  // ---- Conversation list ----
  // mark puts text into el with every occurrence of the words searched
  // for in <mark> (text nodes only: the text never becomes markup).
  function mark(el, text, words) {
    el.replaceChildren();
    const ws = words.filter((w) => w).map((w) => w.toLowerCase());
    if (!ws.length) {
      el.textContent = text;
      return;
    }
    const low = text.toLowerCase();
    let at = 0;
    while (at < text.length) {
      let best = -1;
      let len = 0;
      for (const w of ws) {
        const k = low.indexOf(w, at);
        if (k >= 0 && (best < 0 || k < best || (k === best && w.length > len))) {
          best = k;
          len = w.length;
        }
      }
      if (best < 0) break;
      if (best > at) el.append(text.slice(at, best));
      const m = document.createElement("mark");
      m.textContent = text.slice(best, best + len);
      el.append(m);
      at = best + len;
    }
    if (at < text.length) el.append(text.slice(at));
  }

  function convItem(c, words) {
    const li = document.createElement("li");
    li.className = "conversation";
    li.dataset.id = c.id;
    li.setAttribute("aria-current", String(c.id === conversation));
    const a = document.createElement("a");
    a.className = "conv-link";
    a.href = "/c/" + c.id;
    a.tabIndex = -1;
    mark(a, c.title || "New chat", words || []);
    li.appendChild(a);
    // A match in the title is shown by the title itself.
    if (c.snippet && c.snippet.trim() !== (c.title || "").trim()) {
      const s = document.createElement("span");
      s.className = "snippet";
      mark(s, c.snippet, words || []);
      li.appendChild(s);
    }
    const acts = document.createElement("span");
    acts.className = "conv-actions";
    for (const [cls, label, glyph, key] of [["rename", "Rename ", "✎", "F2"], ["delete", "Delete ", "✕", "Delete"]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "icon " + cls;
      // Reached with the arrow keys from the chat (or its key), not Tab:
      // the list is one Tab stop.
      b.tabIndex = -1;
      b.setAttribute("aria-label", label + (c.title || "New chat"));
      b.setAttribute("aria-keyshortcuts", key);
      b.title = label.trim() + " (" + key + ")";
      b.textContent = glyph;
      acts.appendChild(b);
    }
    li.appendChild(acts);
    return li;
  }

  // dateGroup names the group of a chat last active at t: Today,
  // Yesterday, Last 7 days, Last 30 days, or its month.
  function dateGroup(t, now) {
    const day = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
    const days = Math.round((day(now) - day(t)) / 86400000);
    if (days <= 0) return "Today";
    if (days === 1) return "Yesterday";
    if (days < 7) return "Last 7 days";
    if (days < 30) return "Last 30 days";
    return t.toLocaleDateString(undefined, { year: "numeric", month: "long" });
  }

  async function loadList() {
    const q = $("search").value.trim();
    try {
      const r = await api("GET", "/api/conversations" + (q ? "?q=" + encodeURIComponent(q) : ""));
      const words = q ? q.split(/[^\p{L}\p{N}_']+/u).filter((w) => w) : [];
      const items = [];
      let group = "";
      const now = new Date();
      for (const c of r.conversations) {
        // Search results are one list, by relevance of their time too;
        // the whole list is grouped by date.
        if (!q) {
          const g = dateGroup(new Date(c.updated_at), now);
          if (g !== group) {
            group = g;
            const li = document.createElement("li");
            li.className = "conv-group";
            li.setAttribute("data-testid", "conv-group");
            const h = document.createElement("h2");
            h.textContent = g;
            li.appendChild(h);
            items.push(li);
          }
        }
        items.push(convItem(c, words));
      }
      const focusedId = document.activeElement && document.activeElement.closest && document.activeElement.closest("#conversations li.conversation");
      $("conversations").replaceChildren(...items);
      if (!r.conversations.length && q) {
        const li = document.createElement("li");
        li.className = "none";
        li.textContent = "No chat contains “" + q + "”.";
        $("conversations").appendChild(li);
      }
      rovingStop(focusedId ? Number(focusedId.dataset.id) : null);
    } catch (e) {
      if (e.code === "history_locked" || e.code === "history_unavailable") showHistoryProblem(e.message);
    }
  }

  // rovingStop makes one chat of the list its Tab stop: the open one,
  // else the first (or id's, when given).
  function rovingStop(id) {
    const links = [...document.querySelectorAll("#conversations a.conv-link")];
    if (!links.length) return;
    let stop = links.find((l) => Number(l.closest("li").dataset.id) === (id || conversation));
    if (!stop) stop = links[0];
    for (const l of links) l.tabIndex = l === stop ? 0 : -1;
    if (id && document.activeElement === document.body) stop.focus();
  }

  // The chat list from the keyboard: Up and Down (Home, End) move from
  // chat to chat, Right and Left between a chat and its buttons, F2
  // renames, Delete deletes.
  $("conversations").addEventListener("keydown", (e) => {
    const li = e.target.closest("li.conversation");
    if (!li) return;
    const links = [...document.querySelectorAll("#conversations a.conv-link")];
    const here = li.querySelector("a.conv-link");
    const i = links.indexOf(here);
    const go = (l) => {
      if (!l) return;
      e.preventDefault();
      for (const x of links) x.tabIndex = x === l ? 0 : -1;
      l.focus();
    };
    const inRow = [here, ...li.querySelectorAll(".conv-actions button")];
    const k = inRow.indexOf(e.target);
    switch (e.key) {
      case "ArrowDown":
        go(links[i + 1]);
        break;
      case "ArrowUp":
        go(links[i - 1]);
        break;
      case "Home":
        go(links[0]);
        break;
      case "End":
        go(links[links.length - 1]);
        break;
      case "ArrowRight":
        if (k >= 0 && k < inRow.length - 1) {
          e.preventDefault();
          inRow[k + 1].focus();
        }
        break;
      case "ArrowLeft":
        if (k > 0) {
          e.preventDefault();
          inRow[k - 1].focus();
        }
        break;
      case "F2":
        e.preventDefault();
        li.querySelector("button.rename").click();
        break;
      case "Delete":
        e.preventDefault();
        li.querySelector("button.delete").click();
        break;
    }
  });

  // Ctrl+K (Cmd+K on a Mac) searches the chats, from anywhere.
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "k" && !document.querySelector("dialog[open]")) {
      e.preventDefault();
      if (window.matchMedia("(max-width: 720px)").matches && !document.body.classList.contains("sidebar-open")) $("menu").click();
      $("search").focus();
      $("search").select();
    }
  });

  function markCurrent() {
    document.querySelectorAll("#conversations li.conversation").forEach((li) => li.setAttribute("aria-current", String(Number(li.dataset.id) === conversation)));
    rovingStop(null);
  }

  $("conversations").addEventListener("click", async (e) => {
    const li = e.target.closest("li.conversation");
    if (!li) return;
    const id = Number(li.dataset.id);
    if (e.target.closest("a.conv-link")) {
      e.preventDefault();
      closeSidebar();
      showView("chat");
      openConversation(id, true);
      return;
    }
    if (e.target.closest("button.rename")) {
      const old = li.querySelector(".conv-link").textContent;
      const title = await ask({
        title: "Rename chat", label: "New name", value: old, confirm: "Rename",
        check: (v) => (v.trim() ? "" : "Write a name, or Cancel to keep “" + old + "”."),
      });
      if (title !== null) {
        try {
          await api("PATCH", "/api/conversations/" + id, { title: title.trim() });
          if (id === conversation) setTitle(title.trim());
          await loadList();
        } catch (err) {
          showError("Could not rename: " + err.message);
        }
      }
      focusConversation(id, "button.rename");
      return;
    }
    if (e.target.closest("button.delete")) {
      const name = li.querySelector(".conv-link").textContent;
      const ok = await ask({
        title: "Delete chat", text: ["Delete the chat “", name, "” and all its messages? This cannot be undone."],
        confirm: "Delete", danger: true,
      });
      if (ok === null) {
        focusConversation(id, "button.delete");
        return;
      }
      try {
        await api("DELETE", "/api/conversations/" + id);
        if (id === conversation) await openConversation(null, true);
        await loadList();
      } catch (err) {
        showError("Could not delete: " + err.message);
      }
      focusConversation(id, "button.delete");
    }
  });

  // focusConversation gives the focus back after a dialog: to the same
  // button of the (re-rendered) entry, or, when it is gone, to the
  // search box.
  function focusConversation(id, sel) {
    const b = document.querySelector('#conversations li[data-id="' + id + '"] ' + sel);
    (b || $("search")).focus();
  }

  // ask shows a modal in-page dialog and resolves to the text entered
  // (with a label), true (without), or null when cancelled (Cancel,
  // Escape). It is built with createElement and textContent only: the
  // titles it shows are the user's (or a model's) text. opts: title,
  // text (a string or a list of strings), label and value (a text
  // field), check (returns why a value cannot be used, or ""), confirm
  // (the button's label), danger.
  function ask(opts) {
    return new Promise((resolve) => {
      const back = document.activeElement;
      const d = document.createElement("dialog");
      d.className = "ask";
      d.setAttribute("data-testid", "dialog");
      const form = document.createElement("form");
      form.method = "dialog";
      const h = document.createElement("h2");
      h.id = "ask-title";
      h.textContent = opts.title;
      d.setAttribute("aria-labelledby", "ask-title");
      form.appendChild(h);
      if (opts.text) {
        const p = document.createElement("p");
        p.id = "ask-text";
        p.append(...[].concat(opts.text));
        d.setAttribute("aria-describedby", "ask-text");
        form.appendChild(p);
      }
      let field = null;
      const note = document.createElement("p");
      note.className = "error-text";
      note.setAttribute("role", "alert");
      note.hidden = true;
      if (opts.label !== undefined) {
        const l = document.createElement("label");
        l.textContent = opts.label + " ";
        field = document.createElement("input");
        field.type = opts.secret ? "password" : "text";
        field.value = opts.value || "";
        field.autocomplete = "off";
        field.setAttribute("data-testid", "dialog-input");
        l.appendChild(field);
        form.append(l, note);
      }
      const row = document.createElement("div");
      row.className = "ask-buttons";
      const cancel = document.createElement("button");
      cancel.type = "button";
      cancel.className = "btn";
      cancel.textContent = "Cancel";
      cancel.setAttribute("data-testid", "dialog-cancel");
      const ok = document.createElement("button");
      ok.type = "submit";
      ok.className = "btn " + (opts.danger ? "danger" : "primary");
      ok.textContent = opts.confirm || "OK";
      ok.setAttribute("data-testid", "dialog-confirm");
      row.append(cancel, ok);
      form.appendChild(row);
      d.appendChild(form);
      document.body.appendChild(d);
      let result = null;
      const done = (v) => {
        result = v;
        d.close();
      };
      cancel.addEventListener("click", () => done(null));
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        if (field && opts.check) {
          const why = opts.check(field.value);
          if (why) {
            note.textContent = why;
            note.hidden = false;
            field.focus();
            return;
          }
        }
        done(field ? field.value : true);
      });
      // Escape fires "cancel" and closes the dialog: result stays null.
      d.addEventListener("close", () => {
        d.remove();
        if (back && back.isConnected) back.focus();
        resolve(result);
      });
      d.showModal();
      if (field) {
        field.focus();
        field.select();
      } else {
        (opts.danger ? cancel : ok).focus();
      }
    });
  }

  let searchTimer = 0;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(loadList, 200);
  });

  $("new-chat").addEventListener("click", () => {
    closeSidebar();
    showView("chat");
    openConversation(null, true);
  });

  window.addEventListener("popstate", () => {
    const m = /^\/c\/(\d+)$/.exec(location.pathname);
    openConversation(m ? Number(m[1]) : null, false);
  });

  // ---- Sending and streaming ----
  function setBusy(busy) {
    sendBtn.hidden = busy;
    stopBtn.hidden = !busy;
    app.dataset.busy = busy ? "true" : "false";
  }

  function stopStreaming() {
    if (streaming) streaming.abort.abort();
  }

  // ensureConversation returns the open chat's id, making the chat
  // first for a new one. When signal is aborted meanwhile (another chat
  // was opened), the chat just made, still empty, is deleted again and
  // the page stays where the reader went.
  async function ensureConversation(signal) {
    if (conversation) return conversation;
    // A chat started with files is named after what was typed (or the
    // files), not after the files' text the message holds.
    const title = attached.length ? (input.value.trim().split("\n")[0] || attached.map((f) => f.name).join(", ")) : "";
    const c = await api("POST", "/api/conversations", title ? { title } : {});
    if (signal && signal.aborted) {
      api("DELETE", "/api/conversations/" + c.id).then(loadList, () => {});
      throw new DOMException("another chat was opened", "AbortError");
    }
    conversation = c.id;
    history.pushState({ id: c.id }, "", "/c/" + c.id);
    updateExport();
    return c.id;
  }

  // dropEmptyChat deletes the chat id, made for a message the server
  // refused, and goes back to a new chat.
  async function dropEmptyChat(id) {
    try {
      await api("DELETE", "/api/conversations/" + id);
    } catch (_) {
      return;
    }
    if (conversation === id) {
      conversation = null;
      history.replaceState(null, "", "/");
      updateExport();
    }
  }

  // unreachable is what the page says when the server cannot be reached.
  const unreachable = "NPU Chat cannot be reached: is it still running? Start it again, then send.";
  // missingText and installAction: the banner when the model is not
  // installed (the message stays in the chat; Install opens the view).
  const missingText = () => modelName + " is not installed yet, so nothing can answer. Your message is kept: install the model, then press Answer under it.";
  const installAction = () => ({ label: "Install " + modelName, run: () => showView("install") });

  // problemText makes a server's error a sentence a person understands:
  // the last, most specific part of it, or what a known cause means.
  function problemText(msg) {
    const m = String(msg || "");
    if (/connection refused|no such host|i\/o timeout|dial tcp|connection reset|EOF$/i.test(m)) {
      return status && status.backend === "remote"
        ? "The remote server NPU Chat answers through does not respond. Check that it is running."
        : "The engine stopped answering.";
    }
    return firstSentence(m || "the answer failed");
  }

  // send posts to the conversation and renders the streamed answer.
  // composed is the composer's text when the message comes from it: the
  // composer is emptied only once the server has taken the message, so
  // that a refused one (busy, too large, no key, server down) stays
  // there to send again.
  function send(body, composed) {
    if (streaming) return Promise.resolve();
    return tracked(sendOnce(body, composed));
  }
  async function sendOnce(body, composed) {
    // Busy from the start, while a new chat is made for the message: a
    // second send meanwhile (a double click, Enter held) waits, and
    // opening another chat aborts this one.
    const abort = new AbortController();
    streaming = { abort };
    setBusy(true);
    showError("");
    const kept = composed !== undefined ? " Your message is still in the box." : "";
    let id;
    const fresh = !conversation;
    try {
      id = await ensureConversation(abort.signal);
    } catch (e) {
      if (streaming && streaming.abort === abort) {
        streaming = null;
        setBusy(false);
      }
      if (e.name !== "AbortError") showError((e instanceof TypeError ? unreachable : "Could not start a chat: " + e.message) + kept);
      return;
    }
    follow = true;
    let answerEl = null;
    let raw = "";
    let thinkRaw = "";
    let thinkClosed = false;
    let pending = false;
    const paint = () => {
      pending = false;
      if (!answerEl) return;
      // The thinking streams in its own section, open until the answer
      // starts.
      if (thinkRaw) {
        let d = answerEl.querySelector("details.thinking");
        if (!d) {
          d = thinkingEl("", true);
          answerEl.insertBefore(d, answerEl.querySelector(".body"));
        }
        const tb = d.querySelector(".thinking-body");
        tb.dataset.raw = thinkRaw;
        renderMarkdown(tb, thinkRaw);
        if (raw && !thinkClosed) {
          thinkClosed = true;
          d.open = false;
          d.querySelector("summary").textContent = "Thinking";
        }
      }
      const b = answerEl.querySelector(".body");
      b.dataset.raw = raw;
      renderMarkdown(b, raw);
      scrollDown();
    };
    const onEvent = (name, data) => {
      if (name === "user") {
        const existing = msgsEl.querySelector('article.message[data-id="' + data.id + '"]');
        if (!existing) msgsEl.insertBefore(messageEl(data), $("empty"));
        updateEmpty();
        scrollDown(true);
        // A new chat is named after its first message: show it now.
        loadList().then(titleFromList);
      } else if (name === "start") {
        answerEl = messageEl(data);
        answerEl.dataset.cut = "false";
        answerEl.querySelector(".cut") && answerEl.querySelector(".cut").remove();
        answerEl.classList.add("streaming");
        // Screen readers wait for the whole answer instead of reading
        // every piece as it arrives.
        answerEl.setAttribute("aria-busy", "true");
        msgsEl.insertBefore(answerEl, $("empty"));
        scrollDown();
      } else if (name === "thinking" || name === "token") {
        if (name === "thinking") thinkRaw += data.text;
        else raw += data.text;
        if (!pending) {
          pending = true;
          requestAnimationFrame(paint);
        }
      } else if (name === "done") {
        messageEl(data, answerEl);
        answerEl.classList.remove("streaming");
        answerEl.removeAttribute("aria-busy");
        answerEl = null;
        updateEmpty();
        scrollDown();
        // the KV cache the status line shows holds this prompt now
        if (status && status.cache) refreshStatus();
      } else if (name === "error") {
        if (data.answer && answerEl) messageEl(data.answer, answerEl);
        else if (answerEl) answerEl.remove();
        const unanswered = !data.answer;
        answerEl = null;
        if (status && notInstalled(status)) {
          showError(missingText(), { kind: "missing", detail: data.message, action: installAction() });
        } else if (status && !status.enabled) {
          showError("The model is switched off. Switch it on with the switch at the top right, then press Answer under your message.", { kind: "off" });
        } else {
          showError(problemText(data.message) + (unanswered ? " Press Answer under your message to try again." : ""), { detail: data.message });
        }
      }
    };
    try {
      const r = await fetch("/api/conversations/" + id + "/messages", {
        method: "POST", headers: headers(), body: JSON.stringify(body), signal: abort.signal,
      });
      if (!r.ok) {
        const data = await r.json().catch(() => ({}));
        // A chat made for this message and left empty goes again: no
        // "New chat" with nothing in it stays in the list.
        if (fresh && r.status !== 401) await dropEmptyChat(id);
        // A refused regenerate or edit changed nothing on the server, but
        // the view had dropped the messages it was to replace: show them
        // again, and an edit open again with its text.
        if (!fresh && (body.regenerate || body.edit)) await reloadMessages(id, body.edit ? body : null);
        throw new Error(sentence(refusal(r, data, "message")) + kept + (body.edit ? " Your edit is still in its box." : ""));
      }
      // (A line break typed after it, as a separate "char" event that
      // keydown's preventDefault does not stop, still counts as it.)
      if (composed !== undefined && input.value.replace(/\n$/, "") === composed) {
        input.value = "";
        autosize();
      }
      if (composed !== undefined && attached.length) {
        attached = [];
        renderAttachments();
      }
      await readSSE(r.body, onEvent);
    } catch (e) {
      if (e.name !== "AbortError") showError(e instanceof TypeError ? (answerEl ? "The connection to NPU Chat broke. What was shown is kept." : unreachable + kept) : e.message);
    } finally {
      if (answerEl) {
        // Stopped (or the connection broke): the server stored what was
        // sent, marked as cut; show it the same way.
        paint();
        answerEl.classList.remove("streaming");
        answerEl.removeAttribute("aria-busy");
        answerEl.dataset.cut = "true";
        const c = document.createElement("div");
        c.className = "cut";
        c.setAttribute("data-testid", "cut");
        c.textContent = cutText(abort.signal.aborted ? "stopped" : "");
        answerEl.insertBefore(c, answerEl.querySelector(".stats"));
      }
      streaming = null;
      setBusy(false);
      updateEmpty();
      loadList().then(titleFromList);
      // (An edit the server refused is open again, with the focus.)
      if (!msgsEl.querySelector(".edit-form")) input.focus();
    }
  }

  // reloadMessages shows the messages of the chat id as the server has
  // them, and, with edit ({edit, content}), that message's edit form
  // again with the edited text.
  async function reloadMessages(id, edit) {
    let c;
    try {
      c = await api("GET", "/api/conversations/" + id);
    } catch (_) {
      return;
    }
    if (conversation !== id) return;
    showMessages(c.messages);
    const art = edit && msgsEl.querySelector('article.message[data-id="' + edit.edit + '"]');
    if (art) editMessage(art, edit.content);
  }

  // readSSE parses a server-sent event stream from a fetch body.
  async function readSSE(stream, onEvent) {
    const reader = stream.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const chunk = buf.slice(0, k);
        buf = buf.slice(k + 2);
        let name = "message";
        const data = [];
        for (const line of chunk.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  // ---- Attachments: text files put into the message ----
  // Each file's text goes into the message under its name, in a code
  // fence longer than any in it; the whole is counted against the
  // model's context before it is sent (about 3 bytes a token, on the
  // safe side), so that a chat does not overflow unseen.
  let attached = []; // {name, text, size}
  const maxFile = 512 * 1024;
  const estimate = (s) => Math.ceil(new TextEncoder().encode(s).length / 3);
  function fence(text) {
    const runs = text.match(/`{3,}/g) || [];
    const n = Math.max(3, ...runs.map((r) => r.length + 1));
    return "`".repeat(n);
  }
  function withFiles(text) {
    let s = text.trim();
    for (const f of attached) {
      const fc = fence(f.text);
      s += (s ? "\n\n" : "") + "File: " + f.name + "\n" + fc + "\n" + f.text.replace(/\n$/, "") + "\n" + fc;
    }
    return s;
  }
  function renderAttachments() {
    const box = $("attachments");
    box.replaceChildren();
    attached.forEach((f, i) => {
      const c = document.createElement("span");
      c.className = "chip";
      c.setAttribute("data-testid", "chip");
      const n = document.createElement("span");
      n.className = "chip-name";
      n.textContent = f.name;
      const z = document.createElement("span");
      z.className = "chip-size";
      z.textContent = (f.pages ? f.pages + (f.pages === 1 ? " page, " : " pages, ") : "") + "about " + estimate(f.text) + " tokens" + (f.truncated ? " (cut)" : "");
      const x = document.createElement("button");
      x.type = "button";
      x.className = "icon";
      x.setAttribute("aria-label", "Remove " + f.name);
      x.textContent = "✕";
      x.addEventListener("click", () => {
        attached.splice(i, 1);
        renderAttachments();
        input.focus();
      });
      c.append(n, " ", z, x);
      box.appendChild(c);
    });
    box.hidden = !attached.length;
  }
  async function addFiles(files) {
    for (const f of files) {
      if (window.NPUPdf && NPUPdf.isPDF(f)) {
        try {
          attached.push(await NPUPdf.read(f, headers()));
        } catch (e) {
          showError(e.message, { kind: "attach" });
        }
        continue;
      }
      if (f.size > maxFile) {
        showError("“" + f.name + "” is larger than 512 KB: attach a smaller text file, or the part of it that matters.");
        continue;
      }
      const bytes = new Uint8Array(await f.arrayBuffer());
      if (bytes.includes(0)) {
        showError("“" + f.name + "” is not a text file: only text and code files can be attached.");
        continue;
      }
      attached.push({ name: f.name, text: new TextDecoder().decode(bytes), size: f.size });
    }
    renderAttachments();
    input.focus();
  }
  $("attach-input").addEventListener("change", (e) => {
    addFiles([...e.target.files]);
    e.target.value = "";
  });
  $("composer").addEventListener("dragover", (e) => {
    if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) {
      e.preventDefault();
      $("composer").classList.add("dropping");
    }
  });
  $("composer").addEventListener("dragleave", () => $("composer").classList.remove("dropping"));
  $("composer").addEventListener("drop", (e) => {
    $("composer").classList.remove("dropping");
    if (!e.dataTransfer || !e.dataTransfer.files.length) return;
    e.preventDefault();
    addFiles([...e.dataTransfer.files]);
  });

  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value;
    if ((!text.trim() && !attached.length) || streaming) return;
    const content = attached.length ? withFiles(text) : text;
    const limit = status && status.info && status.info.context_length;
    if (attached.length && limit) {
      const need = lastUsed + estimate(content);
      if (need > limit) {
        showError("The message and its files come to about " + estimate(content) + " tokens; with the chat so far that is more than the " + limit + " the model can read. Remove a file or shorten it.", { kind: "attach" });
        return;
      }
    }
    send({ content }, text);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  // The line break of an Enter that sent: a key event sent as keydown
  // and then a separate "char" (DevTools' Input.dispatchKeyEvent, which
  // chromedp uses) types it after keydown's preventDefault, sometimes
  // after the sent message already emptied the box.
  input.addEventListener("keypress", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) e.preventDefault();
  });
  // autosize fits the box to its text up to 40 % of the window; only
  // beyond that does it scroll (scrollHeight leaves out the borders,
  // which the border-box height holds: without them one line overflowed
  // by 2 px and showed a scrollbar).
  function autosize() {
    if (!input.value) {
      input.style.height = "";
      input.style.overflowY = "";
      return;
    }
    input.style.height = "auto";
    const want = input.scrollHeight + input.offsetHeight - input.clientHeight;
    const max = window.innerHeight * 0.4;
    input.style.height = Math.min(want, max) + "px";
    input.style.overflowY = want > max ? "auto" : "hidden";
  }
  input.addEventListener("input", autosize);
  stopBtn.addEventListener("click", stopStreaming);
  // Escape stops the answer only when it is not meant for something
  // open above the chat (a dialog, the chat list at 360 px, an edit).
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && streaming && !document.querySelector("dialog[open]") && !document.body.classList.contains("sidebar-open")) {
      e.preventDefault();
      stopStreaming();
    }
  });

  msgsEl.addEventListener("click", (e) => {
    const art = e.target.closest("article.message");
    if (!art) return;
    const ver = e.target.closest("button.version");
    if (ver) {
      if (streaming || ver.disabled) return;
      showVersion(art, Number(ver.dataset.to), ver.classList.contains("prev") ? "prev" : "next");
    } else if (e.target.closest("button.copy")) {
      MD.copyText(art.querySelector(".body").dataset.raw || "", e.target.closest("button"));
    } else if (e.target.closest("button.regenerate")) {
      if (streaming) return;
      // Drop this answer and everything after it from the view; the
      // server does the same.
      let n = art;
      while (n && n.id !== "empty") {
        const next = n.nextElementSibling;
        if (n.matches("article.message")) n.remove();
        n = next;
      }
      send({ regenerate: true });
    } else if (e.target.closest("button.answer")) {
      if (streaming) return;
      send({ regenerate: true });
    } else if (e.target.closest("button.edit")) {
      if (streaming) return;
      editMessage(art);
    }
  });

  // showVersion shows version id of the message art (the path through it,
  // as the server keeps it), and gives the focus back to the same button.
  async function showVersion(art, id, which) {
    const conv = conversation;
    try {
      const c = await api("PUT", "/api/conversations/" + conv + "/current", { message_id: id });
      if (conversation !== conv) return;
      showMessages(c.messages);
      const b = msgsEl.querySelector('article.message[data-id="' + id + '"] button.version.' + which);
      if (b && !b.disabled) b.focus();
      else {
        const any = msgsEl.querySelector('article.message[data-id="' + id + '"] button.version:not([disabled])');
        if (any) any.focus();
      }
    } catch (err) {
      showError("Could not show that version: " + (err instanceof TypeError ? unreachable : err.message));
    }
  }

  // showMessages replaces the shown messages with msgs.
  function showMessages(msgs) {
    lastContext = "";
    lastUsed = 0;
    msgsEl.querySelectorAll("article.message").forEach((a) => a.remove());
    for (const m of msgs) msgsEl.insertBefore(messageEl(m), $("empty"));
    updateEmpty();
  }

  // editMessage opens art's edit form, with text (the message's own
  // when undefined).
  function editMessage(art, text) {
    const body = art.querySelector(".body");
    const old = text !== undefined ? text : body.dataset.raw || "";
    const form = document.createElement("form");
    form.className = "edit-form";
    const ta = document.createElement("textarea");
    ta.value = old;
    ta.setAttribute("aria-label", "Edit your message");
    ta.rows = Math.min(10, old.split("\n").length + 1);
    const save = document.createElement("button");
    save.type = "submit";
    save.className = "btn primary";
    save.textContent = "Send";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "btn";
    cancel.textContent = "Cancel";
    form.append(ta, save, cancel);
    body.replaceWith(form);
    // The message's own buttons wait while it is edited.
    art.classList.add("editing");
    ta.focus();
    const close = () => {
      form.replaceWith(body);
      art.classList.remove("editing");
      art.querySelector("button.edit").focus();
    };
    cancel.addEventListener("click", close);
    ta.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        form.requestSubmit();
      } else if (e.key === "Escape") {
        e.stopPropagation();
        close();
      }
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!ta.value.trim()) return;
      const id = Number(art.dataset.id);
      let n = art;
      while (n && n.id !== "empty") {
        const next = n.nextElementSibling;
        if (n.matches("article.message")) n.remove();
        n = next;
      }
      send({ edit: id, content: ta.value });
    });
  }

  // ---- Chat settings ----
  function fillChatSettings(c) {
    $("open-chat-settings").hidden = false;
    $("cs-system").value = (c && c.system_prompt) || "";
    $("cs-temperature").value = c && c.temperature != null ? c.temperature : "";
    $("cs-top-p").value = c && c.top_p != null ? c.top_p : "";
    $("cs-max-tokens").value = c && c.max_tokens != null ? c.max_tokens : "";
    $("cs-thinking").value = c && c.thinking != null ? (c.thinking ? "on" : "off") : "";
    $("cs-context").value = c && c.context_length != null ? c.context_length : "";
    $("cs-note").textContent = "";
    chatContextNote();
  }
  // The chat's context length, with the KV memory it takes beside it
  // (as the Settings view's context length) and, when it is longer than
  // the loaded model holds, what the chat gets: the engine clamps it.
  let chatKV = null; // /api/settings' kv: bytes per token, block, the context loaded
  async function loadChatKV() {
    try {
      chatKV = (await api("GET", "/api/settings")).kv || null;
    } catch (_) {
      chatKV = null;
    }
    chatContextNote();
  }
  function chatContextNote() {
    const out = $("cs-context-kv");
    const field = $("cs-context");
    const int = (n) => Math.round(n).toLocaleString("en-US");
    const raw = field.value.trim();
    const n = parseInt(raw, 10);
    // the context of the model on now (none when it is off)
    const on = status && status.state === "on";
    const loaded = on ? (status.info && status.info.context_length) || (chatKV && chatKV.loaded && chatKV.context) || 0 : 0;
    const memory = (tokens) => {
      if (!chatKV || !chatKV.bytes_per_token || !tokens) return "";
      const block = chatKV.block || 1;
      return aboutBytes(Math.ceil(tokens / block) * block * chatKV.bytes_per_token) + " of memory for its keys and values";
    };
    out.classList.remove("clamped");
    field.removeAttribute("aria-invalid");
    if (raw === "") {
      const m = memory(loaded);
      out.textContent = loaded ? "Empty: the loaded model's context, " + int(loaded) + " tokens" + (m ? " (" + m + ")" : "") + "." : "Empty: the loaded model's context.";
      return;
    }
    if (!Number.isInteger(Number(raw)) || n < 64 || n > 1048576) {
      out.textContent = "Write a whole number of tokens from 64 to 1,048,576, or leave it empty for the model's context.";
      field.setAttribute("aria-invalid", "true");
      return;
    }
    if (loaded && n > loaded) {
      const m = memory(loaded);
      out.textContent = "The model on now holds " + int(loaded) + " tokens: this chat gets " + int(loaded) + (m ? " (" + m + ")" : "") + ", not " + int(n) + ".";
      out.classList.add("clamped");
      return;
    }
    const most = chatKV && chatKV.model_max;
    if (!loaded && most && n > most) {
      const m = memory(most);
      out.textContent = chatKV.model + " holds at most " + int(most) + " tokens: this chat gets " + int(most) + (m ? " (" + m + ")" : "") + ", not " + int(n) + ".";
      out.classList.add("clamped");
      return;
    }
    const m = memory(n);
    out.textContent = int(n) + " tokens" + (m ? ": " + m : loaded ? " of the " + int(loaded) + " the model on now holds" : "") + ".";
  }
  function shortBytes(n) {
    for (const [name, size] of [["GB", 1e9], ["MB", 1e6], ["KB", 1e3]]) {
      if (n >= size) {
        const v = n / size;
        return (v >= 10 ? Math.round(v) : Math.round(v * 10) / 10) + " " + name;
      }
    }
    return n + " bytes";
  }
  const aboutBytes = (n) => "about " + shortBytes(n);
  $("cs-context").addEventListener("input", chatContextNote);
  $("open-chat-settings").addEventListener("click", () => {
    const f = $("chat-settings");
    f.hidden = !f.hidden;
    $("open-chat-settings").setAttribute("aria-expanded", String(!f.hidden));
    if (!f.hidden) loadChatKV();
  });
  $("chat-settings").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { system_prompt: $("cs-system").value, clear: [] };
    for (const [field, id, parse] of [["temperature", "cs-temperature", parseFloat], ["top_p", "cs-top-p", parseFloat], ["max_tokens", "cs-max-tokens", (v) => parseInt(v, 10)], ["context_length", "cs-context", Number]]) {
      const v = $(id).value.trim();
      if (v === "") body.clear.push(field);
      else body[field] = parse(v);
    }
    const think = $("cs-thinking").value;
    if (think === "") body.clear.push("thinking");
    else body.thinking = think === "on";
    try {
      const id = await ensureConversation();
      await api("PATCH", "/api/conversations/" + id, body);
      $("cs-note").textContent = "Saved.";
      loadList();
    } catch (err) {
      $("cs-note").textContent = err.message;
      if (err.param === "context_length") {
        // the error at its field
        $("cs-context").setAttribute("aria-invalid", "true");
        $("cs-context-kv").textContent = err.message;
        $("cs-context").focus();
      }
    }
  });

  // ---- Status and the model switch ----
  function firstSentence(text) {
    // A Go error chain "a: b: c" is turned into its last, most specific
    // part, as a sentence; the whole text stays in the tooltip. A ": "
    // inside parentheses is part of the sentence, and a last part too
    // short to say anything keeps the one before it (as web/pages does).
    const t = String(text);
    const parts = [];
    let depth = 0;
    let from = 0;
    for (let i = 0; i < t.length; i++) {
      const c = t[i];
      if (c === "(" || c === "[") depth++;
      else if ((c === ")" || c === "]") && depth > 0) depth--;
      else if (c === ":" && t[i + 1] === " " && depth === 0) {
        parts.push(t.slice(from, i));
        from = i + 2;
      }
    }
    parts.push(t.slice(from));
    let s = parts[parts.length - 1].trim();
    if (s.length < 12 && parts.length > 1) s = parts[parts.length - 2].trim() + ": " + s;
    return sentence(s);
  }

  function notInstalled(st) {
    return /not installed/i.test((st.error || "") + " " + (st.reason || ""));
  }

  function showStatus(st) {
    // A GET /api/status answer and the events may arrive in either
    // order: never show an older status over a newer one (seq grows
    // with every event the server sends).
    if (status && typeof st.seq === "number" && typeof status.seq === "number" && st.seq < status.seq) return;
    status = st;
    if (!reachable) setReachable(true);
    const el = $("model-status");
    const name = st.model || modelName;
    if (st.model) modelName = st.model;
    let text;
    let detail = "";
    switch (st.state) {
      case "on":
        text = name + " is ready.";
        break;
      case "loading": {
        const p = st.progress;
        text = "Loading " + name + (p && p.frac ? " (" + Math.round(p.frac * 100) + "%)" : "") + "…";
        break;
      }
      case "error":
        text = notInstalled(st) ? name + " is not installed yet." : problemText(st.error || "the model failed to load");
        detail = st.error || "";
        break;
      default:
        if (!st.enabled) text = name + " is switched off.";
        else if (notInstalled(st)) text = name + " is not installed yet.";
        else text = name + " loads with your first message.";
        detail = st.reason || "";
    }
    if (notInstalled(st) && installState() === "running") text = "Installing " + (Install.model() || name) + "…";
    // A banner about a state goes when the state is over (the model is on).
    if ((errorKind === "off" && st.enabled) || (errorKind === "missing" && st.state === "on")) showError("");
    el.dataset.state = st.state;
    $("status-text").textContent = text;
    // The thinking switch is offered where the model's template takes it.
    $("cs-thinking-row").hidden = !(st.info && (st.info.capabilities || []).includes("thinking"));
    $("empty-note").textContent = st.backend === "remote"
      ? "Answers come from the remote server NPU Chat was started with; your chats stay on this computer."
      : "Answers are computed on this computer, and your chats stay here.";
    el.title = detail;
    let eng = st.backend ? "on " + engineName(st.backend) : "";
    if (st.fallback) eng += (eng ? " · " : "") + "fell back: " + firstSentence(cleanDetail(st.fallback));
    // What the KV cache holds (the CPU engine's): tokens and memory, the
    // rest in the tooltip.
    const c = st.state === "on" && st.cache;
    $("status-engine").title = "";
    if (c && c.tokens > 0) {
      eng += (eng ? " · " : "") + "KV cache: " + c.tokens.toLocaleString("en-US") + " tokens, " + shortBytes(c.bytes);
      $("status-engine").title = c.sequences + (c.sequences === 1 ? " prompt" : " prompts") + " kept in memory (" + shortBytes(c.bytes) + " of a budget of " + shortBytes(c.budget) + ")" +
        (c.kv_type ? ", keys and values as " + c.kv_type : "") +
        (c.disk_files > 0 ? "; " + c.disk_files + (c.disk_files === 1 ? " file" : " files") + " on disk (" + shortBytes(c.disk_bytes) + ")" : "");
    }
    $("status-engine").textContent = eng;
    const on = st.enabled && st.state !== "error";
    const t = $("model-toggle");
    // Nothing to switch on before the model is installed: the switch
    // shows off and waits (the install starts the model when it ends).
    const missing = notInstalled(st);
    t.setAttribute("aria-checked", String(!!st.enabled && !missing));
    t.setAttribute("aria-label", missing ? "Model not installed yet" : st.enabled ? "Model on; switch it off" : "Model off; switch it on");
    t.title = missing ? "Install the model first" : "";
    t.disabled = toggling || missing;
    t.dataset.on = on ? "true" : "false";
    // The install view greets a page opened without the model (once: a
    // chat opened later stays, with a banner when something is sent).
    if (notInstalled(st) && currentView === "chat" && !greeted && !conversation) showView("install");
    greeted = true;
    if (!notInstalled(st) && currentView === "install" && installState() !== "running") showView("chat");
  }

  // reachable: whether the server answered the last status request.
  // While it does not, the dot, the switch and a banner say so (one
  // state), and the page asks again every 2 s; the first answer clears
  // the banner.
  let reachable = true;
  let reachTimer = 0;
  function setReachable(ok, why) {
    const was = reachable;
    reachable = ok;
    clearTimeout(reachTimer);
    if (!ok) {
      const el = $("model-status");
      el.dataset.state = "unreachable";
      el.title = why || "";
      $("status-text").textContent = "NPU Chat cannot be reached.";
      $("status-engine").textContent = "";
      const t = $("model-toggle");
      t.disabled = true;
      t.setAttribute("aria-checked", "false");
      t.dataset.on = "false";
      t.setAttribute("aria-label", "NPU Chat cannot be reached; the model cannot be switched");
      if (!streaming) {
        showError("NPU Chat cannot be reached: it may have stopped. Start it again; this page reconnects by itself.", { kind: "unreachable", detail: why });
      }
      reachTimer = setTimeout(refreshStatus, 2000);
    } else if (!was) {
      if (errorKind === "unreachable") showError("");
      // Events missed meanwhile: the list may have changed too.
      loadList();
    }
  }

  async function refreshStatus() {
    try {
      const st = await api("GET", "/api/status");
      setReachable(true);
      showStatus(st);
    } catch (e) {
      if (e instanceof TypeError) setReachable(false, e.message);
      else $("status-text").textContent = problemText(e.message);
    }
  }

  let toggling = false;
  let greeted = false;
  $("model-toggle").addEventListener("click", async () => {
    const t = $("model-toggle");
    toggling = true;
    t.disabled = true;
    try {
      const on = status && status.enabled;
      await api("POST", on ? "/api/model/stop" : "/api/model/start", on ? {} : { model: modelName });
      // The events may have moved on while the request ran: ask afresh
      // rather than show the answer's older snapshot.
      await refreshStatus();
    } catch (e) {
      if (e instanceof TypeError) setReachable(false, e.message);
      else showError(problemText(e.message), { detail: e.message });
      refreshStatus();
    } finally {
      toggling = false;
      t.disabled = !reachable || (!!status && notInstalled(status));
    }
  });

  let events = null;
  function connectEvents() {
    if (events) events.close();
    const es = new EventSource("/api/events" + (key() ? "?key=" + encodeURIComponent(key()) : ""));
    events = es;
    for (const name of ["status", "progress", "fallback", "error"]) {
      es.addEventListener(name, (e) => {
        const ev = JSON.parse(e.data);
        if (ev.status) showStatus(ev.status);
      });
    }
    // A chat made, renamed, answered in or deleted, here or in another
    // tab or client: the list follows.
    es.addEventListener("conversations", async () => {
      app.dataset.conversationEvents = String(Number(app.dataset.conversationEvents || 0) + 1); // for tests
      // The keyboard focus in the list stays on the same chat's control.
      const f = document.activeElement;
      const li = f && f.closest ? f.closest("#conversations li.conversation") : null;
      await loadList();
      if (li && !document.contains(f)) {
        const sel = ["button.rename", "button.delete"].find((c) => f.matches(c)) || ".conv-link";
        if (document.querySelector('#conversations li[data-id="' + li.dataset.id + '"] ' + sel)) focusConversation(li.dataset.id, sel);
      }
    });
    es.addEventListener("install", (e) => {
      // The install's status, the same value GET …/install answers,
      // with its words (install.js shows them).
      const ev = JSON.parse(e.data);
      if (ev.install) {
        // For tests: the state of the last install event the stream
        // brought (every event sent before it has been shown).
        app.dataset.installEvent = ev.install.state;
        showInstall(ev.install);
      }
    });
    // A (re)connected stream may be a restarted server, whose seq starts
    // again from 0: its first status is shown whatever the old seq was.
    es.onopen = () => {
      if (status) status = Object.assign({}, status, { seq: -1 });
    };
    es.onerror = () => {
      // The browser reconnects by itself; refresh what we show meanwhile.
      setTimeout(refreshStatus, 1000);
    };
  }

  // ---- Views ----
  function showView(name) {
    currentView = name;
    followPlace();
    for (const v of ["chat", "install", "check", "settings", "logs", "library"]) $("view-" + v).hidden = v !== name;
    if (name === "check") runCheck();
    if (name === "settings") loadSettings();
    if (name === "logs") loadLogs();
    document.dispatchEvent(new CustomEvent("npuchat:view", { detail: name }));
  }
  document.querySelectorAll("[data-view]").forEach((b) =>
    b.addEventListener("click", () => {
      closeSidebar();
      showView(b.dataset.view);
    }));
  document.querySelectorAll(".close-view").forEach((b) => b.addEventListener("click", () => showView("chat")));

  // ---- Install ----
  // The view is install.js's; the page follows its state: the status
  // line says Installing while it runs, and a finished install goes back
  // to the chat (the server switches the model on when the install it
  // was asked to finish ends; the page only shows it).
  const Install = window.NPUInstall;
  const installState = () => Install.state();
  const showInstall = (st) => Install.show(st);
  Install.init({
    api,
    model: () => modelName,
    changed(st, was) {
      if (st.state === "done" && was !== "done" && currentView === "install") refreshStatus().finally(() => showView("chat"));
      // After the start above: showStatus may leave the install view.
      if (status && st.state !== was) showStatus(status);
    },
  });

  // ---- NPU check ----
  // The check's statuses in words.
  const checkWords = { pass: "Passed", ok: "Passed", warn: "Warning", fail: "Failed", error: "Failed", skipped: "Not checked" };

  // runCheck shows the NPU check: the verdict, and that the CPU still
  // answers while the NPU is not ready; the checks that ran, each with
  // what was found, what is needed and the fix; the checks skipped for
  // one same reason as one entry that lists them.
  async function runCheck() {
    $("check-summary").textContent = "Checking the NPU…";
    $("check-list").replaceChildren();
    try {
      const rep = await api("GET", "/api/check");
      const verdict = rep.summary || (rep.ready ? "The NPU is ready." : "The NPU is not ready.");
      $("check-summary").textContent = rep.ready ? verdict : sentence(verdict) + " NPU Chat still works meanwhile: it answers on the CPU, with its own engine.";
      $("check-summary").dataset.ready = String(!!rep.ready);
      const skipped = new Map();
      const items = [];
      for (const c of rep.checks || []) {
        const st = c.status || (c.ok ? "pass" : "fail");
        if (st === "skipped") {
          const why = c.found || "";
          if (!skipped.has(why)) {
            skipped.set(why, []);
            items.push({ skipped: why });
          }
          skipped.get(why).push(c);
        } else {
          items.push({ check: c, st });
        }
      }
      for (const it of items) {
        const li = document.createElement("li");
        const head = document.createElement("div");
        head.className = "check-head";
        const badge = document.createElement("span");
        badge.className = "badge";
        const name = document.createElement("strong");
        if (it.skipped !== undefined) {
          const list = skipped.get(it.skipped);
          li.className = "check skipped";
          li.setAttribute("data-testid", "check-skipped");
          badge.textContent = checkWords.skipped;
          name.textContent = list.length === 1 ? list[0].title : list.length + " checks";
          head.append(badge, " ", name);
          li.appendChild(head);
          if (it.skipped) {
            const p = document.createElement("p");
            p.textContent = sentence(it.skipped);
            li.appendChild(p);
          }
          if (list.length > 1) {
            const d = document.createElement("details");
            const sm = document.createElement("summary");
            sm.textContent = "Which checks";
            const ul = document.createElement("ul");
            for (const c of list) {
              const x = document.createElement("li");
              x.textContent = c.title || c.id;
              ul.appendChild(x);
            }
            d.append(sm, ul);
            li.appendChild(d);
          }
          $("check-list").appendChild(li);
          continue;
        }
        const c = it.check;
        li.className = "check " + it.st;
        li.setAttribute("data-testid", "check");
        badge.textContent = checkWords[it.st] || it.st;
        name.textContent = c.title || c.id;
        head.append(badge, " ", name);
        li.appendChild(head);
        for (const [label, text] of [["Found", c.found], ["Needs", c.need]]) {
          if (!text) continue;
          const p = document.createElement("p");
          const b = document.createElement("span");
          b.className = "label";
          b.textContent = label + ": ";
          p.append(b, text);
          li.appendChild(p);
        }
        const fix = it.st === "pass" ? "" : c.fix || "";
        if (fix) {
          const p = document.createElement("p");
          p.className = "fix";
          const b = document.createElement("strong");
          b.textContent = "Fix: ";
          p.append(b, fix);
          li.appendChild(p);
        }
        $("check-list").appendChild(li);
      }
    } catch (e) {
      $("check-summary").textContent = "The check could not run: " + (e instanceof TypeError ? "NPU Chat cannot be reached." : problemText(e.message));
    }
  }
  $("check-run").addEventListener("click", runCheck);

  // ---- Settings: settings.js fills and saves the view ----
  function loadSettings() {
    if (window.NPUSettings) window.NPUSettings.load();
  }

  // ---- Log ----
  // logLine shows one record of the log (slog's JSON) as one readable
  // line: time, level, message, then key=value; a value with spaces,
  // quotes or = is quoted, an object written as JSON. A line that is
  // not a JSON record is shown as it is.
  function logLine(raw) {
    let rec;
    try {
      rec = JSON.parse(raw);
    } catch (_) {
      return raw;
    }
    if (!rec || typeof rec !== "object" || Array.isArray(rec)) return raw;
    const { time, level, msg, ...rest } = rec;
    // The time as written (the server's clock), to the second.
    const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)/.exec(String(time || ""));
    const parts = [m ? m[1] + " " + m[2] : String(time || ""), String(level || "").padEnd(5), String(msg === undefined ? "" : msg)];
    for (const [k, v] of Object.entries(rest)) {
      const s = typeof v === "string" ? v : JSON.stringify(v);
      parts.push(k + "=" + (typeof v === "string" && (v === "" || /[\s"=]/.test(v)) ? JSON.stringify(v) : s));
    }
    return parts.filter((p) => p !== "").join(" ");
  }
  async function loadLogs() {
    try {
      const r = await api("GET", "/api/logs?lines=300");
      $("logs-path").textContent = r.path;
      // A record a line of its own; a long one wraps with a hanging indent.
      $("log-lines").replaceChildren(...r.lines.map((l) => {
        const e = document.createElement("span");
        e.className = "log-line";
        e.textContent = logLine(l);
        return e;
      }));
      $("log-lines").scrollTop = $("log-lines").scrollHeight;
    } catch (e) {
      $("logs-path").textContent = e.message;
      $("log-lines").textContent = "";
    }
  }
  $("logs-refresh").addEventListener("click", loadLogs);

  // ---- Small screens: the conversation list slides in ----
  function closeSidebar() {
    document.body.classList.remove("sidebar-open");
    $("menu").setAttribute("aria-expanded", "false");
  }
  // A click beside the open list (on the dimmed chat) or Escape closes
  // it, and the focus goes back to the menu button.
  $("main").addEventListener("click", (e) => {
    if (!document.body.classList.contains("sidebar-open") || e.target.closest("#menu")) return;
    e.preventDefault();
    e.stopPropagation();
    closeSidebar();
    $("menu").focus();
  }, true);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("sidebar-open") && !document.querySelector("dialog[open]")) {
      closeSidebar();
      $("menu").focus();
    }
  });
  $("menu").addEventListener("click", () => {
    const open = document.body.classList.toggle("sidebar-open");
    $("menu").setAttribute("aria-expanded", String(open));
    if (open) $("new-chat").focus();
  });

  // ---- Start ----
  upgradeServerMessages();
  updateExport();
  updateEmpty();
  scrollDown(true);
  refreshStatus();
  connectEvents();
  loadList();
  api("GET", "/api/history").then((h) => showHistoryProblem(h.problem || ""), () => {});
  if (new URLSearchParams(location.search).has("link")) history.replaceState(null, "", location.pathname);
  // The tray's Settings window opens the page at its Settings (/#settings),
  // once settings.js (loaded after this script) is there to fill it.
  if (location.hash === "#settings") document.addEventListener("DOMContentLoaded", () => showView("settings"));
  Install.load();
  if (conversation && app.dataset.rendered !== "true") {
    // With an API key the server renders no history: open the
    // conversation in the address (a reload, a link) with the key.
    const wanted = conversation;
    openConversation(conversation, false).then((found) => {
      if (!found) {
        history.replaceState(null, "", "/");
        openConversation(null, false).then(() => showMissing(wanted));
      }
    });
  } else if (conversation) {
    api("GET", "/api/conversations/" + conversation).then(fillChatSettings, () => {});
  }
  // The library view (library.js) shares the API helper, the in-page
  // dialog and the views.
  window.NPUChat = Object.assign(window.NPUChat || {}, { api, ask, showView });
  input.focus();
})();
