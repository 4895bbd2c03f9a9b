// install.js: the page's install view. The server words every install
// status (install.Status.Words in Go, the words the tray and `npuchat
// install` say too) and sends them in the status's "words"; this file
// puts them in place and never words an install itself. A failure is
// its sentence, with the whole error folded under Details; the button
// says what the words say (Install, Retry when nothing was downloaded,
// Resume when something was). Every text goes in with textContent.
//
// app.js calls NPUInstall.init once with what the view needs from the
// page (the API call, the model's name, a hook for state changes) and
// hands it each status from /api/events.
"use strict";
window.NPUInstall = (() => {
  const $ = (id) => document.getElementById(id);
  let st = { state: "idle" };
  // other is the last status of an install of another model than the
  // page's (the Models view installs catalog models from their rows):
  // the status line follows it, the view does not show it.
  let other = null;
  let page = null; // init's options
  let pollTimer = 0;

  const path = () => "/api/models/" + encodeURIComponent(page.model()) + "/install";

  // show puts a status (the server's JSON, words included) on the view.
  function show(next) {
    if (page && next.model && next.model.toLowerCase() !== String(page.model()).toLowerCase()) {
      const was = state();
      other = next;
      if (page.changed) page.changed(Object.assign({}, st, { state: state() }), was);
      return;
    }
    if (other && other.state !== "running") other = null;
    const was = st.state;
    st = next;
    const w = next.words || {};
    const prog = $("install-progress");
    $("install-title").textContent = w.title || "";
    $("install-box").hidden = next.state === "idle" || (next.state === "failed" && !(next.overall_bytes > 0));
    prog.dataset.state = next.state;
    // The bar is the whole install's once the server knows what it
    // downloads, else the file's; it stays where it was otherwise.
    if (next.state === "done") prog.value = 1;
    else if (next.overall_total > 0) prog.value = Math.min(1, next.overall_bytes / next.overall_total);
    else if (next.total > 0) prog.value = next.bytes / next.total;
    $("install-progress-text").textContent = next.state === "failed" ? "" : w.line || "";
    $("install-file-text").textContent = w.file || "";
    $("install-file-text").hidden = !w.file;
    const btn = $("install");
    btn.hidden = !w.action;
    btn.textContent = w.action || "Install";
    $("install-cancel").hidden = next.state !== "running";
    if (next.state === "failed") {
      // The sentence first; the line says what was kept; the whole
      // error folded under it.
      problem(w.problem || "", w.line || "", w.detail || "");
    } else {
      $("install-error").hidden = true;
    }
    if (page && page.changed) page.changed(next, was);
  }

  // problem shows a failure: its sentence, what was kept, and its
  // detail folded.
  function problem(sentence, kept, detail) {
    $("install-error").hidden = false;
    $("install-problem").textContent = sentence;
    $("install-kept").textContent = kept;
    $("install-kept").hidden = !kept;
    $("install-detail").textContent = detail;
    $("install-detail-box").hidden = !detail;
    $("install-detail-box").open = false;
  }

  // Events carry the progress; a slow poll covers a dropped stream.
  function poll() {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(async () => {
      try {
        const next = await page.api("GET", path());
        if (next.state !== st.state || next.bytes !== st.bytes || next.overall_bytes !== st.overall_bytes) show(next);
        if (next.state === "running") poll();
      } catch (_) {}
    }, 1000);
  }

  // load shows the install as the server has it now.
  async function load() {
    try {
      const next = await page.api("GET", path());
      show(next);
      if (next.state === "running") poll();
    } catch (_) {}
  }

  function init(opts) {
    page = opts;
    $("install").addEventListener("click", async () => {
      try {
        show(await page.api("POST", path()));
        poll();
      } catch (e) {
        // The server's refusal (another install runs, …) in its words.
        problem(e.message, "", "");
      }
    });
    $("install-cancel").addEventListener("click", async () => {
      try {
        show(await page.api("DELETE", path()));
      } catch (e) {
        problem(e.message, "", "");
      }
    });
  }

  // state is the view's install's state, or "running" while another
  // model installs; model is the model installing (or last shown).
  function state() {
    return other && other.state === "running" && st.state !== "running" ? "running" : st.state;
  }
  function model() {
    return (other && other.state === "running" && st.state !== "running" ? other.model : st.model) || "";
  }

  return { init, show, load, state, model };
})();
