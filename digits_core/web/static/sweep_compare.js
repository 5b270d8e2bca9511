/* The sweep comparison page: validation curves of every trial overlaid, a parallel-coordinates chart of the
   options against the metric (axes with their values), and "Compare ticked": the ticked runs on /compare. */
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

  /* Parallel coordinates: the axes come laid out from the server (digits_core.sweeps.axes): each row's
     position on each axis (0 bottom, 1 top; log axes for log-uniform or wide ranges, categories for choices)
     and the labelled ticks, drawn beside each axis by the plugin below. */
  var axes = s.axes || [];
  var drawn = [];
  rows.forEach(function (row, i) { if (row.best !== null) { drawn.push(i); } });
  var axisTicks = {
    id: "axisTicks",
    afterDraw: function (chart) {
      var ctx = chart.ctx, x = chart.scales.x, y = chart.scales.y;
      if (!x || !y) { return; }  /* no scales yet: a chart with nothing to draw (no searched option) has none */
      ctx.save();
      ctx.font = "11px sans-serif"; ctx.fillStyle = "#333"; ctx.strokeStyle = "#999"; ctx.textBaseline = "middle";
      axes.forEach(function (axis, a) {
        var px = x.getPixelForValue(a);
        ctx.beginPath(); ctx.moveTo(px, y.getPixelForValue(0)); ctx.lineTo(px, y.getPixelForValue(1)); ctx.stroke();
        ctx.textAlign = a === axes.length - 1 ? "right" : "left";
        axis.ticks.forEach(function (t) {
          var py = y.getPixelForValue(t.at);
          ctx.fillText(t.label, px + (a === axes.length - 1 ? -4 : 4), py);
        });
      });
      ctx.restore();
    }
  };
  new Chart(document.getElementById("chart-parallel"), {
    type: "line",
    data: { labels: axes.map(function (axis) { return axis.name; }),  /* the scale: in the list under the chart */
            datasets: drawn.map(function (i) {
      var row = rows[i];
      return { label: row.name, data: axes.map(function (axis) { return axis.positions[i]; }),
               borderColor: colours[i % colours.length], pointRadius: 3, tension: 0 };
    }) },
    options: { animation: false, maintainAspectRatio: false,
      plugins: { title: { display: true, text: "Options against " + s.metric },
                 legend: { display: false },
                 tooltip: { callbacks: { label: function (ctx) {
                   var row = rows[drawn[ctx.datasetIndex]], axis = axes[ctx.dataIndex];
                   var v = ctx.dataIndex === axes.length - 1 ? row.best : row.values[axis.name];
                   return row.name + ": " + v; } } } },
      scales: { y: { min: 0, max: 1, ticks: { display: false }, grid: { display: false } } } },
    plugins: [axisTicks]
  });
  /* The ticks as text too, for readers of the page that do not see the canvas. */
  var list = document.createElement("dl");
  list.className = "small axis-ticks"; list.id = "parallel-axes";
  axes.forEach(function (axis) {
    var term = document.createElement("dt"), detail = document.createElement("dd");
    term.textContent = axis.name + (axis.scale === "log" ? " (log scale)" : axis.scale === "category" ? " (choices)" : "");
    detail.textContent = axis.ticks.map(function (t) { return t.label; }).join(" · ");
    list.appendChild(term); list.appendChild(detail);
  });
  document.getElementById("chart-parallel").parentNode.insertAdjacentElement("afterend", list);

  document.body.setAttribute("data-sweep-charts", "ready");
})();

(function () {
  "use strict";
  /* "Compare ticked": delegated, so it keeps working after the live sweep page swaps its table in. */
  function ticked() {
    return Array.prototype.map.call(document.querySelectorAll(".compare-select:checked"), function (c) { return c.value; });
  }
  function update() {
    var link = document.getElementById("compare-ticked");
    if (!link) { return; }
    var ids = ticked();
    link.setAttribute("aria-disabled", ids.length >= 2 ? "false" : "true");
    link.textContent = ids.length ? "Compare ticked (" + ids.length + ")" : "Compare ticked";
    link.href = link.dataset.base + "?jobs=" + encodeURIComponent(ids.join(","));
  }
  document.addEventListener("change", function (e) { if (e.target.classList.contains("compare-select")) { update(); } });
  document.addEventListener("click", function (e) {
    var link = e.target.closest ? e.target.closest("#compare-ticked") : null;
    if (link && ticked().length < 2) { e.preventDefault(); }
  });
  update();
})();
