"""The evaluation report: one self-contained HTML page (no external files, no network) from ``metrics.json``.

By task: headline figures with their bootstrap intervals; classification adds the confusion matrix
(a heat map, rows true), ROC and precision-recall curves per class, the reliability diagram and the
per-class table; detection the per-class AP table and the F1-versus-confidence curve; segmentation
nnU-Net's class means and the per-case table (sortable, worst Dice first). Plots are inline SVG, so the
page opens from a file as well as from the web UI.
"""

from __future__ import annotations

from html import escape
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f3f3f3;cursor:pointer}caption{font-weight:bold;text-align:left}
.plots{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}figcaption{font-size:.9em;text-align:center}
.best{font-weight:bold;background:#e6f4e6}
"""

_SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);
    var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    rows.sort(function(a, b){
      var x = a.cells[col].dataset.v || a.cells[col].textContent, y = b.cells[col].dataset.v || b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      if (!isNaN(nx) && !isNaN(ny)) return dir * (nx - ny);
      return dir * x.localeCompare(y);
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});
"""

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def fmt(value: Any, digits: int = 4) -> str:
    """A figure as the report prints it (``—`` for none)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return escape(str(value))


def _cell(value: Any) -> str:
    sort = "" if value is None or not isinstance(value, (int, float)) else f' data-v="{value}"'
    return f"<td{sort}>{fmt(value)}</td>"


def table(rows: list[dict], caption: str, columns: list[str] | None = None, sortable: bool = True) -> str:
    """An HTML table of ``rows`` (dicts), its header the keys."""
    if not rows:
        return ""
    columns = columns or list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in columns) + "</tr>" for r in rows)
    cls = ' class="sortable"' if sortable else ""
    return (
        f"<table{cls}><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def line_plot(series: list[tuple[str, list[float], list[float]]], title: str, xlabel: str, ylabel: str) -> str:
    """An inline SVG of lines in the unit square (x and y in [0, 1]), with a legend."""
    w, h, m = 260, 220, 30
    parts = [f'<rect x="{m}" y="10" width="{w - m - 10}" height="{h - m - 10}" fill="none" stroke="#999"/>']
    for i, (name, xs, ys) in enumerate(series):
        pts = " ".join(f"{m + x * (w - m - 10):.1f},{10 + (1 - y) * (h - m - 10):.1f}" for x, y in zip(xs, ys))
        color = COLORS[i % len(COLORS)]
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"><title>{escape(name)}</title></polyline>'
        )
        parts.append(f'<text x="{w + 5}" y="{20 + 14 * i}" font-size="11" fill="{color}">{escape(name[:18])}</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 5}" font-size="11" text-anchor="middle">{escape(xlabel)}</text>')
    parts.append(
        f'<text x="10" y="{h / 2}" font-size="11" transform="rotate(-90 10 {h / 2})" text-anchor="middle">{escape(ylabel)}</text>'
    )
    svg = f'<svg width="{w + 120}" height="{h}" role="img" aria-label="{escape(title)}">' + "".join(parts) + "</svg>"
    return f"<figure>{svg}<figcaption>{escape(title)}</figcaption></figure>"


def confusion(matrix: list[list[int]], labels: list[str]) -> str:
    """The confusion matrix as a heat-mapped table (rows true, columns predicted; shade by row share)."""
    head = "".join(f"<th>{escape(label)}</th>" for label in labels)
    rows = []
    for label, row in zip(labels, matrix):
        total = sum(row) or 1
        cells = "".join(f'<td style="background:rgba(31,119,180,{v / total:.2f})">{v}</td>' for v in row)
        rows.append(f"<tr><th>{escape(label)}</th>{cells}</tr>")
    return (
        '<table class="confusion"><caption>Confusion matrix (rows: true class, columns: predicted)</caption>'
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def reliability(bins: list[dict], ece: float) -> str:
    """The reliability diagram: accuracy per confidence bin against the diagonal."""
    filled = [b for b in bins if b["count"]]
    xs = [b["confidence"] for b in filled]
    ys = [b["accuracy"] for b in filled]
    return line_plot(
        [("perfect", [0.0, 1.0], [0.0, 1.0]), ("model", xs, ys)],
        f"Reliability diagram (ECE {ece:.4f})",
        "confidence",
        "accuracy",
    )


def _classification(report: dict) -> str:
    labels = report["class_labels"]
    curves = [(labels[i], c) for i, c in enumerate(report["curves"]) if c]
    plots = [
        line_plot(
            [(n, c["fpr"], c["tpr"]) for n, c in curves],
            "ROC (one vs rest)",
            "false positive rate",
            "true positive rate",
        ),
        line_plot([(n, c["recall"], c["precision"]) for n, c in curves], "Precision-recall", "recall", "precision"),
        reliability(report["calibration"]["bins"], report["calibration"]["ece"]),
    ]
    averages = [
        {"average": k, **{m: report[k].get(m) for m in ("precision", "recall", "f1")}}
        for k in ("macro", "micro", "weighted")
    ]
    return (
        confusion(report["confusion_matrix"], labels)
        + f'<div class="plots">{"".join(plots)}</div>'
        + table(
            report["per_class"],
            "Per class",
            ["label", "precision", "recall", "f1", "support", "roc_auc", "average_precision"],
        )
        + table(averages, "Averages", sortable=False)
    )


def _detection(report: dict) -> str:
    curve = report["f1_confidence"]
    plot = line_plot(
        [
            ("F1", curve["thresholds"], curve["f1"]),
            ("precision", curve["thresholds"], curve["precision"]),
            ("recall", curve["thresholds"], curve["recall"]),
        ],
        f"F1 vs confidence (best {curve['best_f1']:.3f} at {curve['best_threshold']:.2f}, IoU 0.5)",
        "confidence",
        "value",
    )
    return f'<div class="plots">{plot}</div>' + table(
        report["per_class"], "Per class (COCO, IoU 0.50:0.95)", ["label", "truth", "ap", "ap50", "ap75", "ar"]
    )


def _segmentation(report: dict) -> str:
    summary = report["summary"]
    names = report["class_labels"]
    means = [{"class": names[int(k)] if int(k) < len(names) else k, **v} for k, v in summary["mean"].items()]
    cols = ["Dice", "IoU", "HD95", "ASSD", "NSD", "volume_difference"]
    cases = sorted(
        (
            {"case": c["case"], "class": names[int(k)] if int(k) < len(names) else k, **m}
            for c in summary["metric_per_case"]
            for k, m in c["metrics"].items()
        ),
        key=lambda r: (r["Dice"] is None, r["Dice"] if r["Dice"] is not None else 0),
    )
    return table(
        means, f"Mean over cases (NSD at {report['nsd_tolerance_mm']} mm; pixels as 1 mm)", ["class", *cols]
    ) + table(cases, "Per case (worst Dice first; click a header to sort)", ["case", "class", *cols])


def _regression(report: dict) -> str:
    if "per_target" in report:
        return table(report["per_target"], "Per target")
    return table(report.get("per_case", []), "Per image", sortable=True)


def headline_rows(report: dict) -> list[dict]:
    """``[{figure, value, interval}]`` of the task's main figures."""
    task = report["task"]
    keys = {
        "classification": ["accuracy", "top_k_accuracy"],
        "detection": ["ap", "ap50", "ap75", "ar"],
        "segmentation": ["dice"],
    }.get(task, ["mae", "rmse", "r2", "psnr", "ssim"])
    rows = [{"figure": k, "value": report.get(k), "95% interval": ""} for k in keys if k in report]
    intervals = report.get("intervals") or {}
    for row in rows:
        if row["figure"] in intervals:
            low, high = intervals[row["figure"]]
            row["95% interval"] = f"{low:.4f} – {high:.4f}"
    if task == "classification":
        low_high = intervals.get("macro_f1")
        rows.append(
            {
                "figure": "macro F1",
                "value": report["macro"]["f1"],
                "95% interval": f"{low_high[0]:.4f} – {low_high[1]:.4f}" if low_high else "",
            }
        )
        rows.append({"figure": "ECE", "value": report["calibration"]["ece"], "95% interval": ""})
    return rows


def worst_table(worst: list[dict]) -> str:
    """The worst cases with their pictures (image, and overlay for segmentation)."""
    if not worst:
        return ""
    rows = []
    for case in worst:
        pictures = "".join(
            f'<img src="{escape(case[key])}" alt="{escape(key)} of {escape(str(case["input"]))}">'
            for key in ("image", "overlay")
            if case.get(key)
        )
        rows.append(f"<tr><td>{escape(str(case['input']))}</td><td>{escape(case['note'])}</td><td>{pictures}</td></tr>")
    return (
        '<table class="worst"><caption>Worst cases (overlay: green both, red predicted only, blue missed)</caption>'
        f"<thead><tr><th>input</th><th>why</th><th>picture</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def render_report(
    report: dict, title: str, *, nonce: str | None = None, back: str | None = None, worst: list[dict] | None = None
) -> str:
    """The standalone HTML page of an evaluation's ``metrics.json``.

    Args:
        report: The evaluation's ``metrics.json``.
        title: The page title.
        nonce: The Content-Security-Policy nonce of the inline script (the web UI's pages).
        back: A link shown at the top (the web UI: the model page).
        worst: The worst cases with their pictures (``worst_cases.json``).
    """
    task = report["task"]
    body = {"classification": _classification, "detection": _detection, "segmentation": _segmentation}.get(
        task, _regression
    )(report)
    source = (
        f"dataset {report['dataset_id']}, stage {report['stage']}" if report.get("dataset_id") else "labelled inputs"
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>"
        + (f'<p><a href="{escape(back)}">back</a></p>' if back else "")
        + f"<h1>{escape(title)}</h1>"
        f"<p>{escape(task)} model {escape(str(report['model_id']))}, epoch {fmt(report.get('epoch'))}, on {escape(source)}: "
        f"{report.get('count')} inputs.</p>"
        + table(headline_rows(report), "Figures", sortable=False)
        + body
        + worst_table(worst or [])
        + (f'<script nonce="{escape(nonce)}">' if nonce else "<script>")
        + f"{_SORT_JS}</script></body></html>"
    )
