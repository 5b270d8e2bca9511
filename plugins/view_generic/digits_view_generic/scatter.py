"""A predicted-vs-true scatter plot as inline SVG (no JavaScript, no CDN)."""

from __future__ import annotations

import math

import numpy as np

#: At most this many points are drawn per plot (an even sample of the rest).
MAX_POINTS = 2000


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = high - low
    if span <= 0:
        return [low]
    step = 10 ** math.floor(math.log10(span / count))
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def scatter_svg_data(true, predicted, size: int = 260, margin: int = 36) -> dict:
    """Lay out a square predicted (y) vs true (x) plot with the ``y = x`` diagonal.

    Both axes share one range, so points on the diagonal are exact
    predictions.

    Returns:
        ``{"size", "points": [{"x", "y"}], "diagonal": (x1, y1, x2, y2),
        "ticks": [{"value", "pos"}], "low", "high", "drawn", "total"}`` in
        SVG pixel coordinates (y grows downwards), for the view's template.
    """
    t = np.asarray(true, np.float64).reshape(-1)
    p = np.asarray(predicted, np.float64).reshape(-1)
    total = int(t.size)
    if total > MAX_POINTS:
        keep = np.linspace(0, total - 1, MAX_POINTS).round().astype(int)
        t, p = t[keep], p[keep]
    both = np.concatenate([t, p]) if total else np.zeros(1)
    low, high = float(both.min()), float(both.max())
    if high - low < 1e-12:
        low, high = low - 1.0, high + 1.0
    pad = (high - low) * 0.05
    low, high = low - pad, high + pad
    inner = size - 2 * margin

    def x_of(v):
        return margin + (v - low) / (high - low) * inner

    def y_of(v):
        return size - margin - (v - low) / (high - low) * inner

    points = [{"x": round(float(x_of(a)), 2), "y": round(float(y_of(b)), 2)} for a, b in zip(t, p)]
    ticks = [
        {"value": f"{v:.4g}", "x": round(float(x_of(v)), 2), "y": round(float(y_of(v)), 2)} for v in _ticks(low, high)
    ]
    return {
        "size": size,
        "margin": margin,
        "points": points,
        "ticks": ticks,
        "low": low,
        "high": high,
        "diagonal": (round(x_of(low), 2), round(y_of(low), 2), round(x_of(high), 2), round(y_of(high), 2)),
        "drawn": len(points),
        "total": total,
    }
