"""Error figures of the generic views (numpy only)."""

from __future__ import annotations

import numpy as np


def mae_rmse(predicted, true) -> tuple[np.ndarray, np.ndarray]:
    """Return per-column mean absolute error and root-mean-square error.

    Args:
        predicted: ``[N, K]`` (or ``[N]``) predictions.
        true: The targets, same shape.

    Returns:
        ``(mae, rmse)``, each of shape ``[K]`` (``[1]`` for 1-D inputs).
    """
    p = np.asarray(predicted, np.float64).reshape(len(predicted), -1)
    t = np.asarray(true, np.float64).reshape(len(true), -1)
    if p.shape != t.shape:
        raise ValueError(f"predictions {p.shape} and targets {t.shape} differ in shape")
    error = p - t
    return np.abs(error).mean(axis=0), np.sqrt((error**2).mean(axis=0))


def psnr(output, target, data_range: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB: ``10·log10(range² / MSE)`` (``inf`` for identical images)."""
    mse = float(np.mean((np.asarray(output, np.float64) - np.asarray(target, np.float64)) ** 2))
    return float("inf") if mse == 0 else float(10.0 * np.log10(data_range**2 / mse))


def _gaussian_kernel(sigma: float, radius: int) -> np.ndarray:
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    kernel = np.exp(-0.5 * (x / sigma) ** 2)
    return kernel / kernel.sum()


def _filter(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Separable Gaussian filter of a 2-D array, edges mirrored (``numpy.pad`` "symmetric")."""
    radius = len(kernel) // 2
    padded = np.pad(image, radius, mode="symmetric")
    rows = sum(kernel[i] * padded[:, i : i + image.shape[1]] for i in range(len(kernel)))
    return sum(kernel[i] * rows[i : i + image.shape[0], :] for i in range(len(kernel)))


def ssim(output, target, data_range: float = 1.0, sigma: float = 1.5) -> float:
    """Structural similarity (Wang et al. 2004), Gaussian-weighted, mean over pixels and channels.

    Constants ``K1 = 0.01``, ``K2 = 0.03``; an 11×11 window (σ = 1.5),
    shrunk to fit images smaller than 11 pixels; the border the window does
    not cover is left out of the mean. Equals scikit-image's
    ``structural_similarity(gaussian_weights=True, sigma=1.5,
    use_sample_covariance=False, data_range=...)``.

    Args:
        output, target: ``H×W`` or ``H×W×C`` arrays.
    """
    x = np.asarray(output, np.float64)
    y = np.asarray(target, np.float64)
    if x.ndim == 2:
        x, y = x[:, :, None], y[:, :, None]
    radius = max(0, min(int(3.5 * sigma + 0.5), (min(x.shape[:2]) - 1) // 2))
    kernel = _gaussian_kernel(sigma, radius)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    values = []
    for ch in range(x.shape[2]):
        a, b = x[:, :, ch], y[:, :, ch]
        ua, ub = _filter(a, kernel), _filter(b, kernel)
        va = _filter(a * a, kernel) - ua * ua
        vb = _filter(b * b, kernel) - ub * ub
        cov = _filter(a * b, kernel) - ua * ub
        s = ((2 * ua * ub + c1) * (2 * cov + c2)) / ((ua**2 + ub**2 + c1) * (va + vb + c2))
        inner = s[radius : s.shape[0] - radius, radius : s.shape[1] - radius] if radius else s
        values.append(inner.mean())
    return float(np.mean(values))
