"""Detection figures of a labelled test set, computed as pycocotools' ``COCOeval`` computes them (boxes, area "all").

Ground truth and detections are given per image as arrays: truth ``[M, 5]`` rows
``(class_id, x_min, y_min, x_max, y_max)`` (the dataset's label kind ``boxes``), detections ``[D, 6]`` rows
``(class_id, x_min, y_min, x_max, y_max, score)``, all in the same pixels.

* Per image and class the detections are ranked by score (stable order on ties) and the best
  :data:`MAX_DETECTIONS` kept; at each IoU threshold (0.50, 0.55, ..., 0.95) each detection takes the
  not yet matched ground-truth box with the highest IoU at or above the threshold (the later box on a tie,
  as COCOeval does).
* Per class the detections of all images are ranked by score; precision is made non-increasing from
  the right and read at 101 recall points; AP is their mean; a class without ground truth has none.
  AP is the mean over thresholds and classes, AP50 and AP75 at one threshold, AR the mean recall.
* The F1-versus-confidence curve: at IoU 0.5, for each confidence threshold on a grid, precision and
  recall over all classes (matching as above among the detections at or above the threshold) and their F1;
  the best threshold is the one with the highest F1 (the lowest such threshold on a tie).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_DETECTIONS = 100
IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
CONFIDENCE_GRID = np.linspace(0.0, 1.0, 101)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU ``[len(a), len(b)]`` of corner boxes ``(x_min, y_min, x_max, y_max)`` (widths ``x_max − x_min``)."""
    a, b = np.asarray(a, dtype=np.float64).reshape(-1, 4), np.asarray(b, dtype=np.float64).reshape(-1, 4)
    w = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    h = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = w * h
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def _match(ious: np.ndarray, threshold: float) -> np.ndarray:
    """For each detection (ranked), whether it matched a ground-truth box at ``threshold``."""
    taken = np.zeros(ious.shape[1], dtype=bool)
    matched = np.zeros(ious.shape[0], dtype=bool)
    limit = min(threshold, 1 - 1e-10)
    for d in range(ious.shape[0]):
        best, best_iou = -1, limit
        for g in range(ious.shape[1]):
            if taken[g] or ious[d, g] < best_iou:
                continue
            best, best_iou = g, ious[d, g]
        if best >= 0:
            taken[best] = matched[d] = True
    return matched


def _per_image_class(truth: Sequence[np.ndarray], detections: Sequence[np.ndarray], c: int):
    """Per image: ``(ranked scores, IoU matrix, count of truth boxes)`` of class ``c``."""
    for gt, dt in zip(truth, detections):
        gt = np.asarray(gt, dtype=np.float64).reshape(-1, 5)
        dt = np.asarray(dt, dtype=np.float64).reshape(-1, 6)
        g, d = gt[gt[:, 0] == c], dt[dt[:, 0] == c]
        order = np.argsort(-d[:, 5], kind="mergesort")[:MAX_DETECTIONS]
        d = d[order]
        yield d[:, 5], box_iou(d[:, 1:5], g[:, 1:5]), len(g)


def _class_ap(truth, detections, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Precision at the recall points ``[T, R]`` and final recall ``[T]`` of class ``c`` (−1 without truth)."""
    precision = -np.ones((len(IOU_THRESHOLDS), len(RECALL_POINTS)))
    recall = -np.ones(len(IOU_THRESHOLDS))
    images = list(_per_image_class(truth, detections, c))
    n_truth = sum(n for _, _, n in images)
    if not n_truth:
        return precision, recall
    scores = np.concatenate([s for s, _, _ in images]) if images else np.zeros(0)
    order = np.argsort(-scores, kind="mergesort")
    for t, threshold in enumerate(IOU_THRESHOLDS):
        matched = np.concatenate([_match(ious, threshold) for _, ious, _ in images])[order]
        tp, fp = np.cumsum(matched).astype(np.float64), np.cumsum(~matched).astype(np.float64)
        rc = tp / n_truth
        pr = tp / (tp + fp + np.spacing(1))
        recall[t] = rc[-1] if len(rc) else 0.0
        pr = np.maximum.accumulate(pr[::-1])[::-1]
        q = np.zeros(len(RECALL_POINTS))
        at = np.searchsorted(rc, RECALL_POINTS, side="left")
        inside = at < len(pr)
        q[inside] = pr[at[inside]]
        precision[t] = q
    return precision, recall


def _mean_valid(values: np.ndarray) -> float | None:
    valid = values[values > -1]
    return float(valid.mean()) if valid.size else None


def f1_confidence(truth, detections, num_classes: int, grid: np.ndarray = CONFIDENCE_GRID) -> dict[str, Any]:
    """Precision, recall and F1 at IoU 0.5 over all classes at each confidence threshold of ``grid``."""
    n_truth = sum(int(np.asarray(g).reshape(-1, 5).shape[0]) for g in truth)
    found = []  # (score, matched when every detection counts) per ranked detection per image and class
    for c in range(num_classes):
        for scores, ious, _ in _per_image_class(truth, detections, c):
            found.append((scores, ious))
    precision, recall, f1 = [], [], []
    for threshold in grid:
        tp = fp = 0
        for scores, ious in found:
            keep = scores >= threshold
            matched = _match(ious[keep], 0.5)
            tp += int(matched.sum())
            fp += int((~matched).sum())
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / n_truth if n_truth else 0.0
        precision.append(p)
        recall.append(r)
        f1.append(2 * p * r / (p + r) if p + r else 0.0)
    best = int(np.argmax(f1)) if f1 else 0
    return {
        "thresholds": [float(t) for t in grid],
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "best_threshold": float(grid[best]),
        "best_f1": float(f1[best]) if f1 else 0.0,
    }


def detection_report(
    truth: Sequence[np.ndarray],
    detections: Sequence[np.ndarray],
    class_labels: Sequence[str] | None = None,
    num_classes: int | None = None,
) -> dict[str, Any]:
    """COCO box figures of a labelled test set, per class and overall, JSON-ready.

    Args:
        truth: Per image, ``[M, 5]`` ``(class_id, x_min, y_min, x_max, y_max)``.
        detections: Per image, ``[D, 6]`` ``(class_id, x_min, y_min, x_max, y_max, score)``.
        class_labels: Class names (index = class id).
        num_classes: Class ids are ``0..num_classes-1`` (default: the labels' count, else the largest id + 1).

    Returns:
        ``{"count", "ap", "ap50", "ap75", "ar", "per_class": [{index, label, truth, ap, ap50, ap75, ar}],
        "f1_confidence": {...}}``; a figure is ``None`` where no class has ground truth.
    """
    if len(truth) != len(detections):
        raise ValueError(f"{len(truth)} images of ground truth but {len(detections)} of detections")
    if num_classes is None:
        ids = [np.asarray(a).reshape(-1, w)[:, 0] for a, w in [*((g, 5) for g in truth), *((d, 6) for d in detections)]]
        largest = int(max((x.max() for x in ids if x.size), default=-1))
        num_classes = max(len(class_labels or []), largest + 1)
    pairs = [_class_ap(truth, detections, c) for c in range(num_classes)]
    precision = np.stack([p for p, _ in pairs], axis=1) if pairs else None
    recall = np.stack([r for _, r in pairs], axis=1) if pairs else None
    t50, t75 = 0, 5
    per_class = []
    for c in range(num_classes):
        label = str(class_labels[c]) if class_labels and c < len(class_labels) else str(c)
        n = sum(int(np.sum(np.asarray(g).reshape(-1, 5)[:, 0] == c)) for g in truth)
        per_class.append(
            {
                "index": c,
                "label": label,
                "truth": n,
                "ap": _mean_valid(precision[:, c]) if precision is not None else None,
                "ap50": _mean_valid(precision[t50, c]) if precision is not None else None,
                "ap75": _mean_valid(precision[t75, c]) if precision is not None else None,
                "ar": _mean_valid(recall[:, c]) if recall is not None else None,
            }
        )
    empty = np.zeros(0)
    return {
        "count": len(truth),
        "ap": _mean_valid(precision if precision is not None else empty),
        "ap50": _mean_valid(precision[t50] if precision is not None else empty),
        "ap75": _mean_valid(precision[t75] if precision is not None else empty),
        "ar": _mean_valid(recall if recall is not None else empty),
        "per_class": per_class,
        "f1_confidence": f1_confidence(truth, detections, num_classes),
    }


def ap_resamples(
    truth: Sequence[np.ndarray], detections: Sequence[np.ndarray], num_classes: int, index: np.ndarray
) -> np.ndarray:
    """COCO AP of resamples of the images: what :func:`detection_report`'s ``"ap"`` gives for each row of ``index``.

    An image drawn k times counts k times: its detections weigh k in the per-class ranking, its truth boxes k in
    the recall (matching stays per image), so the test set is matched once and each resample is a weighted sum.
    Detections of equal score keep one order (by image, a drawn image's copies together) where COCO would rank
    the copies apart: the figures differ only within such ties.

    Args:
        truth, detections: Per image, as for :func:`detection_report`.
        num_classes: Class ids are ``0..num_classes-1``.
        index: ``[B, N]`` image indices, one resample per row.

    Returns:
        ``[B]`` AP values (NaN for a resample without ground truth).
    """
    index = np.asarray(index)
    weights = np.stack([np.bincount(row, minlength=len(truth)) for row in index]).astype(np.float64)
    total = np.zeros(len(index))
    counted = np.zeros(len(index))
    for c in range(num_classes):
        images = list(_per_image_class(truth, detections, c))
        n_truth = weights @ np.array([n for _, _, n in images], dtype=np.float64)
        valid = n_truth > 0
        if not valid.any():
            continue
        scores = np.concatenate([s for s, _, _ in images]) if images else np.zeros(0)
        owner = (
            np.concatenate([np.full(len(s), i) for i, (s, _, _) in enumerate(images)]) if images else np.zeros(0, int)
        )
        order = np.argsort(-scores, kind="mergesort")
        w = weights[:, owner[order]]
        for threshold in IOU_THRESHOLDS:
            counted += valid
            if not len(order):
                continue  # ground truth and no detection: precision 0 at every recall point
            matched = np.concatenate([_match(ious, threshold) for _, ious, _ in images])[order]
            tp, fp = np.cumsum(w * matched, axis=1), np.cumsum(w * ~matched, axis=1)
            precision = np.maximum.accumulate((tp / (tp + fp + np.spacing(1)))[:, ::-1], axis=1)[:, ::-1]
            for b in np.flatnonzero(valid):
                at = np.searchsorted(tp[b] / n_truth[b], RECALL_POINTS, side="left")
                inside = at < precision.shape[1]
                total[b] += precision[b, at[inside]].sum() / len(RECALL_POINTS)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, total / np.maximum(counted, 1), np.nan)
