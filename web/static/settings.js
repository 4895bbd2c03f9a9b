// settings.js fills and saves the page's Settings view (GET and PUT
// /api/settings, through app.js's api): the engine, the context length
// with the KV memory it will take beside it, keep-alive in words, serve
// at start, the models folder, the Hugging Face endpoint and token, the
// port and "reachable from other devices" with its API key, the theme
// (this browser's, as theme.js keeps it) and the chat defaults. A bad
// value's error is shown at its field (the server names it: param).
// Secrets come from the server masked only; one is sent when typed (or
// "" when removed), never read back. Text is set with textContent only.
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
    $("set-keep-alive-text").textContent = never || Number.isFinite(s) ? "= " + durationWords(s) : "";
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
  function showFieldError(param, msg) {
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
      input.focus();
    }
    box.scrollIntoView({ block: "nearest" });
    return true;
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
    if (!Number.isInteger(body.context_length)) {
      showFieldError("context_length", "Write a whole number of tokens, or 0 for automatic.");
      $("settings-note").textContent = "Not saved: see the field marked.";
      return;
    }
    if (!Number.isInteger(body.parallel)) {
      showFieldError("parallel", "Write a whole number of requests, or 0 for automatic.");
      $("settings-note").textContent = "Not saved: see the field marked.";
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
      if (err.param && showFieldError(err.param, err.message)) {
        $("settings-note").textContent = "Not saved: see the field marked.";
      } else {
        $("settings-note").textContent = "Not saved: " + err.message;
      }
    }
  });

  window.NPUSettings = { load };
})();
