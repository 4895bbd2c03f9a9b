// theme.js runs in the head, before the page is drawn: it applies the
// theme the user chose last time (light or dark), or none, in which case
// the CSS follows the system's preference. The toggle button cycles
// system → the other theme → back to the system one, and remembers it.
"use strict";
(function () {
  const root = document.documentElement;
  const saved = localStorage.getItem("npuchat-theme");
  if (saved === "light" || saved === "dark") root.dataset.theme = saved;
  const systemDark = () => window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  const current = () => root.dataset.theme || (systemDark() ? "dark" : "light");
  document.addEventListener("DOMContentLoaded", () => {
    const btn = document.getElementById("theme-toggle");
    if (!btn) return;
    const label = () => {
      const next = current() === "dark" ? "light" : "dark";
      btn.setAttribute("aria-label", "Switch to the " + next + " theme");
      btn.title = "Switch to the " + next + " theme";
      btn.setAttribute("aria-pressed", String(current() === "dark"));
    };
    label();
    btn.addEventListener("click", () => {
      const next = current() === "dark" ? "light" : "dark";
      root.dataset.theme = next;
      localStorage.setItem("npuchat-theme", next);
      label();
    });
  });
})();
