"""Sliding-window inference over a whole volume: overlapping tiles, Gaussian-weighted blending (nnU-Net, MONAI).

Tiles of the patch size start every ``patch × (1 − overlap)`` voxels (the
last one flush with the far edge); each tile's class probabilities are
weighted by a Gaussian centred on the tile (σ = patch/8), so tile borders,
where a network sees least context, count least. The weighted sum divided by
the summed weights is the volume's probability map. A volume smaller than
the patch is padded (edge values) and cropped back.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

#: Tiles predicted per call of the network.
TILE_BATCH = 4


def gaussian_weights(patch: Sequence[int], sigma_scale: float = 0.125) -> np.ndarray:
    """The ``D×H×W`` blending weights of one tile (max 1, never 0)."""
    axes = []
    for n in patch:
        x = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
        axes.append(np.exp(-0.5 * (x / max(n * sigma_scale, 1e-6)) ** 2))
    weights = axes[0][:, None, None] * axes[1][None, :, None] * axes[2][None, None, :]
    weights /= weights.max()
    return np.maximum(weights, 1e-3).astype(np.float32)


def tile_starts(size: int, patch: int, overlap: float) -> list[int]:
    """Start offsets along one axis: every ``patch·(1-overlap)`` voxels, the last flush with the end."""
    if size <= patch:
        return [0]
    step = max(1, int(patch * (1.0 - overlap)))
    starts = list(range(0, size - patch, step))
    return starts + [size - patch]


def sliding_window(
    volume: np.ndarray,
    patch: Sequence[int],
    predict: Callable[[np.ndarray], np.ndarray],
    num_classes: int,
    *,
    overlap: float = 0.5,
) -> np.ndarray:
    """Class probabilities ``D×H×W×K`` of a ``D×H×W×C`` volume.

    Args:
        volume: The (normalised) volume.
        patch: Tile size ``(D, H, W)``.
        predict: Maps a batch ``N×D×H×W×C`` of tiles to ``N×D×H×W×K`` probabilities.
        num_classes: K.
        overlap: Fraction of a tile shared with the next one (0 to <1).
    """
    patch = tuple(int(p) for p in patch)
    shape = volume.shape[:3]
    pad = [(0, max(0, p - s)) for p, s in zip(patch, shape)]
    padded = np.pad(volume, pad + [(0, 0)], mode="edge") if any(p[1] for p in pad) else volume
    full = padded.shape[:3]
    weights = gaussian_weights(patch)
    total = np.zeros(full + (num_classes,), np.float32)
    norm = np.zeros(full, np.float32)
    corners = list(itertools.product(*(tile_starts(s, p, overlap) for s, p in zip(full, patch))))
    for first in range(0, len(corners), TILE_BATCH):
        group = corners[first : first + TILE_BATCH]
        tiles = np.stack([padded[d : d + patch[0], h : h + patch[1], w : w + patch[2]] for d, h, w in group])
        probs = np.asarray(predict(tiles), dtype=np.float32)
        for (d, h, w), prob in zip(group, probs):
            total[d : d + patch[0], h : h + patch[1], w : w + patch[2]] += prob * weights[..., None]
            norm[d : d + patch[0], h : h + patch[1], w : w + patch[2]] += weights
    out = total / norm[..., None]
    return out[: shape[0], : shape[1], : shape[2]]
