// library.js drives the page's Models view: the installed models (NPU
// Chat's own, FastFlowLM's, those the user added) with their size,
// format, what can run them and which is loaded; switching (the server
// loads the new model without a restart); removing, asked first in an
// in-page dialog (an added model is only forgotten, its files stay);
// adding a model file the user already has, typed or browsed inside
// the home and models folders (the server refuses any path outside);
// and the catalog (NPU Chat's models and FastFlowLM's own list), each
// saying what can run it before any download, installed from its row.
// Like app.js it never puts server text into innerHTML.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const view = $("view-library");
  if (!view || !window.NPUChat) return;
  const { api, ask } = window.NPUChat;
  function human(n) {
    const u = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1000 && i < u.length - 1) {
      n /= 1000;
      i++;
    }
    return (i ? n.toFixed(1) : n) + " " + u[i];
  }
  const note = $("library-note");
  const list = $("library-list");
  const addError = $("library-add-error");
  const pathInput = $("library-path");

  const sourceText = {
    npuchat: "installed by NPU Chat",
    fastflowlm: "FastFlowLM's model",
    added: "added by you",
  };
  function enginesText(e) {
    if (e.includes("remote")) return "the remote server";
    const npu = e.includes("npu") || e.includes("oflm");
    const cpu = e.includes("cpu");
    if (npu && cpu) return "NPU and CPU";
    return npu ? "NPU only" : "CPU only";
  }
  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  let models = [];
  async function load() {
    try {
      const r = await api("GET", "/api/library");
      models = r.models || [];
      render();
      if (!models.length) note.textContent = "No model is installed yet: install one from the Catalog below, or add a model file you already have.";
      else if (/^No model is installed/.test(note.textContent)) note.textContent = "";
      const on = models.find((m) => m.loaded && m.state === "on");
      if (on && /^(Switching|Added)|installed; switching/.test(note.textContent)) note.textContent = on.name + " is loaded and answers now.";
    } catch (e) {
      note.textContent = e.message;
    }
  }

  function render() {
    list.replaceChildren();
    for (const m of models) {
      const li = el("li", "library-model" + (m.loaded ? " loaded" : ""));
      li.dataset.name = m.name;
      li.setAttribute("data-testid", "library-model");
      const head = el("div", "library-head");
      head.appendChild(el("strong", "library-name", m.name));
      if (m.loaded) {
        const b = el("span", "badge loaded-badge", m.state === "loading" ? "Loading" : "Loaded");
        b.setAttribute("data-testid", "library-loaded");
        head.appendChild(b);
      }
      li.appendChild(head);
      const facts = [];
      const remote = m.source === "remote";
      if (m.format && !remote) facts.push(m.format.toUpperCase() === "GGUF" ? "GGUF" : m.format);
      if (m.size) facts.push(human(m.size));
      facts.push((remote ? "served by " : "runs on ") + enginesText(m.engines || []));
      if (!remote) facts.push(sourceText[m.source] || m.source);
      const f = el("p", "library-facts", facts.join(" · "));
      f.setAttribute("data-testid", "library-facts");
      li.appendChild(f);
      if (m.path) li.appendChild(el("p", "library-path form-note", m.path));
      if (m.note) li.appendChild(el("p", "library-warn form-note", m.note));
      const row = el("div", "library-actions");
      if (m.oflm) li.appendChild(oflmBox(m, row));
      if (!m.loaded) {
        const use = el("button", "btn primary", "Use");
        use.type = "button";
        use.setAttribute("data-testid", "library-use");
        use.setAttribute("aria-label", "Use " + m.name);
        use.addEventListener("click", () => useModel(m.name));
        row.appendChild(use);
      }
      if (m.remove) {
        const rm = el("button", "btn", m.remove === "forget" ? "Forget" : "Remove");
        rm.type = "button";
        rm.setAttribute("data-testid", "library-remove");
        rm.setAttribute("aria-label", (m.remove === "forget" ? "Forget " : "Remove ") + m.name);
        rm.addEventListener("click", () => removeModel(m));
        row.appendChild(rm);
      }
      li.appendChild(row);
      list.appendChild(li);
    }
  }

  // ---- The NPU by oflm (OpenFlowLM-Next) ----
  // For the model oflm can serve (MiniCPM5-2B): what its oflm route needs
  // next, and the one button that prepares the weights and switches to
  // them (POST /api/library/{name}/prepare-oflm; progress in the list).
  let oflmTimer = 0;
  function oflmBox(m, row) {
    const o = m.oflm;
    const box = el("div", "library-oflm");
    box.setAttribute("data-testid", "library-oflm");
    box.dataset.state = o.state;
    const say = (text, cls) => box.appendChild(el("p", "form-note" + (cls ? " " + cls : ""), text));
    if (o.state === "prepared") {
      say("Prepared for the NPU through oflm (OpenFlowLM-Next).");
      // the note the button left ("Preparing …; it switches to it when
      // done") is done with
      if (note.dataset.preparing === m.name) {
        note.textContent = "";
        delete note.dataset.preparing;
      }
    }
    if (o.state === "preparing") {
      const p = el("progress");
      p.max = 1;
      p.value = o.frac || 0;
      p.setAttribute("aria-label", "Preparing " + m.name + " for the NPU (oflm)");
      box.appendChild(p);
      say(o.note || "Preparing for the NPU (oflm)…");
      clearTimeout(oflmTimer);
      oflmTimer = setTimeout(load, 1000);
    }
    if (o.state === "not-ready") say("oflm (OpenFlowLM-Next) is installed but not ready: " + (o.note || ""), "library-warn");
    if (o.state === "missing") say("To run " + m.name + " on the NPU, install oflm (OpenFlowLM-Next): FastFlowLM cannot run it. NPU Chat does not download or bundle oflm.", "library-warn");
    if (o.state === "ready" && o.note) say(o.note, "library-warn");
    if (o.link && /^https:\/\//.test(o.link) && (o.state === "missing" || o.state === "not-ready")) {
      const a = el("a", "", "oflm's install instructions");
      a.href = o.link;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      const p = el("p", "form-note");
      p.appendChild(a);
      box.appendChild(p);
    }
    if (o.state === "ready") {
      const b = el("button", "btn", "Prepare for the NPU (oflm)");
      b.type = "button";
      b.setAttribute("data-testid", "library-prepare-oflm");
      b.setAttribute("aria-label", "Prepare " + m.name + " for the NPU (oflm)");
      b.addEventListener("click", () => prepareOFLM(m.name, b));
      row.appendChild(b);
    }
    return box;
  }

  async function prepareOFLM(name, button) {
    button.disabled = true;
    try {
      const r = await api("POST", "/api/library/" + encodeURIComponent(name) + "/prepare-oflm");
      models = r.models || models;
      note.textContent = "Preparing " + name + " for the NPU (oflm); it switches to it when done.";
      note.dataset.preparing = name;
      render();
    } catch (e) {
      button.disabled = false;
      note.textContent = e.message;
    }
  }

  async function loadCatalog() {
    const ul = $("library-catalog");
    try {
      const r = await api("GET", "/api/library/catalog");
      ul.replaceChildren();
      for (const o of r.models || []) {
        const li = el("li", "library-model offer" + (o.cpu_note ? " npu-only" : ""));
        li.dataset.name = o.name;
        li.setAttribute("data-testid", "library-offer");
        const head = el("div", "library-head");
        head.appendChild(el("strong", "library-name", o.name));
        const runs = el("span", "badge " + (o.cpu_note ? "npu-badge" : "both-badge"), enginesText(o.engines || []));
        runs.setAttribute("data-testid", "library-runs");
        head.appendChild(runs);
        if (o.installed) head.appendChild(el("span", "badge", "Installed"));
        li.appendChild(head);
        const facts = [];
        if (o.size) facts.push(human(o.size));
        if (o.description) facts.push(o.description);
        li.appendChild(el("p", "library-facts", facts.join(" · ")));
        if (o.cpu_note) {
          const n = el("p", "library-warn form-note", o.cpu_note);
          n.setAttribute("data-testid", "library-cpu-note");
          li.appendChild(n);
        }
        if (o.installable && (!o.installed || installs[o.name])) {
          const box = el("div", "library-install");
          box.setAttribute("data-testid", "library-install");
          li.appendChild(box);
          showInstall(o.name, box, installs[o.name] || { state: "idle", words: { action: "Install" } });
        }
        ul.appendChild(li);
      }
    } catch (e) {
      ul.replaceChildren(el("li", "form-note", e.message));
    }
  }

  // ---- Installing from the catalog ----
  // The same install as the Install view's (POST /api/models/{name}/install,
  // the server's words for every status, the model switched on when it
  // ends), shown in the offer's row; the row says before any download
  // what can run the model (its note above).
  const installs = {}; // model name → its last status, while the view lives
  let installTimer = 0;

  function showInstall(name, box, st) {
    const w = st.words || {};
    box.replaceChildren();
    box.dataset.state = st.state;
    if (st.state !== "idle") {
      if (w.title && st.state !== "running") box.appendChild(el("p", "library-install-title", w.title));
      if (st.state === "running") {
        const p = el("progress");
        p.max = 1;
        p.value = st.overall_total > 0 ? Math.min(1, st.overall_bytes / st.overall_total) : 0;
        p.setAttribute("aria-label", "Install progress of " + name);
        box.appendChild(p);
      }
      if (st.state === "failed") {
        const err = el("div", "error-text install-failure");
        err.setAttribute("role", "alert");
        const pr = el("p", "install-problem", w.problem || "");
        pr.setAttribute("data-testid", "library-install-problem");
        err.appendChild(pr);
        if (w.line) err.appendChild(el("p", "install-kept", w.line));
        if (w.detail) {
          const d = el("details");
          d.appendChild(el("summary", "", "Details"));
          d.appendChild(el("pre", "install-detail", w.detail));
          err.appendChild(d);
        }
        box.appendChild(err);
      } else if (w.line) {
        const line = el("p", "progress-text", w.line);
        line.setAttribute("data-testid", "library-install-line");
        line.setAttribute("aria-live", "polite");
        box.appendChild(line);
      }
      if (w.file) box.appendChild(el("p", "progress-file", w.file));
    }
    const row = el("div", "library-actions");
    if (w.action) {
      const b = el("button", "btn" + (st.state === "idle" ? "" : " primary"), w.action);
      b.type = "button";
      b.setAttribute("data-testid", "library-install-button");
      b.setAttribute("aria-label", w.action + " " + name);
      b.addEventListener("click", () => startInstall(name, box));
      row.appendChild(b);
    }
    if (st.state === "running") {
      const c = el("button", "btn", "Cancel");
      c.type = "button";
      c.setAttribute("aria-label", "Cancel the install of " + name);
      c.addEventListener("click", async () => {
        try {
          await api("DELETE", installPath(name));
        } catch (e) {
          note.textContent = e.message;
        }
      });
      row.appendChild(c);
    }
    if (row.children.length) box.appendChild(row);
  }

  const installPath = (name) => "/api/models/" + encodeURIComponent(name) + "/install";

  async function startInstall(name, box) {
    try {
      const st = await api("POST", installPath(name));
      installs[name] = st;
      showInstall(name, box, st);
      followInstall(name);
    } catch (e) {
      showInstall(name, box, { state: "failed", words: { problem: e.message, action: "Retry" } });
    }
  }

  // followInstall polls the install's status until it ends; then the
  // lists show what is installed and loaded now.
  function followInstall(name) {
    clearTimeout(installTimer);
    installTimer = setTimeout(async () => {
      let st;
      try {
        st = await api("GET", installPath(name));
      } catch (_) {
        followInstall(name);
        return;
      }
      installs[name] = st;
      const box = document.querySelector('#library-catalog li[data-name="' + CSS.escape(name) + '"] [data-testid=library-install]');
      if (box) showInstall(name, box, st);
      if (st.state === "running") return followInstall(name);
      if (st.state === "done") {
        delete installs[name];
        note.textContent = name + " is installed; switching to it…";
        load();
        loadCatalog();
      }
    }, 1000);
  }

  async function useModel(name) {
    try {
      await api("POST", "/api/library/" + encodeURIComponent(name) + "/use");
      note.textContent = "Switching to " + name + "…";
      load();
    } catch (e) {
      note.textContent = e.message;
    }
  }

  async function removeModel(m) {
    const forget = m.remove === "forget";
    const ok = await ask({
      title: (forget ? "Forget " : "Remove ") + m.name + "?",
      text: forget
        ? "NPU Chat stops listing it. The file stays where it is: " + m.path
        : "This deletes the files NPU Chat downloaded for " + m.name + ". You can install it again later.",
      confirm: forget ? "Forget" : "Remove",
      danger: !forget,
    });
    if (!ok) return;
    try {
      await api("DELETE", "/api/library/" + encodeURIComponent(m.name));
      note.textContent = (forget ? "Forgot " : "Removed ") + m.name + ".";
      load();
    } catch (e) {
      note.textContent = e.message;
    }
  }

  $("library-add").addEventListener("submit", async (e) => {
    e.preventDefault();
    addError.hidden = true;
    try {
      const m = await api("POST", "/api/library", { path: pathInput.value, use: true });
      note.textContent = "Added " + m.name + "; switching to it…";
      pathInput.value = "";
      $("library-browser").hidden = true;
      load();
    } catch (err) {
      addError.textContent = err.message;
      addError.hidden = false;
      pathInput.setAttribute("aria-invalid", "true");
    }
  });
  pathInput.addEventListener("input", () => pathInput.removeAttribute("aria-invalid"));

  async function browse(dir) {
    const box = $("library-browser");
    const items = $("library-items");
    try {
      const l = await api("GET", "/api/library/browse" + (dir ? "?dir=" + encodeURIComponent(dir) : ""));
      box.hidden = false;
      $("library-dir").textContent = l.dir;
      items.replaceChildren();
      if (l.parent) items.appendChild(item("↑ Up", l.parent, "dir"));
      for (const it of l.items) items.appendChild(item(it.name, it.path, it.kind, it.size));
      if (!l.items.length) items.appendChild(el("li", "form-note", "No folders or model files here."));
    } catch (e) {
      addError.textContent = e.message;
      addError.hidden = false;
    }
  }
  function item(name, path, kind, size) {
    const li = el("li");
    const b = el("button", "link library-item " + (kind === "dir" ? "dir" : "model"));
    b.type = "button";
    b.textContent = kind === "dir" ? name + "/" : name + " (" + kind + (size ? ", " + human(size) : "") + ")";
    b.setAttribute("data-testid", kind === "dir" ? "library-dir-item" : "library-file-item");
    b.addEventListener("click", () => {
      if (kind === "dir") browse(path);
      else {
        pathInput.value = path;
        pathInput.focus();
      }
    });
    li.appendChild(b);
    return li;
  }
  $("library-browse").addEventListener("click", () => browse(""));
  $("library-refresh").addEventListener("click", load);

  document.addEventListener("npuchat:view", (e) => {
    if (e.detail === "library") {
      load();
      loadCatalog();
    }
  });
  // The loaded mark follows the model's status while the view is open.
  let timer = null;
  document.addEventListener("npuchat:view", (e) => {
    clearInterval(timer);
    if (e.detail === "library") timer = setInterval(() => !view.hidden && load(), 2000);
  });
})();
