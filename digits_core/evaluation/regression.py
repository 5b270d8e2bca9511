"""Regression and image-to-image figures, computed as scikit-learn and scikit-image compute them.

* :func:`regression_report`: per target ``MAE``, ``RMSE`` and ``R²`` (``1 − SS_res / SS_tot``; a constant
  target scores 1.0 when predicted exactly and 0.0 otherwise, scikit-learn's ``force_finite``), and their
  means over targets.
* :func:`psnr`: ``10 · log10(data_range² / MSE)`` in dB.
* :func:`ssim`: the mean structural similarity with scikit-image's defaults (a 7-pixel uniform window,
  sample covariance, ``K1 = 0.01``, ``K2 = 0.03``, the border of half a window left out), per channel
  and averaged for H×W×C images.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def regression_report(
    predicted: np.ndarray, truth: np.ndarray, target_names: list[str] | None = None
) -> dict[str, Any]:
    """MAE, RMSE and R² per target of ``[N, T]`` (or ``[N]``) predictions, and their means."""
    p = np.asarray(predicted, dtype=np.float64).reshape(len(predicted), -1)
    y = np.asarray(truth, dtype=np.float64).reshape(len(truth), -1)
    if p.shape != y.shape:
        raise ValueError(f"predictions {p.shape} and truth {y.shape} differ in shape")
    error = p - y
    mae = np.abs(error).mean(axis=0)
    rmse = np.sqrt((error**2).mean(axis=0))
    ss_res = (error**2).sum(axis=0)
    ss_tot = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    r2 = np.where(ss_tot > 0, 1 - ss_res / np.where(ss_tot > 0, ss_tot, 1), np.where(ss_res > 0, 0.0, 1.0))
    names = target_names or [str(i) for i in range(y.shape[1])]
    return {
        "count": int(len(y)),
        "per_target": [
            {"target": names[i], "mae": float(mae[i]), "rmse": float(rmse[i]), "r2": float(r2[i])}
            for i in range(y.shape[1])
        ],
        "mae": float(mae.mean()),
        "rmse": float(rmse.mean()),
        "r2": float(r2.mean()),
    }


def psnr(truth: np.ndarray, predicted: np.ndarray, data_range: float) -> float:
    """Peak signal-to-noise ratio in dB (``inf`` for identical images)."""
    mse = float(np.mean((np.asarray(truth, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)) ** 2))
    return float("inf") if mse == 0 else float(10 * np.log10(data_range**2 / mse))


def _ssim_2d(x: np.ndarray, y: np.ndarray, data_range: float, win_size: int) -> float:
    from scipy.ndimage import uniform_filter

    n = win_size**x.ndim
    cov_norm = n / (n - 1)
    ux, uy = uniform_filter(x, size=win_size), uniform_filter(y, size=win_size)
    vx = cov_norm * (uniform_filter(x * x, size=win_size) - ux * ux)
    vy = cov_norm * (uniform_filter(y * y, size=win_size) - uy * uy)
    vxy = cov_norm * (uniform_filter(x * y, size=win_size) - ux * uy)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux**2 + uy**2 + c1) * (vx + vy + c2))
    pad = (win_size - 1) // 2
    return float(s[tuple(slice(pad, dim - pad) for dim in s.shape)].mean(dtype=np.float64))


def ssim(truth: np.ndarray, predicted: np.ndarray, data_range: float, win_size: int = 7) -> float:
    """Mean structural similarity of two H×W or H×W×C images (channels last, averaged)."""
    x, y = np.asarray(truth, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"images {x.shape} and {y.shape} differ in shape")
    if x.ndim == 3:
        return float(np.mean([_ssim_2d(x[..., c], y[..., c], data_range, win_size) for c in range(x.shape[-1])]))
    return _ssim_2d(x, y, data_range, win_size)


def image_report(truth: list[np.ndarray], predicted: list[np.ndarray], data_range: float) -> dict[str, Any]:
    """Per image PSNR and SSIM, and their means (finite PSNRs), for image-to-image models."""
    rows = [
        {
            "psnr": psnr(t, p, data_range),
            "ssim": ssim(t, p, data_range),
            "mae": float(np.mean(np.abs(np.asarray(t, np.float64) - p))),
        }
        for t, p in zip(truth, predicted)
    ]
    finite = [r["psnr"] for r in rows if np.isfinite(r["psnr"])]
    return {
        "count": len(rows),
        "per_case": rows,
        "psnr": float(np.mean(finite)) if finite else None,
        "ssim": float(np.mean([r["ssim"] for r in rows])) if rows else None,
        "mae": float(np.mean([r["mae"] for r in rows])) if rows else None,
    }
