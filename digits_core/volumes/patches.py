"""Training patches from a volume stage: foreground oversampling and 3-D augmentation.

:class:`PatchSampler` reads each patch with
:meth:`~digits_core.datasets.volumes.VolumeStageReader.patch`, touching only
the slabs the patch overlaps. A share ``foreground`` of the patches is
centred on a random foreground voxel (nnU-Net's oversampling: small
structures are otherwise rarely seen); the rest start anywhere. Patches
larger than a case are padded (edge values for the image, background for
the label). :func:`augment` flips along each axis, turns by 90° in the
H×W plane (square patches), zooms a share of the patches by 0.9–1.1 and
scales/shifts intensities.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Foreground voxel positions kept per case for oversampling.
MAX_FOREGROUND_POINTS = 20000


class PatchSampler:
    """Random training patches of one stage.

    Args:
        reader: A :class:`~digits_core.datasets.volumes.VolumeStageReader`.
        count: Cases in the stage.
        patch: Patch size ``(D, H, W)``.
        foreground: Share of patches centred on a foreground voxel (0–1).
        seed: Seed of the sampling.
    """

    def __init__(self, reader, count: int, patch: Sequence[int], *, foreground: float = 0.5, seed: int = 0):
        self.reader = reader
        self.patch = tuple(int(p) for p in patch)
        self.foreground = float(foreground)
        self.rng = np.random.default_rng(seed)
        self.shapes = [reader.meta(i).shape for i in range(count)]
        self.points = []
        for index in range(count):
            label = reader.patch(index, (0, 0, 0), self.shapes[index][:3])[1]
            points = np.argwhere(label > 0)
            if len(points) > MAX_FOREGROUND_POINTS:
                points = points[self.rng.choice(len(points), MAX_FOREGROUND_POINTS, replace=False)]
            self.points.append(points)

    def _start(self, index: int) -> tuple[int, ...]:
        shape = self.shapes[index][:3]
        points = self.points[index]
        if len(points) and self.rng.random() < self.foreground:
            centre = points[self.rng.integers(len(points))]
            return tuple(int(np.clip(c - p // 2, 0, max(s - p, 0))) for c, p, s in zip(centre, self.patch, shape))
        return tuple(int(self.rng.integers(0, max(s - p, 0) + 1)) for p, s in zip(self.patch, shape))

    def sample(self, index: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One patch ``(D×H×W×C float32, D×H×W int32)`` of case ``index`` (random case when ``None``)."""
        if index is None:
            index = int(self.rng.integers(len(self.shapes)))
        image, label = self.reader.patch(index, self._start(index), self.patch)
        short = [(0, p - s) for p, s in zip(self.patch, label.shape)]
        if any(pad for _, pad in short):
            image = np.pad(image, short + [(0, 0)], mode="edge")
            label = np.pad(label, short, mode="constant")
        return image.astype(np.float32, copy=False), label.astype(np.int32, copy=False)

    def batch(self, size: int, *, augmented: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """A batch of ``size`` patches (augmented with :func:`augment` when asked)."""
        pairs = [self.sample() for _ in range(size)]
        if augmented:
            pairs = [augment(image, label, self.rng) for image, label in pairs]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


#: Share of patches zoomed, and the zoom range (nnU-Net's "small scaling").
SCALE_PROBABILITY, SCALE_RANGE = 0.3, (0.9, 1.1)


def rescale(image: np.ndarray, label: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    """Zoom a patch by ``factor`` about its centre, keeping its shape (linear for the image, nearest for the label)."""
    from scipy import ndimage

    shape = np.asarray(label.shape, dtype=np.float64)
    matrix = np.full(3, 1.0 / factor)
    offset = (shape - 1) / 2 * (1 - matrix)  # output voxel o reads input voxel centre + (o - centre) / factor
    channels = [
        ndimage.affine_transform(image[..., c], matrix, offset=offset, order=1, mode="nearest")
        for c in range(image.shape[3])
    ]
    zoomed = ndimage.affine_transform(label, matrix, offset=offset, order=0, mode="nearest")
    return np.stack(channels, axis=-1).astype(image.dtype), zoomed


def augment(image: np.ndarray, label: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random flips (each axis), a 90° turn in the H×W plane (when square), small scaling, intensity scale/shift."""
    if rng.random() < SCALE_PROBABILITY:
        image, label = rescale(image, label, float(rng.uniform(*SCALE_RANGE)))
    for axis in range(3):
        if rng.random() < 0.5:
            image, label = np.flip(image, axis), np.flip(label, axis)
    if image.shape[1] == image.shape[2]:
        turns = int(rng.integers(4))
        image, label = np.rot90(image, turns, axes=(1, 2)), np.rot90(label, turns, axes=(1, 2))
    image = image * rng.uniform(0.9, 1.1) + rng.uniform(-0.1, 0.1)
    return np.ascontiguousarray(image, dtype=np.float32), np.ascontiguousarray(label)
