/* DIGITS Core metric charts, as a TensorBoard user reads them: one panel per tag (loss with val_loss,
   accuracy with val_accuracy, the per-class APs of a detector together), smoothing, log scale, drag to zoom
   (with a reset), epoch or wall-time axis, and the final / best value of every series as text.

   Reusable entry point (the model page uses it for one run; a comparison page overlays runs):

     var panels = DIGITS.metricPanels(box, {first: ["loss", "accuracy"]});
     panels.add(points, "run A");   // points: [{epoch, name, value, time?}]; the run names an overlaid series
     panels.update();               // redraw after adds
     panels.summary();              // {"run A · val_loss": {final, best, bestEpoch, higherIsBetter}}
     panels.remove("run A");        // take a run's series off again (then update())

   `box` is an empty element; the controls, panels and summary table are made inside it. Needs Chart.js. */
(function () {
  "use strict";
  var DIGITS = window.DIGITS = window.DIGITS || {};
  var COLORS = ["#1565c0", "#76b900", "#c62828", "#8e24aa", "#ef6c00", "#00838f", "#6d4c41", "#546e7a",
                "#ad1457", "#2e7d32", "#4527a0", "#f9a825"];

  /* Metrics in 0..1 (higher is better): accuracy, top-k, Dice, IoU, mAP, AP, precision/recall. */
  function isRatio(name) { return /acc|top_?\d|dice|iou|precision|recall|f1|map|(^|_)ap/i.test(name); }
  DIGITS.isRatio = isRatio;
  function isSpeed(name) { return /per_sec|_time|seconds|throughput/.test(name); }
  /* The engine's early-stopping records (early_stopped, early_stopping_best_epoch, ...): bookkeeping the
     page states in words, not metrics to chart. */
  function isBookkeeping(name) { return /^early_stop/.test(name); }
  /* An epoch as a person reads it: 7 for 7.0 (or 6.9999999), else two decimals. */
  function formatEpoch(e) {
    if (typeof e !== "number" || !isFinite(e)) { return ""; }
    return Math.abs(e - Math.round(e)) < 1e-6 ? String(Math.round(e)) : String(Math.round(e * 100) / 100);
  }
  DIGITS.formatEpoch = formatEpoch;
  function baseName(name) { return name.replace(/^val_/, ""); }

  /* The panel of a series: its base name (val_ stripped), or the family of per-class series
     ("ap50_car", "ap50_van", ... share the panel "ap50 per class") once three share a first word. */
  function panelKeys(names) {
    var families = {};
    names.forEach(function (n) {
      var b = baseName(n), m = /^([a-z0-9]+)_(.+)$/i.exec(b);
      if (m) { (families[m[1]] = families[m[1]] || {})[b] = true; }
    });
    var keys = {};
    names.forEach(function (n) {
      var b = baseName(n), m = /^([a-z0-9]+)_(.+)$/i.exec(b);
      keys[n] = (m && Object.keys(families[m[1]]).length >= 3) ? m[1] + " per class" : (n === "lr" ? "learning_rate" : b);
    });
    return keys;
  }

  function smooth(values, weight) {  /* TensorBoard's debiased exponential moving average */
    if (!weight) { return values; }
    var last = 0, out = [];
    values.forEach(function (p, i) {
      last = last * weight + (1 - weight) * p.y;
      out.push({ x: p.x, y: last / (1 - Math.pow(weight, i + 1)) });
    });
    return out;
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function format(v) {
    if (v === null || v === undefined || !isFinite(v)) { return ""; }
    var a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(Math.round(v * 10000) / 10000);
  }
  /* A tick label: as few digits as the value needs (a log axis's 1.00000000000000000000 reads 1). */
  function tick(v) { return format(Number(Number(v).toPrecision(6))); }

  DIGITS.metricPanels = function (box, config) {
    config = config || {};
    var first = config.first || ["loss"];
    var series = {};   /* label -> {name, run, points: [{epoch, time, value}]} */
    var charts = {};   /* panel key -> Chart */
    var state = { smoothing: 0, log: false, axis: "epoch", zoom: null };
    var controls = el("div", { "class": "chart-controls small" });
    controls.innerHTML =
      '<label>Smoothing <input type="range" min="0" max="0.99" step="0.01" value="0" data-control="smoothing">' +
      ' <output data-control="smoothing-value">0</output></label>' +
      '<label class="check"><input type="checkbox" data-control="log"> Log scale</label>' +
      '<label>X axis <select data-control="axis"><option value="epoch">epoch</option>' +
      '<option value="wall">wall time (min)</option></select></label>' +
      '<button type="button" class="btn" data-control="reset-zoom" disabled>Reset zoom</button>' +
      '<span class="muted">Drag across a chart to zoom.</span>';
    var grid = el("div", { "class": "chart-panels" });
    var summaryBox = el("div", { "class": "table-scroll" });
    box.appendChild(controls); box.appendChild(grid); box.appendChild(summaryBox);
    function control(name) { return controls.querySelector('[data-control="' + name + '"]'); }
    control("smoothing").addEventListener("input", function (e) {
      state.smoothing = parseFloat(e.target.value) || 0; control("smoothing-value").textContent = e.target.value; redraw();
    });
    control("log").addEventListener("change", function (e) { state.log = e.target.checked; redraw(); });
    control("axis").addEventListener("change", function (e) { state.axis = e.target.value; state.zoom = null; redraw(); });
    control("reset-zoom").addEventListener("click", function () { state.zoom = null; redraw(); });

    var start = null;  /* the first wall time seen: the wall-time axis counts minutes from it */
    function xOf(p) {
      if (state.axis === "wall") { return typeof p.time === "number" && start !== null ? (p.time - start) / 60 : null; }
      return p.epoch;
    }

    function makeChart(key) {
      var panel = el("figure", { "class": "chart-panel", "data-panel": key });
      panel.appendChild(el("figcaption", { "class": "small" }, key.replace(/_/g, " ")));
      var wrap = el("div", { "class": "chart-canvas chart-canvas-small" }), canvas = el("canvas");
      wrap.appendChild(canvas); panel.appendChild(wrap);
      /* The legend is HTML under the canvas: however many series, the plot keeps its height. */
      panel.appendChild(el("ul", { "class": "chart-legend small" }));
      var order = Object.keys(charts).concat([key]).sort(rank);
      var next = order.indexOf(key) + 1 < order.length ? grid.querySelector('[data-panel="' + CSS.escape(order[order.indexOf(key) + 1]) + '"]') : null;
      grid.insertBefore(panel, next);
      var chart = new Chart(canvas, {
        type: "line", data: { datasets: [] },
        options: {
          animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
          interaction: { mode: "nearest", intersect: false },
          scales: { x: { type: "linear", title: { display: true, text: "epoch" } }, y: { type: "linear" } },
          plugins: { legend: { display: false } },
          elements: { point: { radius: 0 }, line: { borderWidth: 2 } }
        }
      });
      dragZoom(canvas, chart);
      charts[key] = chart;
      return chart;
    }

    function rank(a, b) {
      function r(k) {
        if (k === "learning_rate") { return 1000; }
        var i = first.indexOf(k); return i >= 0 ? i : (/per class$/.test(k) ? 500 : 100);
      }
      return r(a) - r(b) || a.localeCompare(b);
    }

    /* Drag across a chart: every panel shows that x range (the reset button undoes it). */
    function dragZoom(canvas, chart) {
      var from = null;
      canvas.addEventListener("mousedown", function (e) { from = chart.scales.x.getValueForPixel(e.offsetX); });
      canvas.addEventListener("mouseup", function (e) {
        if (from === null) { return; }
        var to = chart.scales.x.getValueForPixel(e.offsetX), low = Math.min(from, to), high = Math.max(from, to);
        from = null;
        var span = chart.scales.x.max - chart.scales.x.min;
        if (span > 0 && (high - low) / span > 0.02) { state.zoom = { min: low, max: high }; redraw(); }
      });
    }

    function redraw() {
      var keys = panelKeys(Object.keys(series).map(function (l) { return series[l].name; }));
      var used = {}, runs = [];
      Object.keys(series).forEach(function (label) {
        var run = series[label].run || "";
        if (runs.indexOf(run) < 0) { runs.push(run); }
      });
      runs.sort(function (a, b) { return a === "" ? -1 : b === "" ? 1 : 0; });  /* this page's run first, in blue */
      Object.keys(series).forEach(function (label, i) {
        var s = series[label], key = keys[s.name], chart = charts[key] || makeChart(key);
        var ratio = isRatio(s.name) && key !== "learning_rate";
        used[key] = used[key] || [];
        /* One colour per run in every panel once runs are overlaid; one run alone: one per series of a panel
           (the per-class panels). Validation is the dashed line of its training series' colour. */
        var twin = used[key].filter(function (d) { return baseName(series[d.label].name) === baseName(s.name); })[0];
        var color = runs.length > 1 ? COLORS[runs.indexOf(s.run || "") % COLORS.length]
          : twin ? twin.borderColor : COLORS[used[key].filter(function (d) { return !d.twin; }).length % COLORS.length];
        var data = s.points.map(function (p) { return { x: xOf(p), y: p.value }; })
          .filter(function (p) { return p.x !== null && (!state.log || p.y > 0); });
        /* the learning rate is a schedule, never smoothed: smoothing would bend its steps */
        used[key].push({ label: label, data: key === "learning_rate" ? data : smooth(data, state.smoothing),
                         borderColor: color, backgroundColor: color, twin: !!twin,
                         borderDash: /^val_/.test(s.name) ? [6, 3] : [], ratio: ratio });
      });
      Object.keys(charts).forEach(function (key) {  /* a panel whose series were all removed goes */
        if (used[key]) { return; }
        charts[key].destroy(); delete charts[key];
        var gone = grid.querySelector('[data-panel="' + CSS.escape(key) + '"]'); if (gone) { gone.remove(); }
      });
      Object.keys(charts).forEach(function (key) {
        var chart = charts[key], sets = used[key] || [];
        chart.data.datasets = sets;
        var allRatio = sets.length && sets.every(function (d) { return d.ratio; });
        var y = { type: state.log ? "logarithmic" : "linear", ticks: { callback: tick } };
        var n = 0, lo = Infinity, hi = -Infinity;  /* (a loop: long runs have more points than apply() takes) */
        sets.forEach(function (d) { d.data.forEach(function (p) { n += 1; lo = Math.min(lo, p.y); hi = Math.max(hi, p.y); }); });
        /* A constant series (or one that moves in its last digits) gets a range around it: drawn flat, not as
           a zig-zag of rounding noise. */
        if (n > 1 && isFinite(lo) && hi - lo <= 1e-6 * Math.max(Math.abs(hi), 1e-12)) {
          if (state.log) { y.min = lo / 2; y.max = hi * 2; } else { var pad = Math.abs(hi) * 0.1 || 1; y.min = lo - pad; y.max = hi + pad; }
        }
        if (allRatio && !state.log) {  /* 0..1, with room above 1.0 so a perfect score does not sit on the border */
          y.min = 0; y.max = 1.04; y.ticks = { callback: function (v) { return v > 1 ? "" : tick(v); } };
        }
        chart.options.scales.y = y;
        chart.options.scales.x = { type: "linear", title: { display: true, text: state.axis === "wall" ? "wall time (min)" : "epoch" },
                                   min: state.zoom ? state.zoom.min : undefined, max: state.zoom ? state.zoom.max : undefined };
        chart.update();
        legend(key, sets);
      });
      control("reset-zoom").disabled = !state.zoom;
      box.dataset.panels = Object.keys(charts).length;
      box.dataset.zoomed = state.zoom ? "true" : "false";
      renderSummary();
    }

    function legend(key, sets) {
      var panel = grid.querySelector('[data-panel="' + CSS.escape(key) + '"]'), list = panel && panel.querySelector(".chart-legend");
      if (!list) { return; }
      list.textContent = "";
      if (sets.length < 2) { return; }
      sets.forEach(function (d) {
        var item = el("li", { "data-color": d.borderColor }), swatch = el("span", { "class": "chart-swatch" + (d.borderDash.length ? " dashed" : "") });
        swatch.style.borderColor = d.borderColor;
        item.appendChild(swatch); item.appendChild(document.createTextNode(d.label));
        list.appendChild(item);
      });
    }

    function renderSummary() {
      var rows = summary(), labels = Object.keys(rows).sort(function (a, b) {
        return rank(panelKeys([series[a].name])[series[a].name], panelKeys([series[b].name])[series[b].name]) || a.localeCompare(b);
      });
      var table = el("table", { "class": "table compact", id: "metric-summary" });
      table.innerHTML = "<thead><tr><th>Metric</th><th>Final</th><th>Best</th><th>Best at epoch</th></tr></thead>";
      var body = el("tbody");
      labels.forEach(function (label) {
        var r = rows[label], tr = el("tr", { "data-metric": label });
        [label, format(r.final), format(r.best), r.bestEpoch === null ? "" : formatEpoch(r.bestEpoch)].forEach(function (text, i) {
          tr.appendChild(el("td", i ? { "class": "num" } : {}, text));
        });
        body.appendChild(tr);
      });
      table.appendChild(body);
      summaryBox.textContent = ""; if (labels.length) { summaryBox.appendChild(table); }
    }

    /* {label: {final, best, bestEpoch, higherIsBetter}}: best is the highest of a ratio metric, else the lowest. */
    function summary() {
      var out = {};
      Object.keys(series).forEach(function (label) {
        var s = series[label], pts = s.points;
        if (!pts.length || s.name === "lr" || s.name === "learning_rate") { return; }
        var higher = isRatio(s.name), best = pts[0];
        pts.forEach(function (p) { if (higher ? p.value > best.value : p.value < best.value) { best = p; } });
        out[label] = { final: pts[pts.length - 1].value, best: best.value, bestEpoch: best.epoch, higherIsBetter: higher };
      });
      return out;
    }

    return {
      add: function (points, run) {
        (points || []).forEach(function (p) {
          if (typeof p.value !== "number" || !isFinite(p.value) || isSpeed(p.name) || isBookkeeping(p.name)) { return; }
          if (typeof p.time === "number" && (start === null || p.time < start)) { start = p.time; }
          var label = run ? run + " · " + p.name : p.name;
          (series[label] = series[label] || { name: p.name, run: run || null, points: [] }).points.push(p);
        });
      },
      /* Forget every series of one run (an overlay taken off); call update() after. */
      remove: function (run) {
        Object.keys(series).forEach(function (label) { if (series[label].run === run) { delete series[label]; } });
      },
      update: redraw,
      summary: summary,
      charts: charts,
      points: function () { return Object.keys(series).reduce(function (n, k) { return n + series[k].points.length; }, 0); }
    };
  };

  /* Model page: tick other runs (same dataset or group) to overlay their curves on this run's panels.
     `box` holds checkboxes with data-url (their metrics.json) and data-run (the label); `panels` is
     what DIGITS.metricPanels returned; the compare link (data-base, data-self) follows the ticked runs. */
  DIGITS.overlayRuns = function (box, panels) {
    if (!box || !panels) { return; }
    var link = box.querySelector("#compare-link"), loaded = {};
    function allPoints(url, offset, points) {
      return fetch(url + "?offset=" + offset, { headers: { Accept: "application/json" } }).then(function (r) {
        if (!r.ok) { throw new Error(url + ": " + r.status); }
        return r.json();
      }).then(function (d) {
        points = points.concat(d.points || []);
        return d.offset > offset && (d.points || []).length ? allPoints(url, d.offset, points) : points;
      });
    }
    function refresh() {
      var ticked = Array.prototype.filter.call(box.querySelectorAll("input[data-url]"), function (c) { return c.checked; });
      box.dataset.overlaid = Object.keys(loaded).length;
      if (link) {
        link.href = link.dataset.base + "?jobs=" + encodeURIComponent([link.dataset.self].concat(
          ticked.map(function (c) { return c.value; })).join(","));
        link.hidden = !ticked.length;
      }
    }
    box.addEventListener("change", function (e) {
      var input = e.target, run = input.dataset.run;
      if (!input.dataset.url) { return; }
      if (!input.checked) { panels.remove(run); delete loaded[run]; panels.update(); refresh(); return; }
      input.disabled = true;
      allPoints(input.dataset.url, 0, []).then(function (points) {
        if (input.checked) { panels.add(points, run); loaded[run] = true; panels.update(); }
      }).catch(function () { input.checked = false; }).then(function () { input.disabled = false; refresh(); });
    });
    refresh();
  };
})();
