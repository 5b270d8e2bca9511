/* The sweep page keeps itself current: while the sweep runs it polls the page's JSON twin and, when a trial
   starts, finishes or improves or the sweep's status changes, swaps in the page's fresh header, tables and
   buttons. Abort and Resume post their form (with its CSRF token) and poll again. */
(function () {
  "use strict";
  var live = document.getElementById("sweep-live");
  if (!live || !live.dataset.json) { return; }
  var url = live.dataset.json, timer = null, busy = false;
  function signature(s) {
    return s.status + "|" + (s.trials || []).map(function (r) {
      return r.job_id + ":" + r.status + ":" + r.best + ":" + r.epochs;
    }).join(",") + "|" + (s.pending || []).length + "|" + s.promoted;
  }
  var seed = document.getElementById("sweep-data"), shown = "";
  try { shown = signature(JSON.parse(seed.textContent)); } catch (e) { shown = ""; }
  function swap() {
    return fetch(window.location.href, { credentials: "same-origin" }).then(function (r) { return r.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("sweep-live");
        if (fresh) { live.innerHTML = fresh.innerHTML; bind(); }
      });
  }
  function poll() {
    timer = null;
    if (busy || document.hidden) { schedule(); return; }
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) { return null; }
        var sig = signature(s), changed = sig !== shown;
        shown = sig;
        if (s.status === "Running") { schedule(); }
        return changed ? swap() : null;
      })
      .catch(function () { schedule(); })
      .then(function () { busy = false; });
  }
  function schedule() { if (!timer) { timer = window.setTimeout(poll, 2000); } }
  function bind() {
    live.querySelectorAll("form.sweep-action").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var button = form.querySelector("button");
        if (button) { button.disabled = true; }
        fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" })
          .then(function () { shown = ""; poll(); });
      });
    });
  }
  bind();
  poll();
}());
