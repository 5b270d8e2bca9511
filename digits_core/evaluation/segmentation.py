"""Segmentation figures per case (one image or volume), spacing-aware, summarised as nnU-Net's ``summary.json``.

For each foreground class of a case (prediction and reference label maps of the same shape, the voxel
spacing in mm along each axis):

* ``Dice`` ``2TP / (2TP + FP + FN)`` and ``IoU`` ``TP / (TP + FP + FN)``; both ``NaN`` when the class is in
  neither map (nnU-Net's rule: nothing to score), with the counts ``TP``, ``FP``, ``FN``, ``TN``,
  ``n_pred``, ``n_ref``;
* surface distances between the two masks' surfaces (the voxels that touch the outside, 6-connectivity:
  :func:`digits_core.volumes.metrics.surface`), the distance between voxel centres scaled by the spacing:
  ``HD95`` the larger of the two directed 95th percentiles (as :func:`digits_core.volumes.metrics.hd95`),
  ``ASSD`` the mean of all distances of both directions, ``NSD`` the normalised surface Dice at a
  tolerance in mm (surface voxels of either mask within the tolerance of the other's surface, over all
  surface voxels, counted per voxel as MONAI's ``compute_surface_dice`` does). Both masks empty: ``NaN``
  (nothing to measure); one empty: ``HD95``/``ASSD`` ``inf``, ``NSD`` 0;
* ``volume_difference`` ``(n_pred − n_ref)`` times the voxel volume (mm³; mm² in 2-D) and
  ``relative_volume_difference`` ``(n_pred − n_ref) / n_ref`` (``NaN`` without reference voxels).

:func:`summarize` writes nnU-Net's layout: ``metric_per_case`` (``{"metrics": {"1": {...}}, "case": id}``),
``mean`` per class (mean over cases of finite values) and ``foreground_mean`` (the mean of the class means).
In JSON a non-finite figure is ``null``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..volumes.metrics import surface

#: Tolerance of the normalised surface Dice, mm.
NSD_TOLERANCE_MM = 1.0
#: Figures averaged by :func:`summarize` (the counts are summed over nothing: they are per case only).
MEAN_METRICS = (
    "Dice",
    "IoU",
    "HD95",
    "ASSD",
    "NSD",
    "volume_difference",
    "relative_volume_difference",
    "FP",
    "TP",
    "FN",
    "TN",
    "n_pred",
    "n_ref",
)


def _crop(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both masks cut to the bounding box of their union plus one voxel (surfaces and distances unchanged)."""
    both = pred | ref
    box = []
    for axis in range(both.ndim):
        hit = np.flatnonzero(both.any(axis=tuple(a for a in range(both.ndim) if a != axis)))
        box.append(slice(max(0, int(hit[0]) - 1), int(hit[-1]) + 2))
    return pred[tuple(box)], ref[tuple(box)]


def surface_distances(
    pred: np.ndarray, ref: np.ndarray, spacing: Sequence[float]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Distances (mm) from each surface voxel of ``pred`` to ``ref``'s surface and back; ``None`` if either is empty.

    Exact nearest neighbours (a k-d tree over the surface voxels' coordinates times the spacing), on the
    masks cut to the bounding box of their union: a 256³ pair takes seconds, not a distance transform's minute.
    """
    from scipy.spatial import cKDTree

    if not pred.any() or not ref.any():
        return None
    pred, ref = _crop(pred, ref)
    scale = np.asarray(spacing, dtype=np.float64)
    a, b = np.argwhere(surface(pred)) * scale, np.argwhere(surface(ref)) * scale
    return cKDTree(b).query(a)[0], cKDTree(a).query(b)[0]


def binary_metrics(
    pred: np.ndarray, ref: np.ndarray, spacing: Sequence[float], tolerance: float = NSD_TOLERANCE_MM
) -> dict[str, float]:
    """Every per-class figure of one case for binary masks ``pred`` and ``ref`` (see the module docstring)."""
    pred, ref = np.asarray(pred, dtype=bool), np.asarray(ref, dtype=bool)
    if pred.shape != ref.shape:
        raise ValueError(f"prediction shape {pred.shape} differs from reference shape {ref.shape}")
    if len(spacing) != pred.ndim:
        raise ValueError(f"spacing {tuple(spacing)} has {len(spacing)} values for a {pred.ndim}-D mask")
    tp = int(np.count_nonzero(pred & ref))
    fp = int(np.count_nonzero(pred & ~ref))
    fn = int(np.count_nonzero(~pred & ref))
    tn = int(pred.size - tp - fp - fn)
    n_pred, n_ref = tp + fp, tp + fn
    nan = float("nan")
    out: dict[str, float] = {
        "Dice": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else nan,
        "IoU": tp / (tp + fp + fn) if tp + fp + fn else nan,
        "FP": fp,
        "TP": tp,
        "FN": fn,
        "TN": tn,
        "n_pred": n_pred,
        "n_ref": n_ref,
    }
    voxel = float(np.prod(np.asarray(spacing, dtype=np.float64)))
    out["volume_difference"] = (n_pred - n_ref) * voxel
    out["relative_volume_difference"] = (n_pred - n_ref) / n_ref if n_ref else nan
    if not n_pred and not n_ref:
        out.update(HD95=nan, ASSD=nan, NSD=nan)
        return out
    distances = surface_distances(pred, ref, spacing)
    if distances is None:
        out.update(HD95=float("inf"), ASSD=float("inf"), NSD=0.0)
        return out
    d_ab, d_ba = distances
    out["HD95"] = float(max(np.percentile(d_ab, 95), np.percentile(d_ba, 95)))
    out["ASSD"] = float((d_ab.sum() + d_ba.sum()) / (len(d_ab) + len(d_ba)))
    out["NSD"] = float(
        (np.count_nonzero(d_ab <= tolerance) + np.count_nonzero(d_ba <= tolerance)) / (len(d_ab) + len(d_ba))
    )
    return out


def case_metrics(
    pred: np.ndarray,
    ref: np.ndarray,
    classes: Sequence[int],
    spacing: Sequence[float] | None = None,
    tolerance: float = NSD_TOLERANCE_MM,
) -> dict[str, dict[str, float]]:
    """``{"<class>": figures}`` of one case for each class in ``classes`` (label maps; spacing default 1 mm)."""
    pred, ref = np.asarray(pred), np.asarray(ref)
    spacing = tuple(spacing) if spacing is not None else (1.0,) * pred.ndim
    return {str(c): binary_metrics(pred == c, ref == c, spacing, tolerance) for c in classes}


def _mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def summarize(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """nnU-Net's ``summary.json`` layout from ``[{"case": id, "metrics": case_metrics(...)}, ...]``."""
    classes = list(cases[0]["metrics"]) if cases else []
    mean = {c: {m: _mean([case["metrics"][c][m] for case in cases]) for m in MEAN_METRICS} for c in classes}
    foreground = {m: _mean([mean[c][m] for c in classes]) for m in MEAN_METRICS} if classes else {}
    return {"metric_per_case": list(cases), "mean": mean, "foreground_mean": foreground}


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float as ``None`` (JSON has no NaN or infinity)."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
