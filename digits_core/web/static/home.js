/* Home page: collapsible job groups (remembered in localStorage), live search, bulk delete with one
   confirmation, and a reload every 5 s while jobs run that waits while the user is selecting or typing. */
window.DIGITS.homePage = function () {
  "use strict";
  var KEY = "digits.home.collapsed";
  var search = document.getElementById("job-search");
  var form = document.getElementById("bulk-form");
  var button = document.getElementById("bulk-delete");
  var box = document.getElementById("home-jobs");
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.jobs"));

  function all(root, selector) { return Array.prototype.slice.call(root.querySelectorAll(selector)); }
  function collapsedSet() {
    try { return new Set(JSON.parse(localStorage.getItem(KEY) || "[]")); } catch (e) { return new Set(); }
  }
  function groupKey(tbody) { return tbody.closest("table").dataset.kind + "|" + tbody.dataset.group; }

  /* Groups: a click on the name folds or unfolds them; the state survives reloads. */
  var collapsed = collapsedSet();
  all(document, "tbody.job-group").forEach(function (tbody) {
    var toggle = tbody.querySelector(".group-toggle");
    function show(folded) {
      tbody.classList.toggle("collapsed", folded);
      toggle.setAttribute("aria-expanded", folded ? "false" : "true");
    }
    show(collapsed.has(groupKey(tbody)));
    toggle.addEventListener("click", function () {
      var folded = !tbody.classList.contains("collapsed");
      show(folded);
      collapsed = collapsedSet();
      if (folded) { collapsed.add(groupKey(tbody)); } else { collapsed.delete(groupKey(tbody)); }
      localStorage.setItem(KEY, JSON.stringify(Array.from(collapsed)));
    });
    tbody.querySelector(".group-select").addEventListener("change", function (e) {
      all(tbody, "tr.job-row:not([hidden]) .job-select").forEach(function (c) { c.checked = e.target.checked; });
      selectionChanged();
    });
  });

  /* Search: every term must occur in the row's data-search (name, id, group, status, plugin, network). */
  function filter() {
    var terms = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0, total = 0;
    tables.forEach(function (table) {
      table.classList.toggle("searching", terms.length > 0);  /* matches show even in folded groups */
      var visible = 0;
      all(table, "tr.job-row").forEach(function (row) {
        var hit = terms.every(function (t) { return row.dataset.search.indexOf(t) >= 0; });
        row.hidden = !hit;
        if (!hit) { row.querySelector(".job-select").checked = false; }
        total += 1; if (hit) { shown += 1; visible += 1; }
      });
      all(table, "tbody.job-group").forEach(function (tbody) {
        tbody.hidden = !tbody.querySelector("tr.job-row:not([hidden])");
      });
      var none = table.parentNode.querySelector(".no-match");
      if (none) {
        none.hidden = visible > 0 || !!table.querySelector("tr.empty") || terms.length === 0;
        none.querySelector(".query").textContent = search.value.trim();
      }
    });
    var count = document.getElementById("search-count");
    count.textContent = terms.length ? shown + " of " + total + " jobs shown" : "";
    var url = new URL(window.location.href);
    if (search.value.trim()) { url.searchParams.set("q", search.value.trim()); } else { url.searchParams.delete("q"); }
    window.history.replaceState(null, "", url.pathname + url.search);
    form.elements.q.value = search.value.trim();
    selectionChanged();
  }
  if (search) { search.addEventListener("input", filter); }

  /* Bulk delete: the button counts the ticked jobs; one confirmation names them and the running ones. */
  function selected() { return all(document, ".job-select:checked").map(function (c) { return c.closest("tr"); }); }
  /* Compare ticked: the ticked models on /compare (two or more; datasets are not compared). */
  function compareChanged(rows) {
    var link = document.getElementById("compare-ticked");
    if (!link) { return; }
    var ids = rows.filter(function (r) { return r.closest("#models-table"); }).map(function (r) { return r.dataset.id; });
    link.setAttribute("aria-disabled", ids.length >= 2 ? "false" : "true");
    link.textContent = ids.length ? "Compare ticked models (" + ids.length + ")" : "Compare ticked models";
    link.href = link.dataset.base + "?jobs=" + encodeURIComponent(ids.join(","));
  }
  document.addEventListener("click", function (e) {
    var link = e.target.closest ? e.target.closest("#compare-ticked") : null;
    if (link && link.getAttribute("aria-disabled") === "true") { e.preventDefault(); }
  });
  function selectionChanged() {
    var rows = selected();
    compareChanged(rows);
    button.disabled = rows.length === 0;
    button.textContent = rows.length ? "Delete selected (" + rows.length + ")" : "Delete selected";
    all(document, "tbody.job-group").forEach(function (tbody) {
      var boxes = all(tbody, "tr.job-row:not([hidden]) .job-select");
      var ticked = boxes.filter(function (c) { return c.checked; }).length;
      var head = tbody.querySelector(".group-select");
      head.checked = boxes.length > 0 && ticked === boxes.length;
      head.indeterminate = ticked > 0 && ticked < boxes.length;
    });
  }
  document.addEventListener("change", function (e) { if (e.target.classList.contains("job-select")) { selectionChanged(); } });
  form.addEventListener("submit", function (e) {
    var rows = selected();
    if (!rows.length) { e.preventDefault(); return; }
    var names = rows.map(function (r) { return r.dataset.name; });
    var active = rows.filter(function (r) { return r.dataset.status === "Running" || r.dataset.status === "Waiting"; });
    var message = "Delete " + rows.length + " job" + (rows.length > 1 ? "s" : "") + " and all their files?\n\n" +
      names.slice(0, 12).join("\n") + (names.length > 12 ? "\n… and " + (names.length - 12) + " more" : "");
    if (active.length) {
      message += "\n\n" + active.length + " of them " + (active.length > 1 ? "are" : "is") +
        " running or waiting and will be aborted first: " + active.map(function (r) { return r.dataset.name; }).join(", ") + ".";
    }
    if (!window.confirm(message)) { e.preventDefault(); return; }
    button.disabled = true;
    button.textContent = active.length ? "Aborting and deleting…" : "Deleting…";
  });
  if (search && search.value) { filter(); } else { selectionChanged(); }

  /* While jobs run, reload every 5 s for fresh progress, but never under the user's hands. */
  if (box && box.dataset.active === "true") {
    var tick = function () {
      var busy = selected().length > 0 || document.activeElement === search ||
        (search && search.value.trim() !== (new URL(window.location.href).searchParams.get("q") || ""));
      if (busy) { setTimeout(tick, 5000); } else { window.DIGITS.reloadPage(); }
    };
    setTimeout(tick, 5000);
  }
};
