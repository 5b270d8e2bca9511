"""Detection mAP, computed the standard ways (numpy only; no TensorFlow).

* **VOC / KITTI AP@0.5** per class (:func:`voc_ap`): detections of a class
  over all images in descending score order; each is matched to the
  ground-truth box of its class it overlaps most (IoU); IoU ≥ 0.5 and that
  box not yet taken makes a true positive, otherwise a false positive
  (duplicates included). AP is the area under the precision–recall curve
  with precision made monotone (all-point interpolation, VOC 2010+).
* **COCO AP@[.5:.95]** (:func:`coco_ap`): per image, detections (at most
  100, best first) take the best-IoU free ground truth at each IoU threshold
  0.50, 0.55, …, 0.95; precision is read at 101 recall points
  (0, 0.01, …, 1) and averaged over thresholds and classes (pycocotools'
  ``COCOeval`` with area range "all").

``dontcare`` regions (class :data:`DONTCARE`, as KITTI) are never ground
truth: a detection that is not a true positive and lies at least half
inside a dontcare region (intersection over the detection's area ≥ 0.5) is
ignored — neither true nor false positive. Detections of the dontcare class
itself are dropped. Classes without ground truth have no AP and are left
out of the means.

Boxes are ``(x1, y1, x2, y2)`` in continuous pixel coordinates (area
``(x2 - x1) * (y2 - y1)``, no "+1"). Inputs per image: ground truth
``N×5`` ``(class, x1, y1, x2, y2)`` and predictions ``K×6``
``(class, score, x1, y1, x2, y2)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Class id of ``dontcare`` regions.
DONTCARE = 0
#: COCO's IoU thresholds and recall points.
COCO_IOUS = np.linspace(0.5, 0.95, 10)
COCO_RECALLS = np.linspace(0.0, 1.0, 101)
COCO_MAX_DETS = 100


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of ``A×4`` and ``B×4`` boxes."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    inter = _intersection(a, b)
    area_a = _area(a)[:, None]
    area_b = _area(b)[None, :]
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def _area(b: np.ndarray) -> np.ndarray:
    return np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)


def _intersection(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    return iw * ih


def _in_dontcare(dets: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """Whether each detection box lies at least half inside some dontcare region."""
    if len(regions) == 0 or len(dets) == 0:
        return np.zeros(len(dets), bool)
    inter = _intersection(dets, regions)
    return (inter / np.maximum(_area(dets), 1e-12)[:, None] >= 0.5).any(axis=1)


def _as_gt(gt: Any) -> np.ndarray:
    return np.asarray(gt, np.float64).reshape(-1, 5)


def _as_pred(pred: Any) -> np.ndarray:
    return np.asarray(pred, np.float64).reshape(-1, 6)


def all_point_ap(recall: np.ndarray, precision: np.ndarray) -> float:
    """Area under the PR curve with monotone precision (VOC 2010+ all-point interpolation)."""
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    idx = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[idx + 1] - mrec[idx]) * mpre[idx + 1]))


def voc_ap(preds: Sequence, gts: Sequence, cls: int, iou: float = 0.5) -> tuple[float, np.ndarray, np.ndarray]:
    """VOC/KITTI AP of one class at IoU ``iou``; returns ``(ap, precision, recall)`` (NaN AP without ground truth)."""
    dets, gt_by_image, care = [], {}, {}
    npos = 0
    for i, (p, g) in enumerate(zip(preds, gts)):
        g, p = _as_gt(g), _as_pred(p)
        boxes = g[g[:, 0] == cls, 1:]
        gt_by_image[i] = (boxes, np.zeros(len(boxes), bool))
        care[i] = g[g[:, 0] == DONTCARE, 1:]
        npos += len(boxes)
        for row in p[p[:, 0] == cls]:
            dets.append((row[1], i, row[2:]))
    if npos == 0:
        return float("nan"), np.zeros(0), np.zeros(0)
    dets.sort(key=lambda d: -d[0])
    tp, fp = [], []
    for score, i, box in dets:
        boxes, taken = gt_by_image[i]
        hit = False
        if len(boxes):
            overlaps = box_iou(box[None], boxes)[0]
            j = int(np.argmax(overlaps))
            if overlaps[j] >= iou and not taken[j]:
                taken[j] = hit = True
        if not hit and _in_dontcare(box[None], care[i])[0]:
            continue  # ignored, as KITTI does for dontcare regions
        tp.append(1.0 if hit else 0.0)
        fp.append(0.0 if hit else 1.0)
    tp_c, fp_c = np.cumsum(tp), np.cumsum(fp)
    recall = tp_c / npos
    precision = tp_c / np.maximum(tp_c + fp_c, 1e-12)
    return all_point_ap(recall, precision), precision, recall


def _coco_match(p: np.ndarray, g: np.ndarray, cls: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One image and class, all COCO thresholds: ``(scores, matched [T×D], ignored [T×D], n_gt)``."""
    boxes = g[g[:, 0] == cls, 1:]
    care = g[g[:, 0] == DONTCARE, 1:]
    dets = p[p[:, 0] == cls]
    dets = dets[np.argsort(-dets[:, 1], kind="mergesort")][:COCO_MAX_DETS]
    t_n, d_n = len(COCO_IOUS), len(dets)
    matched = np.zeros((t_n, d_n), bool)
    ignored = np.zeros((t_n, d_n), bool)
    if d_n:
        ious = box_iou(dets[:, 2:], boxes) if len(boxes) else np.zeros((d_n, 0))
        in_care = _in_dontcare(dets[:, 2:], care)
        for t, thr in enumerate(COCO_IOUS):
            taken = np.zeros(len(boxes), bool)
            for d in range(d_n):
                best, best_j = min(thr, 1 - 1e-10), -1
                for j in range(len(boxes)):
                    if taken[j] or ious[d, j] < best:
                        continue
                    best, best_j = ious[d, j], j
                if best_j >= 0:
                    taken[best_j] = matched[t, d] = True
                elif in_care[d]:
                    ignored[t, d] = True
    return dets[:, 1], matched, ignored, len(boxes)


def coco_ap(preds: Sequence, gts: Sequence, cls: int) -> tuple[float, np.ndarray]:
    """COCO AP@[.5:.95] of one class (101-point); returns ``(ap, AP per IoU threshold)``, NaN without ground truth."""
    scores, matched, ignored, npos = [], [], [], 0
    for p, g in zip(preds, gts):
        s, m, ig, n = _coco_match(_as_pred(p), _as_gt(g), cls)
        scores.append(s)
        matched.append(m)
        ignored.append(ig)
        npos += n
    if npos == 0:
        return float("nan"), np.full(len(COCO_IOUS), np.nan)
    s = np.concatenate(scores) if scores else np.zeros(0)
    order = np.argsort(-s, kind="mergesort")
    m = np.concatenate(matched, axis=1)[:, order]
    ig = np.concatenate(ignored, axis=1)[:, order]
    per_t = np.zeros(len(COCO_IOUS))
    for t in range(len(COCO_IOUS)):
        keep = ~ig[t]
        tp = np.cumsum(m[t][keep])
        fp = np.cumsum(~m[t][keep])
        recall = tp / npos
        precision = tp / np.maximum(tp + fp, np.spacing(1))
        precision = np.maximum.accumulate(precision[::-1])[::-1] if len(precision) else precision
        idx = np.searchsorted(recall, COCO_RECALLS, side="left")
        sampled = np.array([precision[i] if i < len(precision) else 0.0 for i in idx])
        per_t[t] = sampled.mean()
    return float(per_t.mean()), per_t


def evaluate(
    preds: Sequence, gts: Sequence, num_classes: int, class_names: Sequence[str] | None = None, curve_points: int = 50
) -> dict:
    """mAP of a set of images.

    Args:
        preds: Per image, ``K×6`` ``(class, score, x1, y1, x2, y2)`` predictions.
        gts: Per image, ``N×5`` ``(class, x1, y1, x2, y2)`` ground truth (dontcare = class 0).
        num_classes: Classes including dontcare (ids ``0 .. num_classes-1``).
        class_names: Names for the per-class keys (default: the ids).
        curve_points: Points kept of each class's precision–recall curve.

    Returns:
        ``{"map50", "map", "ap50": {name: AP}, "ap": {name: AP}, "pr_curves": {name: {"recall", "precision"}},
        "num_gt": {name: count}}``. Means are over the classes with ground
        truth (``NaN`` when none has any).
    """
    if len(preds) != len(gts):
        raise ValueError(f"{len(preds)} prediction sets for {len(gts)} ground-truth sets")
    names = list(class_names) if class_names else [str(i) for i in range(num_classes)]
    ap50, ap, curves, counts = {}, {}, {}, {}
    for cls in range(num_classes):
        if cls == DONTCARE:
            continue
        name = names[cls] if cls < len(names) else str(cls)
        a50, precision, recall = voc_ap(preds, gts, cls)
        if np.isnan(a50):
            continue
        ap50[name] = a50
        ap[name] = coco_ap(preds, gts, cls)[0]
        counts[name] = int(sum(int((_as_gt(g)[:, 0] == cls).sum()) for g in gts))
        if len(recall):
            pick = np.unique(np.linspace(0, len(recall) - 1, min(curve_points, len(recall))).astype(int))
            curves[name] = {
                "recall": [round(float(v), 4) for v in recall[pick]],
                "precision": [round(float(v), 4) for v in precision[pick]],
            }
        else:
            curves[name] = {"recall": [], "precision": []}
    mean = lambda d: float(np.mean(list(d.values()))) if d else float("nan")
    return {"map50": mean(ap50), "map": mean(ap), "ap50": ap50, "ap": ap, "pr_curves": curves, "num_gt": counts}


def match_image(pred: Any, gt: Any, iou: float = 0.5) -> dict:
    """True/false positives and misses of one image at IoU ``iou`` (for a view).

    Predictions are taken best first; each takes the free ground-truth box of
    its class it overlaps most. Predictions inside dontcare regions that
    match nothing are ignored.

    Returns:
        ``{"tp", "fp", "fn"}`` counts and ``"pred_status"`` (per prediction,
        in input order: ``"tp"``, ``"fp"`` or ``"ignored"``) and
        ``"gt_matched"`` (per ground-truth row: bool; dontcare rows False).
    """
    p, g = _as_pred(pred), _as_gt(gt)
    status = ["fp"] * len(p)
    taken = np.zeros(len(g), bool)
    care = g[g[:, 0] == DONTCARE, 1:]
    for k in np.argsort(-p[:, 1], kind="mergesort"):
        cls = p[k, 0]
        candidates = np.nonzero((g[:, 0] == cls) & ~taken & (cls != DONTCARE))[0]
        if len(candidates):
            overlaps = box_iou(p[k, 2:][None], g[candidates, 1:])[0]
            j = int(np.argmax(overlaps))
            if overlaps[j] >= iou:
                taken[candidates[j]] = True
                status[k] = "tp"
                continue
        if cls == DONTCARE or _in_dontcare(p[k, 2:][None], care)[0]:
            status[k] = "ignored"
    real = g[:, 0] != DONTCARE
    return {
        "tp": status.count("tp"),
        "fp": status.count("fp"),
        "fn": int((real & ~taken).sum()),
        "pred_status": status,
        "gt_matched": [bool(t) for t in taken],
    }


#: Public names (``digits_core.evaluate_detections`` / ``digits_core.match_detections``).
evaluate_detections = evaluate
match_detections = match_image
