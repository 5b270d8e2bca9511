/* DIGITS Core web UI behaviour: sortable tables, live job pages, charts, form helpers. No dependencies
   besides the vendored Chart.js on pages that draw charts. */
(function () {
  "use strict";
  var DIGITS = {};

  function getJSON(url) {
    return fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" }).then(function (r) {
      return r.json().then(function (body) { if (!r.ok) { throw body; } return body; });
    });
  }
  DIGITS.getJSON = getJSON;

  var STATUS_CLASSES = { Initialized: "muted", Waiting: "muted", Running: "info", Done: "ok", Error: "bad", Aborted: "warn",
                         "Stopped early": "warn" };
  function setStatus(status) {
    var badge = document.getElementById("job-status");
    if (!badge || !status) { return; }
    badge.textContent = status;
    badge.className = "badge " + (STATUS_CLASSES[status] || "muted");
  }

  /* Sortable tables: click a header with data-sort="text|num"; cells may carry data-value. Each tbody
     (e.g. a job group on the home page) is sorted on its own; one-cell rows (group heads) stay first. */
  function initSortable(table) {
    var heads = table.querySelectorAll("th[data-sort]");
    heads.forEach(function (th, index) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var numeric = th.dataset.sort === "num";
        Array.prototype.forEach.call(table.tBodies, function (tbody) {
          var rows = Array.prototype.slice.call(tbody.rows).filter(function (r) { return r.cells.length > 1; });
          rows.sort(function (a, b) {
            var x = a.cells[index].dataset.value || a.cells[index].textContent.trim();
            var y = b.cells[index].dataset.value || b.cells[index].textContent.trim();
            if (numeric) { x = parseFloat(x) || 0; y = parseFloat(y) || 0; return asc ? x - y : y - x; }
            return asc ? x.localeCompare(y) : y.localeCompare(x);
          });
          rows.forEach(function (r) { tbody.appendChild(r); });
        });
      });
    });
  }

  /* Place server-side errors next to inputs of plugin templates that do not print them. */
  DIGITS.placeFieldErrors = function (form) {
    var raw = form && form.getAttribute("data-errors");  /* not form.dataset: a field named "dataset" shadows it */
    if (!raw) { return; }
    var errors = {};
    try { errors = JSON.parse(raw); } catch (e) { return; }
    Object.keys(errors).forEach(function (name) {
      var input = form.querySelector('[name="' + CSS.escape(name) + '"]');
      if (!input) { return; }
      input.classList.add("is-invalid");
      if (form.querySelector('.field-error[data-for="' + CSS.escape(name) + '"]')) { return; }
      var anchor = input.closest(".field") || input;
      var around = input.parentElement;
      (errors[name] || []).forEach(function (message) {
        if (around && around.textContent.indexOf(message) >= 0) { return; }  /* the plugin template shows it */
        var div = document.createElement("div");
        div.className = "field-error"; div.dataset.for = name; div.textContent = message;
        if (anchor === input) { input.insertAdjacentElement("afterend", div); } else { anchor.appendChild(div); }
      });
    });
  };

  /* A GET filter form (Explore's class menu) applies as soon as its select changes; its button stays for no-JS use. */
  DIGITS.autoSubmit = function (select) {
    if (select) { select.addEventListener("change", function () { select.form.submit(); }); }
  };

  /* Source tabs of a dataset form (radio buttons + CSS, see digits.css): on submit, the fields of the
     tabs not chosen are left out, so a folder typed before switching to the list tab is not sent too. */
  DIGITS.sourceTabs = function (form) {
    if (!form) { return; }
    form.addEventListener("submit", function () {
      form.querySelectorAll(".source-tabs").forEach(function (tabs) {
        var radios = tabs.querySelectorAll(":scope > input.tab-radio");
        var panels = tabs.querySelectorAll(":scope > .tab-panel");
        radios.forEach(function (radio, i) {
          if (!radio.checked && panels[i]) {
            panels[i].querySelectorAll("input, select, textarea").forEach(function (el) {
              if (!el.disabled) { el.disabled = true; el.dataset.tabOff = "1"; }
            });
          }
        });
      });
    });
    /* Back from the next page (bfcache): the fields must be editable again. */
    window.addEventListener("pageshow", function () {
      form.querySelectorAll("[data-tab-off]").forEach(function (el) { el.disabled = false; delete el.dataset.tabOff; });
    });
  };

  /* Set once the page is being left: a form of it submitted (a delete that aborts a running job first) or a
     navigation begun (a link, the address bar). The pollers then stop reloading the page, which would cancel
     that request (the user's click lost, the job shown as it was). */
  var leaving = false;
  function reloadPage() { if (!leaving) { window.location.reload(); } }
  document.addEventListener("submit", function (e) {
    var blank = (e.target.target === "_blank") || (e.submitter && e.submitter.formTarget === "_blank");
    if (!e.defaultPrevented && !blank) { leaving = true; }
  });
  window.addEventListener("beforeunload", function () { leaving = true; });
  window.addEventListener("pageshow", function () { leaving = false; });

  DIGITS.reloadPage = reloadPage;
  DIGITS.reloadEvery = function (ms) { setTimeout(reloadPage, ms); };

  /* Dataset page: poll the job's JSON, update progress bars, reload when the job ends. */
  DIGITS.watchJob = function (box) {
    if (!box || box.dataset.active !== "true") { return; }
    var url = box.dataset.url;
    function tick() {
      getJSON(url).then(function (d) {
        if (d.job) { setStatus(d.job.status); }
        var p = d.progress || {};
        var stages = p.stages || {};
        var needReload = false;
        Object.keys(stages).forEach(function (stage) {
          var row = box.querySelector('tr[data-stage="' + stage + '"]');
          if (!row) { needReload = true; return; }
          var s = stages[stage];
          var bar = row.querySelector(".bar");
          if (bar) { bar.style.width = (s.total ? 100 * s.done / s.total : 100) + "%"; }
          var done = row.querySelector(".done");
          if (done) { done.textContent = s.done; }
        });
        var rate = document.getElementById("progress-rate");
        if (rate && p.rate) { rate.textContent = p.rate + " entries/s" + (p.eta_s ? " · ETA " + Math.round(p.eta_s) + " s" : ""); }
        if (d.job && ["Done", "Error", "Aborted"].indexOf(d.job.status) >= 0) { needReload = true; }
        if (needReload) { reloadPage(); } else { setTimeout(tick, 1000); }
      }).catch(function () { setTimeout(tick, 3000); });
    }
    setTimeout(tick, 800);
  };

  function cell(text, className) {
    var td = document.createElement("td");
    td.textContent = text; if (className) { td.className = className; }
    return td;
  }
  function humanSize(n) {
    var units = ["B", "KB", "MB", "GB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }
  function formatDuration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 60) { return s + " s"; }
    if (s < 3600) { return Math.floor(s / 60) + " min " + (s % 60) + " s"; }
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  DIGITS.formatDuration = formatDuration;
  function formatTime(seconds) {  /* as the server renders it: YYYY-MM-DD HH:MM */
    var t = new Date(seconds * 1000), pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return t.getFullYear() + "-" + pad(t.getMonth() + 1) + "-" + pad(t.getDate()) + " " + pad(t.getHours()) + ":" + pad(t.getMinutes());
  }

  /* Model page, live: snapshots table (newest 6), status history, error banner, epoch and ETA. */
  function updateJobPanels(d, clock) {
    var snaps = document.querySelector("#snapshots tbody");
    if (snaps && d.snapshots && d.snapshots.length) {
      snaps.textContent = "";
      d.snapshots.slice().reverse().slice(0, 6).forEach(function (s) {
        var tr = document.createElement("tr");
        tr.appendChild(cell(s.epoch === null ? "" : String(s.epoch), "num"));
        tr.appendChild(cell(s.file)); tr.appendChild(cell(humanSize(s.size)));
        if (snaps.parentNode.dataset.downloads === "true" && s.download) {  /* per-epoch export, once not training */
          var td = document.createElement("td"), a = document.createElement("a");
          a.href = s.download; a.className = "snapshot-download"; a.textContent = "Download"; a.setAttribute("download", "");
          td.appendChild(a); tr.appendChild(td);
        }
        snaps.appendChild(tr);
      });
    }
    var note = document.getElementById("no-snapshot-note");
    if (note && d.snapshots && d.snapshots.length && !note.dataset.live) {
      /* The form is rendered with the page: offer a reload rather than reloading under the user. */
      note.dataset.live = "true";
      note.textContent = "A snapshot is saved: ";
      var link = document.createElement("a");
      link.href = window.location.pathname + "#inference"; link.textContent = "reload the page to test the model";
      link.addEventListener("click", function (e) { e.preventDefault(); window.location.reload(); });
      note.appendChild(link); note.appendChild(document.createTextNode(" (charts keep their history)."));
    }
    var history = document.querySelector("#status-history tbody");
    if (history && d.status_history) {
      history.textContent = "";
      d.status_history.forEach(function (entry, i) {
        var tr = document.createElement("tr"), td = document.createElement("td"), badge = document.createElement("span");
        badge.className = "badge " + (STATUS_CLASSES[entry[0]] || "muted"); badge.textContent = entry[0];
        td.appendChild(badge); tr.appendChild(td);
        tr.appendChild(cell(formatTime(entry[1])));
        var next = d.status_history[i + 1];  /* how long it lasted; the current one: so far */
        tr.appendChild(cell(next ? formatDuration(next[1] - entry[1]) : (d.done ? "" : formatDuration(Date.now() / 1000 - entry[1]) + " so far"), "num"));
        history.appendChild(tr);
      });
    }
    var banner = document.getElementById("job-error");
    if (banner) {
      var running = ["Running", "Waiting", "Initialized"].indexOf(d.status) >= 0;
      banner.hidden = running || !d.error;
      if (!banner.hidden) { banner.textContent = d.error; }
    }
    var progress = document.getElementById("train-progress");
    if (progress && typeof d.epoch === "number") {
      /* the epochs completed, a whole number ("Epoch 5 of 80", never "Epoch 5.21 of 80") */
      var text = "Epoch " + Math.floor(d.epoch + 1e-6) + (d.epochs ? " of " + d.epochs : "");
      var now = Date.now() / 1000;
      if (!clock.start && d.status === "Running") { clock.start = { t: now, epoch: d.epoch }; }
      if (d.status === "Running" && d.epochs && clock.start && d.epoch > clock.start.epoch) {
        var perEpoch = (now - clock.start.t) / (d.epoch - clock.start.epoch);
        text += " · ETA " + formatDuration(perEpoch * (d.epochs - d.epoch));
      }
      progress.textContent = text;
      progress.dataset.epoch = d.epoch;
    }
  }

  /* Model page: poll metrics.json from a byte offset and add the points to the metric panels (charts.js). */
  DIGITS.trainingCharts = function (box) {
    if (!box || typeof Chart === "undefined" || !DIGITS.metricPanels) { return; }
    var panels = DIGITS.metricPanels(document.getElementById("metric-panels") || box,
                                     { first: (box.dataset.first || "loss").split(",") });
    var offset = 0;
    var active = box.dataset.active === "true";
    var clock = {};
    function tick() {
      getJSON(box.dataset.url + "?offset=" + offset).then(function (d) {
        offset = d.offset;
        (d.points || []).forEach(function (p) {
          if (typeof p.value === "number" && isFinite(p.value) && /per_sec|_time|seconds|throughput/.test(p.name)) {
            var speed = document.getElementById("chart-speed");  /* speed figures: text, not a chart */
            if (speed) { speed.textContent = p.name.replace(/_/g, " ") + ": " + p.value.toFixed(0); }
          }
        });
        panels.add(d.points);
        box.dataset.snapshots = (d.snapshots || []).length;
        box.dataset.points = panels.points();
        if ((d.points || []).length || !box.dataset.drawn) { panels.update(); box.dataset.drawn = "true"; }
        setStatus(d.status);
        updateJobPanels(d, clock);
        var info = document.getElementById("chart-status");
        if (info) { info.textContent = d.status === "Waiting" ? "Waiting for a free training slot…" : ""; }
        if (d.done && active) { reloadPage(); return; }
        if (!d.done || (d.points && d.points.length)) { setTimeout(tick, d.done ? 200 : 1500); }
      }).catch(function () { setTimeout(tick, 4000); });
    }
    tick();
    return panels;
  };

  var LR_COLORS = ["#76b900", "#1f77b4", "#d62728", "#9467bd", "#ff7f0e", "#17becf"];

  /* New model page: the learning-rate schedule preview, redrawn when a field changes. */
  DIGITS.lrPreview = function (form, canvas) {
    if (!form || !canvas || typeof Chart === "undefined") { return; }
    var chart = new Chart(canvas, {
      type: "line",
      data: { datasets: [{ label: "learning rate", data: [], borderColor: "#76b900", backgroundColor: "#76b900", pointRadius: 0 }] },
      options: { animation: false, maintainAspectRatio: false, parsing: false,
        scales: { x: { type: "linear", min: 0, max: 100, title: { display: true, text: "% of training" } },
                  y: { type: "linear", beginAtZero: true, title: { display: true, text: "learning rate" } } },
        plugins: { legend: { display: false } } }
    });
    /* The fields the preview sends: the option specs' LR_PREVIEW_OPTIONS, in the form's data-options. */
    var names = JSON.parse(form.getAttribute("data-options") || "{}").lr_preview || [];
    var error = document.getElementById("lr-preview-error");
    var pending = null;
    function refresh() {
      var params = new URLSearchParams();
      names.forEach(function (n) { var el = form.elements[n]; if (el) { params.set(n, el.value); } });
      getJSON(canvas.dataset.url + "?" + params.toString()).then(function (d) {
        /* One line per learning rate of a sweep ("0.1,0.01"), as DIGITS drew them. */
        var series = d.series || [{ learning_rate: null, points: d.points }];
        chart.data.datasets = series.map(function (s, i) {
          var color = LR_COLORS[i % LR_COLORS.length];
          return { label: series.length > 1 ? "lr " + s.learning_rate : "learning rate", borderColor: color,
                   backgroundColor: color, pointRadius: 0,
                   data: s.points.map(function (p) { return { x: p.progress, y: p.lr }; }) };
        });
        chart.options.plugins.legend.display = series.length > 1;
        chart.update();
        canvas.dataset.points = d.points.length;
        canvas.dataset.series = series.length;
        canvas.dataset.query = params.toString();  /* what the chart now shows (tests wait on it) */
        if (error) { error.textContent = ""; }
      }).catch(function (body) {
        /* An invalid value draws nothing: the old curve would pass for the new one. */
        chart.data.datasets.forEach(function (s) { s.data = []; }); chart.update();
        canvas.dataset.points = 0; canvas.dataset.series = 0; canvas.dataset.query = params.toString();
        var messages = body && body.error && body.error.fields;
        if (error) {
          error.textContent = messages ? Object.keys(messages).map(function (k) { return messages[k].join(" "); }).join(" ")
                                       : (body && body.error && body.error.message) || "preview unavailable";
        }
      });
    }
    names.forEach(function (n) {
      var el = form.elements[n];
      if (el) { ["input", "change"].forEach(function (ev) { el.addEventListener(ev, function () { clearTimeout(pending); pending = setTimeout(refresh, 250); }); }); }
    });
    refresh();
  };

  DIGITS.toggleCustomNetwork = function (form, customValue) {
    if (!form) { return; }
    var select = form.elements.network, box = document.getElementById("custom-network-box");
    function update() { box.hidden = select.value !== customValue; }
    select.addEventListener("change", update); update();
  };

  /* What the user typed into a form, kept in sessionStorage for this address, so that a reload shows
     it again (browsers do not always restore a form, and never one the page's script filled). */
  function keptValues(form) {
    var key = "digits-form:" + window.location.pathname + window.location.search, store = null;
    try { store = window.sessionStorage; } catch (e) { store = null; }
    function read() { try { return JSON.parse(store.getItem(key) || "{}"); } catch (e) { return {}; } }
    return {
      save: function (el) {
        if (!store || el.type === "file" || el.type === "hidden" || el.type === "password") { return; }
        var values = read(); values[el.name] = el.value;
        try { store.setItem(key, JSON.stringify(values)); } catch (e) { /* full: nothing kept */ }
      },
      restore: function (each) {
        var nav = window.performance && performance.getEntriesByType ? performance.getEntriesByType("navigation")[0] : null;
        if (!store || !nav || nav.type !== "reload") { store && store.removeItem(key); return; }
        var values = read();
        Object.keys(values).forEach(function (name) {
          var el = form.elements[name];
          if (el && el.value !== values[name]) { el.value = values[name]; el.dispatchEvent(new Event("change")); }
          if (el) { each(el); }
        });
      },
      clear: function () { if (store) { store.removeItem(key); } }
    };
  }

  /* New model: hide options that do not apply to the solver / LR policy, give the untouched fields the
     new network's defaults when the network changes, and send only what differs from the defaults (the
     engine fills the rest). The page is rendered with every value (defaults, a clone's options, what was
     typed before an error): loading it changes none. */
  DIGITS.trainingOptions = function (form) {
    /* getAttribute, not form.dataset: the form's <select name="dataset"> shadows form.dataset. */
    var options = form && form.getAttribute("data-options");
    if (!options) { return; }
    var meta = JSON.parse(options), network = form.elements.network;
    var shown = {};  /* the defaults of the network the fields were last filled for */
    function defaultsOf(name) {
      var defaults = meta.defaults[name] || {}, out = {};
      Object.keys(defaults).forEach(function (k) { out[k] = defaults[k] === null ? "" : String(defaults[k]); });
      return out;
    }
    function untouched(el, name) { return !el.dataset.touched && el.value === shown[name]; }
    function fill() {
      var defaults = defaultsOf(network.value);
      Object.keys(defaults).forEach(function (name) {
        var el = form.elements[name];
        if (!el) { return; }
        if ((!(name in shown) || untouched(el, name)) && el.value !== defaults[name]) {
          el.value = defaults[name];
          el.dispatchEvent(new Event("change"));  // e.g. the LR preview follows
        }
        shown[name] = defaults[name];
      });
      applies();
    }
    function applies() {
      var solver = form.elements.solver ? form.elements.solver.value : null;
      var policy = form.elements.lr_policy ? form.elements.lr_policy.value : null;
      Object.keys(meta.applies).forEach(function (name) {
        var rule = meta.applies[name], box = form.querySelector('[data-field="' + name + '"]');
        if (!box) { return; }
        box.hidden = (rule.solvers && rule.solvers.indexOf(solver) < 0) ||
                     (rule.policies && rule.policies.indexOf(policy) < 0);
      });
    }
    /* The input a network sees, as the engine's check_network_input measures it: the network
       parameter input_size (resized in the graph), else the crop, else the dataset's images. */
    function inputSize() {
      var params = {}, crop = form.elements.crop_size ? parseInt(form.elements.crop_size.value, 10) : NaN;
      try { params = JSON.parse((form.elements.network_params || {}).value || "{}") || {}; } catch (e) { params = {}; }
      if (parseInt(params.input_size, 10) > 0) { return { size: parseInt(params.input_size, 10), why: "input_size " + params.input_size }; }
      if (crop > 0) { return { size: crop, why: "the crop is " + crop + "×" + crop }; }
      var hw = form.elements.dataset && meta.dataset_sizes ? meta.dataset_sizes[form.elements.dataset.value] : null;
      return hw ? { size: Math.min(hw[0], hw[1]), why: "the images are " + hw[0] + "×" + hw[1] } : null;
    }
    /* Only the networks made for the chosen dataset's task (custom code always), and only the
       pretrained models of that task; a network whose declared minimum input exceeds the images is
       disabled, its reason in its label and under the menu. */
    function filterNetworks() {
      var dataset = form.elements.dataset, tasks = meta.network_tasks || {}, minimum = meta.network_min_size || {};
      var task = dataset && meta.dataset_tasks ? meta.dataset_tasks[dataset.value] : null;
      var input = inputSize(), hidden = 0, small = [];
      Array.prototype.forEach.call(network.options, function (option) {
        if (!option.dataset.label) { option.dataset.label = option.textContent; }
        var fits = !task || !tasks[option.value] || !tasks[option.value].length || tasks[option.value].indexOf(task) >= 0;
        var need = minimum[option.value], tooSmall = fits && need && input && input.size < need;
        option.textContent = option.dataset.label + (tooSmall ? " — needs ≥ " + need + "×" + need : "");
        option.title = tooSmall ? option.value + " needs inputs of at least " + need + "×" + need + "; " + input.why : "";
        if (!fits) { hidden += 1; }
        if (tooSmall) { small.push(option.value); }
        option.hidden = !fits; option.disabled = !fits || !!tooSmall;
      });
      var sizeNote = document.getElementById("network-size-note");
      if (sizeNote) {
        sizeNote.textContent = small.length ? "Not offered: " + small.join(", ") + " (minimum input above " + input.size +
          " pixels; " + input.why + "). Set the network parameter {\"input_size\": N} to resize in the network, or resize the dataset." : "";
      }
      var pretrained = form.elements.pretrained, modelTasks = meta.model_tasks || {};
      if (pretrained) {
        Array.prototype.forEach.call(pretrained.options, function (option) {
          var fits = !task || !option.value || !modelTasks[option.value] || modelTasks[option.value] === task;
          option.hidden = !fits; option.disabled = !fits;
        });
        if (pretrained.selectedOptions.length && pretrained.selectedOptions[0].disabled) { pretrained.value = ""; }
      }
      var note = document.getElementById("network-task-note");
      if (note) {
        note.textContent = task ? "Networks for a " + task + " dataset" +
          (hidden ? " (" + hidden + " for other kinds of data hidden)." : ".") : "";
      }
      if (network.selectedOptions.length && network.selectedOptions[0].disabled) {
        var first = Array.prototype.find.call(network.options, function (o) { return !o.disabled; });
        if (first) { network.value = first.value; network.dispatchEvent(new Event("change")); }
      }
    }
    shown = defaultsOf(network.value);  /* what the server filled the fields from */
    var kept = keptValues(form);
    function touch(e) {
      if (e.isTrusted && e.target.name) { e.target.dataset.touched = "1"; kept.save(e.target); }
    }
    form.addEventListener("input", touch);
    form.addEventListener("change", touch);
    /* The weights picker: none, the network's declared weights, the zoo's entries for this network, or a
       file (typed into the weights field); shown for networks that take weights. */
    var picker = document.getElementById("weights-picker"), weights = form.elements.weights;
    function pickerOptions() {
      var box = document.getElementById("backbone-box"), declared = (meta.network_weights || {})[network.value];
      if (box) { box.hidden = !declared; }
      if (!picker || !weights) { return; }
      picker.innerHTML = "";
      function add(value, text) {
        var option = document.createElement("option"); option.value = value; option.textContent = text; picker.appendChild(option);
      }
      add("none", "none (random weights)");
      (declared || []).forEach(function (name) { add(name, name + " (the network's published weights)"); });
      (meta.zoo || []).forEach(function (entry) {
        if (!entry.network || entry.network.toLowerCase() === network.value.toLowerCase()) {
          add(entry.name, entry.name + " (model zoo" + (entry.task ? ", " + entry.task : "") + ")");
        }
      });
      add("", "a weights file under a data root…");
      syncPicker();
    }
    function syncPicker() {
      /* empty: the network's default (what the engine uses when the field is left out) */
      var value = weights.value.trim() || String((meta.defaults[network.value] || {}).weights || "none"), known = Array.prototype.some.call(picker.options, function (o) { return o.value && o.value === value; });
      picker.value = known ? value : "";
    }
    if (picker && weights) {
      picker.addEventListener("change", function () {
        weights.value = picker.value; weights.dataset.touched = "1"; kept.save(weights);
        if (!picker.value) { weights.focus(); }
      });
      weights.addEventListener("input", syncPicker);
    }
    network.addEventListener("change", fill);
    network.addEventListener("change", pickerOptions);
    if (form.elements.dataset) { form.elements.dataset.addEventListener("change", filterNetworks); }
    ["network_params", "crop_size"].forEach(function (n) { if (form.elements[n]) { form.elements[n].addEventListener("input", filterNetworks); } });
    ["solver", "lr_policy"].forEach(function (n) { if (form.elements[n]) { form.elements[n].addEventListener("change", applies); } });
    kept.restore(function (el) { el.dataset.touched = "1"; });
    filterNetworks();
    pickerOptions();
    applies();
    function enableAll() {
      form.querySelectorAll("[data-default-off]").forEach(function (el) { el.disabled = false; delete el.dataset.defaultOff; });
    }
    form.addEventListener("submit", function () {
      kept.clear();
      Object.keys(shown).forEach(function (name) {
        var el = form.elements[name], box = form.querySelector('[data-field="' + name + '"]');
        if (el && !el.disabled && (el.value === shown[name] || (box && box.hidden))) {
          el.disabled = true; el.dataset.defaultOff = "1";
        }
      });
      /* The form data is taken during the submit: Visualize (a new tab) leaves this page editable. */
      setTimeout(enableAll, 0);
    });
    window.addEventListener("pageshow", enableAll);  /* back from the next page (bfcache) */
  };

  /* Model page: load the chosen view's config form. */
  DIGITS.viewConfig = function (select, box) {
    if (!select || !box) { return; }
    function load() {
      fetch(box.dataset.url + "?view_id=" + encodeURIComponent(select.value), { credentials: "same-origin" })
        .then(function (r) { return r.text(); }).then(function (html) { box.innerHTML = html; });
    }
    select.addEventListener("change", load); load();
  };

  /* Inference form: typing in an input section selects that section's radio button. */
  DIGITS.inferenceInputs = function (form) {
    if (!form) { return; }
    function pick(value) { var r = form.querySelector('input[name=input_mode][value="' + value + '"]'); if (r) { r.checked = true; } }
    var plugin = form.querySelector(".plugin-form");
    if (plugin) { ["input", "change"].forEach(function (ev) { plugin.addEventListener(ev, function () { pick("plugin"); }); }); }
    var files = document.getElementById("infer-images");
    if (files) { files.addEventListener("change", function () { pick("upload"); }); }
    var path = document.getElementById("infer-path");
    if (path) { path.addEventListener("input", function () { pick("path"); }); }
  };

  /* Inference form: while the request runs (the first one loads the model in the worker), say so, with
     the seconds elapsed, and stop a second submit. */
  DIGITS.inferenceLoading = function (form, status) {
    if (!form || !status) { return; }
    var timer = null;  /* not form.dataset: a plugin field named "dataset" would shadow it */
    var button = document.getElementById("infer-button");
    form.addEventListener("submit", function (e) {
      if (e.defaultPrevented) { return; }
      if (timer !== null) { e.preventDefault(); return; }
      var started = Date.now();
      function show() {
        status.textContent = "Loading model and running inference… " + Math.round((Date.now() - started) / 1000) + " s";
      }
      show(); timer = setInterval(show, 1000);
      if (button) { setTimeout(function () { button.disabled = true; }, 0); }  /* after the submit is under way */
    });
    /* Back from the results page (bfcache): the form is usable again. */
    window.addEventListener("pageshow", function () {
      if (timer !== null) { clearInterval(timer); timer = null; }
      status.textContent = ""; if (button) { button.disabled = false; }
    });
  };

  /* Results page: many samples are shown a page at a time (data-page-size), with a pager above and below. */
  DIGITS.pageResults = function (box) {
    if (!box) { return; }
    var items = Array.prototype.slice.call(box.children).filter(function (el) { return el.classList.contains("result-sample"); });
    var size = parseInt(box.dataset.pageSize, 10) || 50, pages = Math.ceil(items.length / size), current = 0;
    box.querySelectorAll(":scope > .pager").forEach(function (p) { p.remove(); });
    if (pages <= 1) { items.forEach(function (el) { el.hidden = false; }); return; }
    var pagers = [document.createElement("nav"), document.createElement("nav")];
    function show(page) {
      current = Math.max(0, Math.min(pages - 1, page));
      items.forEach(function (el, i) { el.hidden = Math.floor(i / size) !== current; });
      pagers.forEach(function (nav) {
        nav.textContent = "";
        var prev = document.createElement("button"), next = document.createElement("button"), label = document.createElement("span");
        prev.type = next.type = "button"; prev.className = next.className = "btn";
        prev.textContent = "‹ Previous"; next.textContent = "Next ›";
        prev.disabled = current === 0; next.disabled = current === pages - 1;
        prev.addEventListener("click", function () { show(current - 1); });
        next.addEventListener("click", function () { show(current + 1); });
        label.className = "muted"; label.textContent = "Samples " + (current * size + 1) + "–" +
          Math.min(items.length, (current + 1) * size) + " of " + items.length;
        nav.appendChild(prev); nav.appendChild(label); nav.appendChild(next);
      });
      box.dataset.page = current;
    }
    pagers.forEach(function (nav) { nav.className = "pager"; });
    box.insertBefore(pagers[0], box.firstChild); box.appendChild(pagers[1]);
    show(0);
  };

  /* Results page with several samples: a compact table (one line per sample; "cards" on demand) that sorts
     by the values a view marks on its sample element (data-sort-KEY="value", e.g. data-sort-probability). */
  DIGITS.resultsLayout = function (box) {
    if (!box) { return; }
    var items = Array.prototype.filter.call(box.children, function (el) { return el.classList.contains("result-sample"); });
    if (items.length < 2) { return; }
    var keys = ["input"];
    items.forEach(function (item) {
      var marked = item.querySelector("[data-sort-probability], [data-sort-correct], [data-sort-label]") || item.firstElementChild;
      Array.prototype.forEach.call((marked && marked.attributes) || [], function (a) {
        var m = /^data-sort-(.+)$/.exec(a.name);
        if (m && keys.indexOf(m[1]) < 0) { keys.push(m[1]); }
      });
    });
    var bar = document.createElement("div"), layout = document.createElement("select"), sort = document.createElement("select");
    bar.className = "results-toolbar small"; bar.id = "results-toolbar";
    layout.id = "results-layout"; sort.id = "results-sort";
    [["table", "compact table"], ["cards", "cards"]].forEach(function (o) { layout.appendChild(new Option(o[1], o[0])); });
    keys.forEach(function (k) {
      sort.appendChild(new Option(k.replace(/-/g, " ") + " ↑", k + ":asc"));
      sort.appendChild(new Option(k.replace(/-/g, " ") + " ↓", k + ":desc"));
    });
    [["Layout ", layout], ["Sort by ", sort]].forEach(function (pair) {
      var label = document.createElement("label"); label.textContent = pair[0]; label.appendChild(pair[1]); bar.appendChild(label);
    });
    box.parentNode.insertBefore(bar, box);
    function value(item, key) {
      if (key === "input") { var id = item.querySelector("[data-input-id]"); return id ? id.getAttribute("data-input-id") : item.textContent; }
      var el = item.querySelector("[data-sort-" + key + "]");
      return el ? el.getAttribute("data-sort-" + key) : "";
    }
    function apply() {
      box.classList.toggle("results-table", layout.value === "table");
      var parts = sort.value.split(":"), key = parts[0], asc = parts[1] === "asc";
      var rows = Array.prototype.filter.call(box.children, function (el) { return el.classList.contains("result-sample"); });
      rows.sort(function (a, b) {
        var x = value(a, key), y = value(b, key), nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y), undefined, { numeric: true });
        return asc ? c : -c;
      });
      var tail = Array.prototype.find.call(box.children, function (el) { return el.classList.contains("pager") && el !== box.firstChild; });
      rows.forEach(function (r) { box.insertBefore(r, tail || null); });
      DIGITS.pageResults(box);
      box.dataset.sort = sort.value; box.dataset.layout = layout.value;
    }
    layout.addEventListener("change", apply); sort.addEventListener("change", apply);
    apply();
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(initSortable);
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (e) { if (!window.confirm(f.dataset.confirm)) { e.preventDefault(); } });
    });
    document.querySelectorAll("details.dropdown").forEach(function (d) {
      document.addEventListener("click", function (e) { if (!d.contains(e.target)) { d.removeAttribute("open"); } });
    });
  });
  window.DIGITS = DIGITS;
})();
