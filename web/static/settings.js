// settings.js fills and saves the page's Settings view (GET and PUT
// /api/settings, through app.js's api): the engine, the context length
// with the KV memory it will take beside it, keep-alive in words, serve
// at start, the models folder, the Hugging Face endpoint and token, the
// port and "reachable from other devices" with its API key, the theme
// (this browser's, as theme.js keeps it) and the chat defaults. A bad
// value's error is shown at its field (the server names it: param).
// Secrets come from the server masked only; one is sent when typed (or
// "" when removed), never read back. Text is set with textContent only.
// The MCP servers' part (the second function below) lists the servers
// with their state and tools (GET /api/settings/mcp) and saves each
// change at once (PUT /api/settings with the whole mcp_servers list).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const form = $("settings-form");
  if (!form || !window.NPUChat) return;
  const api = window.NPUChat.api;

  let shown = null; // the settings as last loaded or saved
  let tokenRemove = false;

  // ---- words ----
  const int = (n) => Math.round(n).toLocaleString("en-US");
  function aboutBytes(n) {
    const u = [["GB", 1e9], ["MB", 1e6], ["KB", 1e3]];
    for (const [name, size] of u) {
      if (n >= size) {
        const v = n / size;
        return "about " + (v >= 10 ? Math.round(v) : Math.round(v * 10) / 10) + " " + name;
      }
    }
    return "about " + n + " bytes";
  }
  function durationWords(seconds) {
    if (seconds < 0) return "never (the model stays loaded)";
    if (seconds < 1) return "at once";
    const parts = [];
    const unit = (n, one) => {
      if (n === 1) parts.push("1 " + one);
      else if (n > 1) parts.push(n + " " + one + "s");
    };
    let s = Math.floor(seconds);
    unit(Math.floor(s / 86400), "day");
    unit(Math.floor((s % 86400) / 3600), "hour");
    unit(Math.floor((s % 3600) / 60), "minute");
    unit(s % 60, "second");
    return parts.join(" ");
  }

  // ---- the context length and its KV memory ----
  // perToken is the bytes a token takes with the KV cache type chosen
  // in the form (saved or not), elemBytes those of one element.
  function kvTypeChosen() {
    return $("set-kv-cache-type").value || "f32";
  }
  function perToken(kv) {
    const by = kv.bytes_per_token_by_type;
    if (kv.kv_type === kvTypeChosen() || !by) return kv.bytes_per_token; // the loaded model's, exact
    return by[kvTypeChosen()] || kv.bytes_per_token;
  }
  function elemBytes(kv) {
    return kv.kv_type === kvTypeChosen() || !kv.bytes_per_token_by_type ? kv.element_bytes : { f32: 4, f16: 2, q8_0: 34 / 32 }[kvTypeChosen()];
  }
  function kvTypeLabel(kv) {
    const t = kvTypeChosen();
    const as = kv.kept_as && kv.kept_as[t];
    return as ? t + ": this model keeps " + as + ", its head size is not a multiple of 32" : t;
  }
  function kvBytes(kv, n) {
    return Math.ceil(n / kv.block) * kv.block * perToken(kv);
  }
  function showKV() {
    const kv = shown && shown.kv;
    const out = $("set-context-kv");
    const n = parseInt($("set-context").value, 10) || 0;
    if (!kv) {
      out.textContent = "The memory it takes shows once a model is installed.";
      return;
    }
    if (n === 0) {
      out.textContent = kv.automatic
        ? "Automatic: " + int(kv.automatic) + " tokens now, " + aboutBytes(kvBytes(kv, kv.automatic)) + " of memory (" + kvTypeLabel(kv) + ")"
        : "Automatic: follows free memory";
      return;
    }
    let eff = n;
    let clamp = "";
    if (kv.model_max && n > kv.model_max) {
      eff = kv.model_max;
      clamp = " (" + kv.model + " holds at most " + int(kv.model_max) + " tokens: that is what it gets)";
    }
    out.textContent = aboutBytes(kvBytes(kv, eff)) + " of memory for its keys and values (" + kvTypeLabel(kv) + ")" + clamp;
    out.title = kv.layers
      ? kv.model + ": " + kv.layers + " layers × " + kv.kv_heads + " KV heads × " + kv.head_dim + " values × 2 (keys and values) × " + elemBytes(kv) + " bytes per token"
      : kv.model;
  }
  function contextHelp(s) {
    let t = "0 = automatic (follows free memory). A change applies the next time the model is loaded (switch it off and on).";
    if (s.kv && s.kv.loaded && s.kv.context) t += " The model on now holds " + int(s.kv.context) + " tokens.";
    $("set-context-help").textContent = t;
  }

  // ---- requests answered at once ----
  function showParallel() {
    const kv = shown && shown.kv;
    const n = parseInt($("set-parallel").value, 10) || 0;
    const out = $("set-parallel-now");
    if (n === 0) {
      out.textContent = kv && kv.auto_parallel ? "Automatic (" + kv.auto_parallel + " at once now)" : "Automatic (by KV memory, at most 4)";
    } else if (n < 0 || n > 16) {
      out.textContent = "From 1 to 16, or 0 for automatic";
    } else {
      out.textContent = n === 1 ? "One at a time: the others wait" : n + " at once, decoded together";
    }
  }
  function parallelHelp(s) {
    let t = "Their tokens are computed together, so a chat and an API client do not wait for each other. 0 = automatic (as many as the KV memory holds, at most 4). A change applies the next time the model is loaded.";
    if (s.kv && s.kv.loaded && s.kv.parallel) t += " The model on now answers " + s.kv.parallel + " at once.";
    $("set-parallel-help").textContent = t;
  }

  // ---- keep-alive ----
  function fillKeepAlive(seconds) {
    const n = $("set-keep-alive-n");
    const unit = $("set-keep-alive-unit");
    if (seconds < 0) {
      unit.value = "never";
      n.value = "";
    } else if (seconds > 0 && seconds % 3600 === 0) {
      unit.value = "h";
      n.value = seconds / 3600;
    } else if (seconds > 0 && seconds % 60 === 0) {
      unit.value = "m";
      n.value = seconds / 60;
    } else {
      unit.value = "s";
      n.value = seconds;
    }
    showKeepAlive();
  }
  function keepAliveSeconds() {
    const unit = $("set-keep-alive-unit").value;
    if (unit === "never") return -1;
    const n = Number($("set-keep-alive-n").value);
    return n * { s: 1, m: 60, h: 3600 }[unit];
  }
  function keepAliveValue() {
    const unit = $("set-keep-alive-unit").value;
    if (unit === "never") return "-1";
    const n = $("set-keep-alive-n").value.trim();
    return n === "" ? "" : n + unit;
  }
  function showKeepAlive() {
    const never = $("set-keep-alive-unit").value === "never";
    $("set-keep-alive-n").hidden = never;
    const s = keepAliveSeconds();
    // A negative time is not "never": Save refuses it (never is chosen
    // in the unit list).
    if (!never && s < 0) $("set-keep-alive-text").textContent = "= below 0: not a time";
    else $("set-keep-alive-text").textContent = never || Number.isFinite(s) ? "= " + durationWords(s) : "";
  }

  // ---- the theme (theme.js's, in this browser) ----
  function fillTheme() {
    const t = localStorage.getItem("npuchat-theme");
    $("set-theme").value = t === "light" || t === "dark" ? t : "system";
  }
  $("set-theme").addEventListener("change", () => {
    const v = $("set-theme").value;
    if (v === "system") {
      localStorage.removeItem("npuchat-theme");
      delete document.documentElement.dataset.theme;
    } else {
      localStorage.setItem("npuchat-theme", v);
      document.documentElement.dataset.theme = v;
    }
  });

  // ---- errors at their fields ----
  function clearErrors() {
    form.querySelectorAll(".field-error").forEach((e) => {
      e.hidden = true;
      e.textContent = "";
    });
    form.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
  }
  // fieldFor maps the server's param to the field that shows it.
  const fieldFor = { addr: "port" };
  // showFieldError shows msg at param's field; the first shown (focus)
  // takes the focus.
  function showFieldError(param, msg, focus = true) {
    const name = fieldFor[param] || param;
    const box = $("err-" + name);
    if (!box) return false;
    box.textContent = msg.charAt(0).toUpperCase() + msg.slice(1);
    box.hidden = false;
    const field = box.closest(".field");
    const input = field && field.querySelector("input, select");
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-errormessage", box.id);
      if (focus) input.focus();
    }
    if (focus) box.scrollIntoView({ block: "nearest" });
    return true;
  }
  // showFieldErrors shows every [param, message] at its field, the
  // first focused, and says in the note how many need a change; the
  // ones without a field of their own are said in the note.
  function showFieldErrors(list) {
    let shownCount = 0;
    const elsewhere = [];
    for (const [param, msg] of list) {
      if (showFieldError(param, msg, shownCount === 0)) shownCount++;
      else elsewhere.push(msg);
    }
    const n = shownCount + elsewhere.length;
    const words = n === 1 ? "one setting needs a change" : n + " settings need a change";
    $("settings-note").textContent = "Not saved: " + words + (shownCount ? ", see the fields marked" : "") +
      (elsewhere.length ? ": " + elsewhere.join("; ") : ".");
  }

  // ---- fill ----
  function fill(s) {
    shown = s;
    tokenRemove = false;
    $("engine-remote").hidden = s.engine !== "remote";
    document.querySelectorAll('input[name="engine"]').forEach((r) => (r.checked = r.value === s.engine));
    $("set-context").value = s.context_length || 0;
    $("set-kv-cache-type").value = s.kv_cache_type || "f32";
    $("set-speculative").value = s.speculative || "off";
    contextHelp(s);
    showKV();
    $("set-parallel").value = s.parallel || 0;
    parallelHelp(s);
    showParallel();
    fillKeepAlive(s.keep_alive_seconds);
    $("set-serve-at-start").checked = !!s.serve_at_start;

    $("set-models-dir").value = s.models_dir || "";
    $("set-models-dir").placeholder = s.models_dir_default || "";
    $("set-hf-endpoint").value = s.hf_endpoint || "";
    $("set-hf-endpoint").placeholder = s.hf_endpoint_fallback || "https://huggingface.co";
    const from = s.hf_endpoint_from === "HF_ENDPOINT" ? " (from the environment variable HF_ENDPOINT)" : " (Hugging Face itself)";
    $("set-hf-endpoint-help").textContent =
      "Every download goes here. Empty: " + (s.hf_endpoint_fallback || "https://huggingface.co") + from + ". An address set here wins over HF_ENDPOINT.";
    const tok = $("set-hf-token");
    tok.value = "";
    tok.placeholder = s.hf_token_masked ? s.hf_token_masked + " (saved)" : "none";
    $("set-hf-token-remove").hidden = !s.hf_token_masked;
    let th = "For gated or private models. Kept in a file only you can read, shown masked, never in full.";
    if (!s.hf_token_masked && s.hf_token_fallback) th += " Without one here, downloads use the token from " + s.hf_token_fallback + ".";
    $("set-hf-token-help").textContent = th;

    $("set-port").value = s.port || "";
    // A port of 0 (--addr :0) is any free one: the one bound shows.
    $("set-port").placeholder = s.listening ? s.listening.slice(s.listening.lastIndexOf(":") + 1) : "";
    $("set-reachable").checked = !!s.reachable;
    const key = $("set-api-key");
    key.type = "password";
    key.value = "";
    key.placeholder = s.api_key_masked ? s.api_key_masked + " (saved)" : "none";
    $("set-api-key-help").textContent = "Clients on other devices send it as Authorization: Bearer and the key. Shown masked once saved.";
    $("set-network-help").textContent =
      "The port, reachability and API key apply when NPU Chat next starts" + (s.listening ? "; it listens on " + s.listening + " now." : ".");
    fillTheme();
    $("set-temperature").value = s.chat.temperature != null ? s.chat.temperature : "";
    $("set-top-p").value = s.chat.top_p != null ? s.chat.top_p : "";
    $("set-max-tokens").value = s.chat.max_tokens != null ? s.chat.max_tokens : "";
  }

  async function load() {
    clearErrors();
    $("settings-note").textContent = "";
    try {
      fill(await api("GET", "/api/settings"));
    } catch (e) {
      $("settings-note").textContent = e.message;
    }
    if (window.NPUMCP) window.NPUMCP.load();
  }

  // ---- events ----
  $("set-context").addEventListener("input", showKV);
  $("set-kv-cache-type").addEventListener("change", showKV);
  $("set-parallel").addEventListener("input", showParallel);
  $("set-keep-alive-n").addEventListener("input", showKeepAlive);
  $("set-keep-alive-unit").addEventListener("change", showKeepAlive);
  $("set-hf-token-remove").addEventListener("click", () => {
    tokenRemove = true;
    $("set-hf-token").value = "";
    $("set-hf-token").placeholder = "removed when you save";
    $("set-hf-token-remove").hidden = true;
  });
  $("set-api-key-generate").addEventListener("click", () => {
    const b = new Uint8Array(24);
    crypto.getRandomValues(b);
    const k = btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const input = $("set-api-key");
    input.type = "text"; // shown so that it can be copied, until saved
    input.value = k;
    $("set-api-key-help").textContent = "Copy it now for your other devices: once saved it is shown masked only.";
  });

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors();
    const num = (id, parse) => ($(id).value.trim() === "" ? null : parse($(id).value));
    const checked = document.querySelector('input[name="engine"]:checked');
    const body = {
      engine: checked ? checked.value : "auto",
      keep_alive: keepAliveValue(),
      context_length: num("set-context", Number) || 0,
      kv_cache_type: $("set-kv-cache-type").value,
      speculative: $("set-speculative").value,
      parallel: num("set-parallel", Number) || 0,
      serve_at_start: $("set-serve-at-start").checked,
      models_dir: $("set-models-dir").value.trim(),
      hf_endpoint: $("set-hf-endpoint").value.trim(),
      port: num("set-port", Number) || 0,
      reachable: $("set-reachable").checked,
      chat: { temperature: num("set-temperature", parseFloat), top_p: num("set-top-p", parseFloat), max_tokens: num("set-max-tokens", (v) => parseInt(v, 10)) },
    };
    const tok = $("set-hf-token").value.trim();
    if (tok !== "") body.hf_token = tok;
    else if (tokenRemove) body.hf_token = "";
    const key = $("set-api-key").value.trim();
    if (key !== "") body.api_key = key;
    // What cannot be sent as a number is said here, all at once.
    const local = [];
    if (!Number.isInteger(body.context_length)) local.push(["context_length", "Write a whole number of tokens, or 0 for automatic."]);
    if (!Number.isInteger(body.parallel)) local.push(["parallel", "Write a whole number of requests, or 0 for automatic."]);
    if (local.length) {
      showFieldErrors(local);
      return;
    }
    const before = shown;
    try {
      const after = await api("PUT", "/api/settings", body);
      fill(after);
      const notes = ["Saved."];
      if (before && after.engine !== before.engine) notes.push("The engine changed: a model that was on is loaded again on it.");
      if (before && after.kv_cache_type !== before.kv_cache_type)
        notes.push("The KV cache type applies the next time the model is loaded" + (after.kv && after.kv.loaded && after.kv.kv_type ? " (the model on now keeps " + after.kv.kv_type + " until then)." : "."));
      if (before && after.speculative !== before.speculative)
        notes.push("Speculative decoding " + (after.speculative === "auto" ? "on" : "off") + " applies the next time the model is loaded.");
      if (before && after.context_length !== before.context_length)
        notes.push("The context length applies the next time the model is loaded" + (after.kv && after.kv.loaded ? " (the model on now keeps " + int(after.kv.context) + " tokens until then)." : "."));
      if (before && after.parallel !== before.parallel)
        notes.push("Requests answered at once applies the next time the model is loaded" + (after.kv && after.kv.loaded && after.kv.parallel ? " (the model on now answers " + after.kv.parallel + " at once until then)." : "."));
      if (before && (after.port !== before.port || after.reachable !== before.reachable || after.api_key_masked !== before.api_key_masked))
        notes.push("The port, reachability and API key apply when NPU Chat next starts.");
      if (notes.length === 1) notes.push("It applies now.");
      $("settings-note").textContent = notes.join(" ");
    } catch (err) {
      if (err.fields && err.fields.length) {
        showFieldErrors(err.fields.map((f) => [f.param, f.message]));
      } else if (err.param && showFieldError(err.param, err.message)) {
        $("settings-note").textContent = "Not saved: see the field marked.";
      } else {
        $("settings-note").textContent = "Not saved: " + err.message;
      }
    }
  });

  window.NPUSettings = { load };
})();

// The MCP servers of the Settings view: the list, "Show tools", on and
// off, remove, and the form that adds or edits one. A command line is
// split into the program and its arguments here (splitCommand), as a
// shell would split it, but nothing runs a shell.
(function () {
  const $ = (id) => document.getElementById(id);
  const list = $("mcp-list");
  if (!list || !window.NPUChat) return;
  const api = window.NPUChat.api;

  let servers = []; // as last loaded: settings and state
  let editing = -1; // the index of the server in the form; -1 a new one
  let tokenRemove = false;
  const toolsShown = new Set(); // names whose tools are open

  // splitCommand splits a command line as a POSIX shell splits words:
  // spaces separate, '...' keeps everything, "..." keeps all but \" and
  // \\, and outside quotes a backslash keeps the next space, quote or
  // backslash (any other backslash stays, for Windows paths).
  function splitCommand(line) {
    const out = [];
    let cur = "";
    let inWord = false;
    let q = "";
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (q === "'") {
        if (c === "'") q = "";
        else cur += c;
        continue;
      }
      if (q === '"') {
        if (c === "\\" && (line[i + 1] === '"' || line[i + 1] === "\\")) cur += line[++i];
        else if (c === '"') q = "";
        else cur += c;
        continue;
      }
      if (/\s/.test(c)) {
        if (inWord) out.push(cur);
        cur = "";
        inWord = false;
        continue;
      }
      inWord = true;
      if (c === "'" || c === '"') q = c;
      else if (c === "\\" && i + 1 < line.length && /[\s'"\\]/.test(line[i + 1])) cur += line[++i];
      else cur += c;
    }
    if (q) throw new Error("A " + (q === '"' ? "double" : "single") + " quote is not closed: close it, or put a \\ before it.");
    if (inWord) out.push(cur);
    return out;
  }
  // joinCommand writes a command as splitCommand reads it back.
  function joinCommand(args) {
    return args.map((a) => (a !== "" && !/[\s'"\\]/.test(a) ? a : '"' + a.replace(/(["\\])/g, "\\$1") + '"')).join(" ");
  }
  function parseEnv(text) {
    const env = {};
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (line === "" || line.startsWith("#")) continue;
      const eq = line.indexOf("=");
      if (eq <= 0) throw new Error("Line " + (i + 1) + " is not NAME=value: " + (line.length > 40 ? line.slice(0, 40) + "…" : line));
      env[line.slice(0, eq).trim()] = line.slice(eq + 1);
    }
    return Object.keys(env).length ? env : undefined;
  }

  // ---- the list ----
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function button(text, onClick, testid) {
    const b = el("button", "btn", text);
    b.type = "button";
    if (testid) b.dataset.testid = testid;
    b.addEventListener("click", onClick);
    return b;
  }
  function stateWords(s) {
    if (!s.enabled) return "Off";
    if (s.running) return s.pid ? "Running (process " + s.pid + ")" : "Connected";
    return "On, not running (starts when used)";
  }
  function render() {
    list.replaceChildren();
    if (servers.length === 0) {
      list.append(el("li", "mcp-empty", "No servers yet."));
    }
    servers.forEach((s, i) => {
      const li = el("li", "mcp-server" + (s.enabled ? "" : " off"));
      li.dataset.name = s.name;
      li.dataset.testid = "mcp-server";
      const head = el("div", "mcp-head");
      head.append(el("strong", "mcp-name", s.name));
      head.append(el("span", "badge" + (s.enabled ? " on" : ""), s.enabled ? "On" : "Off"));
      if (s.trusted) head.append(el("span", "badge trusted", "Trusted"));
      li.append(head);
      const what = s.command && s.command.length ? joinCommand(s.command) : s.url + (s.token_set ? " (token " + s.token_masked + ")" : "");
      const code = el("code", "mcp-what", what);
      li.append(code);
      if (s.dir) li.append(el("p", "field-help", "In " + s.dir));
      const st = el("p", "field-help mcp-state", stateWords(s) + (s.tools ? " · " + s.tools.length + (s.tools.length === 1 ? " tool" : " tools") : ""));
      st.dataset.testid = "mcp-state";
      li.append(st);
      if (s.last_error) {
        const e = el("p", "field-error mcp-error", "Last error" + (s.last_error_at ? " (" + new Date(s.last_error_at).toLocaleString() + ")" : "") + ": " + s.last_error);
        e.dataset.testid = "mcp-error";
        li.append(e);
      }
      const row = el("div", "field-row");
      const open = toolsShown.has(s.name);
      const show = button(open ? "Hide tools" : "Show tools", () => toggleTools(i), "mcp-show-tools");
      show.setAttribute("aria-expanded", open ? "true" : "false");
      show.disabled = !s.enabled;
      if (!s.enabled) show.title = "Turn it on to see its tools";
      row.append(show, button("Edit", () => edit(i), "mcp-edit"), button(s.enabled ? "Turn off" : "Turn on", () => toggleOn(i), "mcp-toggle"), button("Remove", () => remove(i), "mcp-remove"));
      li.append(row);
      if (open && s.tools) {
        const dl = el("dl", "mcp-tools");
        dl.dataset.testid = "mcp-tools";
        for (const t of s.tools) {
          dl.append(el("dt", "", t.name), el("dd", "", t.description || "(no description)"));
        }
        if (!s.tools.length) dl.append(el("dt", "", "This server offers no tools."));
        li.append(dl);
      }
      list.append(li);
    });
  }
  async function load() {
    try {
      const r = await api("GET", "/api/settings/mcp");
      servers = r.servers || [];
      render();
    } catch (e) {
      $("mcp-note").textContent = e.message;
    }
  }
  async function toggleTools(i) {
    const s = servers[i];
    if (toolsShown.has(s.name)) {
      toolsShown.delete(s.name);
      render();
      return;
    }
    $("mcp-note").textContent = "Asking " + s.name + " for its tools…";
    try {
      const r = await api("GET", "/api/settings/mcp/" + encodeURIComponent(s.name) + "/tools");
      toolsShown.add(s.name);
      $("mcp-note").textContent = s.name + " offers " + r.tools.length + (r.tools.length === 1 ? " tool." : " tools.");
    } catch (e) {
      $("mcp-note").textContent = s.name + ": " + e.message;
    }
    await load();
  }

  // ---- saving ----
  // settingsOf is a server as PUT /api/settings takes it: its token
  // left out, so that the one it has stays.
  function settingsOf(s) {
    const o = { name: s.name, enabled: s.enabled, trusted: s.trusted };
    if (s.command && s.command.length) o.command = s.command;
    if (s.env) o.env = s.env;
    if (s.dir) o.dir = s.dir;
    if (s.url) o.url = s.url;
    return o;
  }
  async function save(next) {
    const r = await api("PUT", "/api/settings", { mcp_servers: next });
    await load();
    return r;
  }
  async function toggleOn(i) {
    const next = servers.map(settingsOf);
    next[i].enabled = !next[i].enabled;
    try {
      await save(next);
      $("mcp-note").textContent = next[i].name + (next[i].enabled ? " is on." : " is off (stopped if it ran).");
    } catch (e) {
      $("mcp-note").textContent = "Not changed: " + e.message;
    }
  }
  async function remove(i) {
    const name = servers[i].name;
    const next = servers.map(settingsOf).filter((_, j) => j !== i);
    try {
      await save(next);
      toolsShown.delete(name);
      $("mcp-note").textContent = name + " is removed (stopped if it ran).";
      $("mcp-add").focus();
    } catch (e) {
      $("mcp-note").textContent = "Not removed: " + e.message;
    }
  }

  // ---- the form ----
  const form = $("mcp-form");
  function kind() {
    const k = form.querySelector('input[name="mcp-kind"]:checked');
    return k ? k.value : "command";
  }
  function showKind() {
    $("mcp-command-part").hidden = kind() !== "command";
    $("mcp-url-part").hidden = kind() !== "url";
  }
  function clearErrors() {
    form.querySelectorAll(".field-error").forEach((e) => {
      e.hidden = true;
      e.textContent = "";
    });
    form.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
    $("mcp-form-note").textContent = "";
  }
  function fieldError(field, msg) {
    const box = $("err-mcp-" + field);
    if (!box) return false;
    box.textContent = msg.charAt(0).toUpperCase() + msg.slice(1);
    box.hidden = false;
    const input = box.closest(".field").querySelector("input, textarea");
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-errormessage", box.id);
      input.focus();
    }
    return true;
  }
  function openForm(s) {
    clearErrors();
    tokenRemove = false;
    $("mcp-form-title").textContent = s ? "Edit " + s.name : "Add an MCP server";
    $("mcp-name").value = s ? s.name : "";
    const k = s && s.url ? "url" : "command";
    form.querySelectorAll('input[name="mcp-kind"]').forEach((r) => (r.checked = r.value === k));
    $("mcp-command").value = s && s.command ? joinCommand(s.command) : "";
    $("mcp-env").value = s && s.env ? Object.keys(s.env).map((n) => n + "=" + s.env[n]).join("\n") : "";
    $("mcp-dir").value = (s && s.dir) || "";
    $("mcp-url").value = (s && s.url) || "";
    $("mcp-token").value = "";
    $("mcp-token").placeholder = s && s.token_set ? s.token_masked + " (saved)" : "none";
    $("mcp-token-remove").hidden = !(s && s.token_set);
    $("mcp-enabled").checked = s ? s.enabled : true;
    $("mcp-trusted").checked = s ? s.trusted : false;
    showKind();
    form.hidden = false;
    $("mcp-add").hidden = true;
    $("mcp-name").focus();
  }
  function closeForm() {
    $("mcp-token").value = ""; // a typed token does not stay in the page
    form.hidden = true;
    $("mcp-add").hidden = false;
    editing = -1;
  }
  function edit(i) {
    editing = i;
    openForm(servers[i]);
  }
  $("mcp-add").addEventListener("click", () => {
    editing = -1;
    openForm(null);
  });
  $("mcp-cancel").addEventListener("click", () => {
    closeForm();
    $("mcp-add").focus();
  });
  form.querySelectorAll('input[name="mcp-kind"]').forEach((r) => r.addEventListener("change", showKind));
  $("mcp-token-remove").addEventListener("click", () => {
    tokenRemove = true;
    $("mcp-token").value = "";
    $("mcp-token").placeholder = "removed when you save";
    $("mcp-token-remove").hidden = true;
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors();
    const s = { name: $("mcp-name").value.trim(), enabled: $("mcp-enabled").checked, trusted: $("mcp-trusted").checked };
    if (kind() === "command") {
      try {
        s.command = splitCommand($("mcp-command").value);
      } catch (err) {
        fieldError("command", err.message);
        return;
      }
      if (!s.command.length) {
        fieldError("command", "Write the program to run and its arguments.");
        return;
      }
      try {
        s.env = parseEnv($("mcp-env").value);
      } catch (err) {
        fieldError("env", err.message);
        return;
      }
      if ($("mcp-dir").value.trim()) s.dir = $("mcp-dir").value.trim();
    } else {
      s.url = $("mcp-url").value.trim();
      if (!s.url) {
        fieldError("url", "Write the server's address, such as https://mcp.example.com/mcp.");
        return;
      }
      const tok = $("mcp-token").value.trim();
      if (tok !== "") s.token = tok;
      else if (tokenRemove) s.token = "";
    }
    const next = servers.map(settingsOf);
    let at = editing;
    if (editing >= 0) {
      s.was = servers[editing].name;
      next[editing] = s;
    } else {
      at = next.length;
      next.push(s);
    }
    try {
      await save(next);
      closeForm();
      $("mcp-note").textContent = s.name + " is saved" + (s.enabled ? ": Show tools starts it." : ".");
      $("mcp-add").focus();
    } catch (err) {
      const m = /^mcp_servers\[(\d+)\]\.(\w+)$/.exec(err.param || "");
      if (m && Number(m[1]) === at && fieldError(m[2], err.message)) {
        $("mcp-form-note").textContent = "Not saved: see the field marked.";
      } else {
        $("mcp-form-note").textContent = "Not saved: " + err.message;
      }
    }
  });

  window.NPUMCP = { load, splitCommand, joinCommand };
})();
