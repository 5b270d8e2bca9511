"""Multi-label predictions: the labels whose probability reaches their tuned threshold.

The ``multilabel`` task logs one ``val_threshold_<label>`` per label at each
validation (:mod:`digits_core.engine.multilabel_task`); a model's snapshot
uses those of the last validation at or before its epoch, and 0.5 for a
label without one (a model trained without validation).
"""

from __future__ import annotations

import numpy as np

from ..engine.jobio import read_metrics
from ..engine.multilabel_task import threshold_key

#: The threshold of a label that has none logged.
DEFAULT_THRESHOLD = 0.5


def label_thresholds(model) -> list[float]:
    """One threshold per class of ``model`` (an :class:`~.model.InferenceModel` of task ``multilabel``)."""
    names = list(model.class_labels or [])
    keys = {threshold_key(name): k for k, name in enumerate(names)}
    found: dict[int, tuple[float, float]] = {}
    for point in read_metrics(model.job):
        k = keys.get(str(point.get("name")))
        epoch, value = point.get("epoch"), point.get("value")
        if k is None or not isinstance(epoch, (int, float)) or not isinstance(value, (int, float)):
            continue
        if epoch <= float(model.epoch) + 1e-9 and (k not in found or epoch >= found[k][0]):
            found[k] = (float(epoch), float(value))
    return [found[k][1] if k in found else DEFAULT_THRESHOLD for k in range(len(names))]


def labels_above(output: np.ndarray, thresholds: list[float], names: list[str] | None) -> list[dict]:
    """``[{"index", "label", "probability", "threshold"}]`` of the labels at or above their threshold, best first."""
    scores = np.asarray(output, np.float64).reshape(-1)
    names = list(names or [])
    chosen = [k for k in range(len(scores)) if scores[k] >= (thresholds[k] if k < len(thresholds) else 0.5)]
    chosen.sort(key=lambda k: -scores[k])
    return [
        {
            "index": k,
            "label": names[k] if k < len(names) else str(k),
            "probability": float(scores[k]),
            "threshold": float(thresholds[k]) if k < len(thresholds) else DEFAULT_THRESHOLD,
        }
        for k in chosen
    ]
