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
    return np.abs(error).mean(axis=0), np.sqrt((error ** 2).mean(axis=0))
