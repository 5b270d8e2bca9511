/* The pool page (issue 46): while its scoring or round runs, the status and scoring progress follow the job
   (GET /api/pools/<id> every second); when it ends, the run, counts, rounds and queue panels are fetched again
   and swapped in, so the new round shows in the table and chart without a reload. */
(function () {
  "use strict";
  var box = document.getElementById("pool-run-status");
  if (!box) { return; }
  var RUNNING = { "Waiting": true, "Running": true, "Initialized": true };
  var PANELS = ["pool-run", "pool-counts-panel", "pool-rounds-panel", "pool-queue-panel"];

  function show(data) {
    var progress = data.progress || {};
    var text = data.status + (progress.total ? ", scored " + progress.done + "/" + progress.total : "");
    var state = document.getElementById("pool-run-state");
    if (state) { state.textContent = text; }
    var bar = document.querySelector("#pool-run-progress .bar");
    if (bar && progress.total) { bar.style.width = (100 * progress.done / progress.total).toFixed(1) + "%"; }
    box.dataset.status = data.status;
    box.dataset.seen = (box.dataset.seen ? box.dataset.seen + "," : "") + data.status;
  }
  function refresh() {
    return fetch(window.location.pathname, { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("the pool page answered " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        PANELS.forEach(function (id) {
          var fresh = doc.getElementById(id), old = document.getElementById(id);
          if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
        });
        document.body.dataset.poolRefreshed = String(Number(document.body.dataset.poolRefreshed || 0) + 1);
      })
      .catch(function (err) {
        var state = document.getElementById("pool-run-state");
        if (state) { state.textContent = box.dataset.status + "; reload the page to see the result (" + err.message + ")"; }
      });
  }
  function poll() {
    fetch(box.dataset.api, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        show(data);
        if (RUNNING[data.status]) { window.setTimeout(poll, 1000); } else { refresh(); }
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }
  if (RUNNING[box.dataset.status]) { window.setTimeout(poll, 500); }
})();
