"""Volume segmentation metrics as the Decathlon reports them: Dice per case and class, HD95 in millimetres.

* :func:`dice_per_class` — ``2|A∩B| / (|A| + |B|)`` for each foreground class of one case; a class absent
  from both prediction and truth scores 1.0 (nothing to find, nothing found), absent from one only 0.0.
* :func:`hd95` — the 95th percentile Hausdorff distance between the surfaces of two binary masks, in mm:
  the larger of the two directed 95th percentiles of surface-voxel-to-nearest-surface-voxel distances,
  with voxel coordinates scaled by the spacing. ``inf`` when exactly one mask is empty, ``0.0`` when both are.
* :func:`case_metrics` / :func:`summarize` — per-case mean Dice (mean over foreground classes), then the
  mean over cases (the reported figure), per-class mean Dice and mean HD95.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def dice_per_class(pred: np.ndarray, truth: np.ndarray, num_classes: int) -> list[float]:
    """Dice of classes ``1..num_classes-1`` for one case (see the module docstring)."""
    scores = []
    for c in range(1, num_classes):
        p, t = pred == c, truth == c
        total = int(p.sum()) + int(t.sum())
        scores.append(1.0 if total == 0 else 2.0 * int(np.logical_and(p, t).sum()) / total)
    return scores


def surface(mask: np.ndarray) -> np.ndarray:
    """The voxels of a binary mask that touch its outside (6-connectivity)."""
    from scipy import ndimage

    mask = mask.astype(bool)
    return mask & ~ndimage.binary_erosion(
        mask, structure=ndimage.generate_binary_structure(mask.ndim, 1), border_value=0
    )


def hd95(pred: np.ndarray, truth: np.ndarray, spacing: Sequence[float]) -> float:
    """95th percentile Hausdorff distance in mm between binary masks (see the module docstring)."""
    from scipy.spatial import cKDTree

    a, b = surface(pred), surface(truth)
    if not a.any() and not b.any():
        return 0.0
    if not a.any() or not b.any():
        return float("inf")
    scale = np.asarray(spacing, dtype=np.float64)
    pa, pb = np.argwhere(a) * scale, np.argwhere(b) * scale
    d_ab = cKDTree(pb).query(pa)[0]
    d_ba = cKDTree(pa).query(pb)[0]
    return float(max(np.percentile(d_ab, 95), np.percentile(d_ba, 95)))


def case_metrics(pred: np.ndarray, truth: np.ndarray, num_classes: int, spacing: Sequence[float]) -> dict:
    """Dice per class, their mean, and HD95 per class (mm) of one case."""
    dice = dice_per_class(pred, truth, num_classes)
    hd = [hd95(pred == c, truth == c, spacing) for c in range(1, num_classes)]
    return {"dice": float(np.mean(dice)) if dice else 1.0, "dice_per_class": dice, "hd95_per_class": hd}


def summarize(cases: list[dict]) -> dict[str, float]:
    """Mean over cases: ``val_dice`` (per-case mean Dice), ``val_dice_class<c>`` and ``val_hd95`` (finite cases)."""
    if not cases:
        return {}
    out = {"val_dice": float(np.mean([c["dice"] for c in cases]))}
    for index in range(len(cases[0]["dice_per_class"])):
        out[f"val_dice_class{index + 1}"] = float(np.mean([c["dice_per_class"][index] for c in cases]))
    finite = [h for c in cases for h in c["hd95_per_class"] if np.isfinite(h)]
    if finite:
        out["val_hd95"] = float(np.mean(finite))
    return out
