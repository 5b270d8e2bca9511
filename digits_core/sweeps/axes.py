"""What a comparison shows beside its ranking: the options that differ, the parallel-coordinates axes, the metrics.

:func:`differing_options` picks, from hand-picked model jobs, the training options whose values are not the
same in all of them (the network included), so the comparison table has one column per difference.
:func:`parallel_axes` lays out one axis per option and the metric, each with its scale (``log`` for a
log-uniform space or a wide positive range, ``category`` for choices and text, else ``linear``), the
position of every row on it (0 at the bottom, 1 at the top) and labelled ticks: the page draws what is
computed here. :func:`metric_names` lists what a metric chooser may offer. No TensorFlow, no Flask.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine.jobio import read_metrics

#: Options that are always drawn on a log axis when numeric and positive (a rate spans decades).
LOG_OPTIONS = frozenset({"learning_rate", "weight_decay", "lr"})
#: A positive numeric range at least this wide (high / low) gets a log axis.
LOG_RATIO = 20.0
#: Metric names that are bookkeeping, never offered as a ranking metric.
_BOOKKEEPING = ("early_", "lr", "learning_rate", "epoch_time")


def _same(values: Sequence[Any]) -> bool:
    keys = {json.dumps(v, sort_keys=True, default=str) for v in values}
    return len(keys) <= 1


def differing_options(option_sets: Sequence[Mapping[str, Any]]) -> list[str]:
    """The option names whose values differ between ``option_sets`` (a missing option counts as a value), sorted.

    Args:
        option_sets: One mapping of options per job (its training options, with ``network``).
    """
    names = sorted({name for options in option_sets for name in options})
    return [name for name in names if not _same([options.get(name) for options in option_sets])]


def _label(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3g}"


def _axis(name: str, values: list[Any], kind: str | None) -> dict:
    """One axis: scale, row positions, ticks. ``kind`` is a search space's kind when known."""
    present = [v for v in values if v is not None]
    numeric = bool(present) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if kind in ("choice", "grid") or not numeric:
        categories = sorted({str(v) for v in present}, key=lambda text: (_number(text) is None, _number(text), text))
        span = max(len(categories) - 1, 1)
        place = {c: (i / span if len(categories) > 1 else 0.5) for i, c in enumerate(categories)}
        return {
            "name": name,
            "scale": "category",
            "positions": [None if v is None else place[str(v)] for v in values],
            "ticks": [{"at": place[c], "label": c} for c in categories],
        }
    low, high = min(present), max(present)
    log = low > 0 and (kind == "loguniform" or name in LOG_OPTIONS or high / low >= LOG_RATIO)
    f = math.log10 if log else float
    flat = high == low

    def at(value: float) -> float:
        return 0.5 if flat else (f(value) - f(low)) / (f(high) - f(low))

    middle = 10 ** ((math.log10(low) + math.log10(high)) / 2) if log else (low + high) / 2
    marks = [low] if flat else [low, middle, high]
    return {
        "name": name,
        "scale": "log" if log else "linear",
        "positions": [None if v is None else round(at(float(v)), 6) for v in values],
        "ticks": [{"at": round(at(float(v)), 6), "label": _label(v)} for v in marks],
    }


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parallel_axes(
    rows: Sequence[Mapping[str, Any]], options: Iterable[str], metric: str, kinds: Mapping[str, str] | None = None
) -> list[dict]:
    """The parallel-coordinates axes of a comparison: one per option, then the metric (each row's best).

    Args:
        rows: Comparison rows (:func:`~digits_core.sweeps.report.trial_row`): ``values`` and ``best``.
        options: The options to draw, in order.
        metric: The ranking metric (the last axis).
        kinds: Search-space kind per option (``loguniform``, ``choice``, ...), when the rows come from a sweep.

    Returns:
        ``[{"name", "scale": "log"|"linear"|"category", "positions": [0..1 or None per row],
        "ticks": [{"at", "label"}]}]``.
    """
    kinds = kinds or {}
    axes = [_axis(name, [row["values"].get(name) for row in rows], kinds.get(name)) for name in options]
    axes.append(_axis(metric, [row.get("best") for row in rows], None))
    return axes


def metric_names(paths: Iterable[Any]) -> list[str]:
    """The metrics a chooser may offer for these model folders: validation metrics first, then the rest."""
    names: set[str] = set()
    for path in paths:
        names.update(
            str(p["name"])
            for p in read_metrics(path)
            if isinstance(p.get("name"), str) and isinstance(p.get("value"), (int, float))
        )
    kept = [n for n in names if not any(n == b or n.startswith(b) for b in _BOOKKEEPING)]
    return sorted(kept, key=lambda n: (not n.startswith("val_"), n))
