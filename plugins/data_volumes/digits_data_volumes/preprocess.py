"""Resampling to a target spacing and intensity normalisation per modality, shared by the volume plugins.

Resampling (as nnU-Net does, to the dataset's median spacing by default)
keeps voxel 0's centre where it was and puts the next ones ``target`` mm
apart: linear interpolation for images, nearest neighbour for labels, and
the affine's columns scaled to match.

Normalisation, declared once per dataset (the ``normalization`` form field):

* ``auto``: from the modality — CT gets ``ct-window``, anything else ``zscore``;
* ``zscore``: per case and channel, ``(x - mean) / std`` over the whole volume (MR);
* ``ct-window``: clip to ``[window_low, window_high]`` HU and scale to ``[0, 1]``;
* ``none``: the voxels as stored (their dtype kept).

Normalised volumes are float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from digits_core import Volume

NORMALIZATIONS = ("auto", "zscore", "ct-window", "none")
#: The CT window by default (HU): soft tissue and contrast, as abdominal windows go.
CT_WINDOW = (-160.0, 240.0)


def parse_spacing(text: str | None) -> tuple[float, float, float] | None:
    """Parse a ``D,H,W`` spacing in mm (``"2.5,1.25,1.25"``); ``None`` for empty or ``median``.

    Raises:
        ValueError: Not three positive numbers.
    """
    value = (text or "").strip().lower()
    if value in ("", "median"):
        return None
    parts = [p for p in value.replace("x", ",").split(",") if p.strip()]
    try:
        numbers = tuple(float(p) for p in parts)
    except ValueError:
        raise ValueError(f'"{text}" is not D,H,W in mm (e.g. 2.5,1.25,1.25) or "median"') from None
    if len(numbers) != 3 or min(numbers) <= 0 or not all(np.isfinite(numbers)):
        raise ValueError(f'"{text}" is not three positive numbers D,H,W in mm (e.g. 2.5,1.25,1.25)')
    return numbers  # type: ignore[return-value]


def resampled_shape(shape: Sequence[int], spacing: Sequence[float], target: Sequence[float]) -> tuple[int, ...]:
    """The ``D×H×W`` shape covering the same extent at ``target`` spacing (at least one voxel per axis)."""
    return tuple(max(1, int(round(n * s / t))) for n, s, t in zip(shape[:3], spacing, target))


def resample(
    volume: Volume, label: np.ndarray | None, target: Sequence[float] | None
) -> tuple[Volume, np.ndarray | None]:
    """Resample a canonical volume (and its label) to ``target`` ``(D, H, W)`` mm; unchanged when already there."""
    if target is None or np.allclose(volume.spacing, target, rtol=1e-4):
        return volume, label
    from scipy import ndimage

    scale = np.asarray(target, dtype=np.float64) / np.asarray(volume.spacing, dtype=np.float64)
    shape = resampled_shape(volume.array.shape, volume.spacing, target)
    channels = []
    for c in range(volume.array.shape[3]):
        source = volume.array[..., c].astype(np.float32)
        out = ndimage.affine_transform(source, scale, output_shape=shape, order=1, mode="nearest")
        channels.append(
            out.astype(volume.array.dtype)
            if volume.array.dtype.kind == "f"
            else np.rint(out).astype(volume.array.dtype)
        )
    affine = volume.affine @ np.diag(list(scale[::-1]) + [1.0])  # affine columns are i, j, k = W, H, D
    resampled = Volume(
        np.stack(channels, axis=-1), tuple(float(t) for t in target), np.round(affine, 5) + 0.0, volume.name
    )
    if label is not None:
        label = ndimage.affine_transform(label, scale, output_shape=shape, order=0, mode="nearest")
    return resampled, label


def normalize(volume: Volume, method: str, modality: str = "", window: Sequence[float] = CT_WINDOW) -> Volume:
    """Normalise a volume's intensities (see the module docstring); ``modality`` picks for ``auto``.

    Raises:
        ValueError: An unknown method, or an empty CT window.
    """
    if method == "auto":
        method = "ct-window" if modality.strip().upper() == "CT" else "zscore"
    if method == "none":
        return volume
    if method not in ("zscore", "ct-window"):
        raise ValueError(f'unknown normalization "{method}" (one of {", ".join(NORMALIZATIONS)})')
    # one float32 copy, changed in place: a 300-slice CT is 150 MB, and float64 temporaries would triple that
    data = np.array(volume.array, dtype=np.float32, order="C")
    if method == "zscore":
        mean, std = _channel_moments(data)
        data -= mean.astype(np.float32)
        data /= np.maximum(std, 1e-8).astype(np.float32)
    else:
        low, high = float(window[0]), float(window[1])
        if not high > low:
            raise ValueError(f"the CT window needs window_low < window_high, got {low}..{high}")
        np.clip(data, low, high, out=data)
        data -= np.float32(low)
        data /= np.float32(high - low)
    return volume._replace(array=data)


def _channel_moments(data: np.ndarray, step: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of ``D×H×W×C`` voxels, accumulated in float64 a few slices at a time."""
    count = data.shape[0] * data.shape[1] * data.shape[2]
    total = np.zeros(data.shape[3], np.float64)
    for start in range(0, data.shape[0], step):
        total += data[start : start + step].sum(axis=(0, 1, 2), dtype=np.float64)
    mean = total / count
    squares = np.zeros(data.shape[3], np.float64)
    for start in range(0, data.shape[0], step):
        squares += ((data[start : start + step] - mean) ** 2).sum(axis=(0, 1, 2))
    return mean, np.sqrt(squares / count)
