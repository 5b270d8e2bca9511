/* The sweep comparison page: validation curves of every trial overlaid, and a parallel-coordinates chart of
   the searched options against the metric (each axis scaled to its own range; log scale for wide ranges). */
(function () {
  "use strict";
  var node = document.getElementById("sweep-data");
  if (!node || typeof Chart === "undefined") { return; }
  var s = JSON.parse(node.textContent);
  var colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var rows = s.trials;

  /* The legend is HTML under the chart: with many trials or on a phone the plot keeps its height. */
  var legend = document.createElement("ul");
  legend.className = "chart-legend small"; legend.id = "curves-legend";
  rows.forEach(function (row, i) {
    var item = document.createElement("li"), swatch = document.createElement("span");
    swatch.className = "chart-swatch" + (row.status === "Stopped early" ? " dashed" : "");
    swatch.style.borderColor = colours[i % colours.length];
    item.appendChild(swatch); item.appendChild(document.createTextNode(row.name));
    legend.appendChild(item);
  });
  document.getElementById("chart-curves").parentNode.insertAdjacentElement("afterend", legend);

  new Chart(document.getElementById("chart-curves"), {
    type: "line",
    data: { datasets: rows.map(function (row, i) {
      return { label: row.name, data: row.curve.map(function (p) { return { x: p[0], y: p[1] }; }),
               borderColor: colours[i % colours.length], pointRadius: 2, borderDash: row.status === "Stopped early" ? [4, 3] : [] };
    }) },
    options: { animation: false, parsing: false, maintainAspectRatio: false,
      plugins: { title: { display: true, text: "Validation " + s.metric + " (dashed: stopped early)" },
                 legend: { display: false } },
      scales: { x: { type: "linear", title: { display: true, text: "epoch" } },
                y: { title: { display: true, text: s.metric } } } }
  });

  var axes = [];
  rows.forEach(function (row) { Object.keys(row.values).forEach(function (k) { if (axes.indexOf(k) < 0) { axes.push(k); } }); });
  axes.push(s.metric);
  function raw(row, axis) { return axis === s.metric ? row.best : row.values[axis]; }
  var scalers = axes.map(function (axis) {
    var values = rows.map(function (row) { return raw(row, axis); }).filter(function (v) { return v !== null && v !== undefined; });
    var numeric = values.every(function (v) { return typeof v === "number"; });
    if (!numeric) {
      var names = values.map(String).filter(function (v, i, all) { return all.indexOf(v) === i; }).sort();
      return function (v) { return names.length > 1 ? names.indexOf(String(v)) / (names.length - 1) : 0.5; };
    }
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    var log = lo > 0 && hi / lo > 20;
    var f = log ? Math.log : function (v) { return v; };
    return function (v) { return hi > lo ? (f(v) - f(lo)) / (f(hi) - f(lo)) : 0.5; };
  });
  new Chart(document.getElementById("chart-parallel"), {
    type: "line",
    data: { labels: axes, datasets: rows.filter(function (row) { return row.best !== null; }).map(function (row, i) {
      return { label: row.name, data: axes.map(function (axis, a) { var v = raw(row, axis); return v === undefined ? null : scalers[a](v); }),
               borderColor: colours[i % colours.length], pointRadius: 3, tension: 0 };
    }) },
    options: { animation: false, maintainAspectRatio: false,
      plugins: { title: { display: true, text: "Options against " + s.metric + " (each axis scaled to its range)" },
                 legend: { display: false },
                 tooltip: { callbacks: { label: function (ctx) {
                   var row = rows.filter(function (r) { return r.best !== null; })[ctx.datasetIndex];
                   var v = raw(row, axes[ctx.dataIndex]); return row.name + ": " + v; } } } },
      scales: { y: { min: 0, max: 1, ticks: { display: false } } } }
  });
  document.body.setAttribute("data-sweep-charts", "ready");
})();
