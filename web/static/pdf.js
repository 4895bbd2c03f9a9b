// pdf.js: a PDF attachment's text. The page sends the PDF a person
// dropped or picked to the server (POST /api/attachments/pdf), which
// takes the text out (package pdftext, bounded in size, pages, text and
// time); the text then goes into the message with the file's name like a
// text file's, counted against the context the same way. Errors are the
// server's sentences, said with the file's name.
"use strict";

(function () {
  const maxBytes = 8 * 1024 * 1024;

  const isPDF = (f) => /\.pdf$/i.test(f.name || "") || f.type === "application/pdf";

  function sentence(s) {
    s = String(s || "").trim();
    if (!s) return "";
    return s.charAt(0).toUpperCase() + s.slice(1) + (/[.!?]$/.test(s) ? "" : ".");
  }

  // read returns {name, text, size, pages, truncated} for the PDF file f;
  // headers are the page's request headers (the API key, when there is
  // one). It throws an Error whose message is a sentence for the person.
  async function read(f, headers) {
    const name = "“" + f.name + "”";
    if (f.size > maxBytes) throw new Error(name + " is larger than 8 MB: attach a smaller PDF, or the pages that matter.");
    let r;
    try {
      const h = Object.assign({}, headers || {}, { "Content-Type": "application/pdf" });
      r = await fetch("/api/attachments/pdf", { method: "POST", headers: h, body: f });
    } catch (_) {
      throw new Error(name + " could not be read: NPU Chat is not reachable.");
    }
    const data = await r.json().catch(() => ({}));
    if (!r.ok) {
      // NPU Chat's own routes answer {"error": "sentence"}.
      const msg = (typeof data.error === "string" ? data.error : data.error && data.error.message) || "the server answered " + r.status;
      throw new Error(name + ": " + sentence(msg));
    }
    return { name: f.name, text: String(data.text || ""), size: f.size, pages: data.pages || 0, truncated: !!data.truncated };
  }

  window.NPUPdf = { isPDF, read };
})();
