"""A volume plugin's feature: :class:`Volume` (a 3-D image and its geometry), and the check of its pair.

A data plugin whose class says ``data_layout = "DHWC"`` returns, from
``encode_entry``, a pair ``(Volume, label)``: a :class:`Volume` (the array,
its voxel spacing in mm along D, H and W, and the 4×4 affine that maps voxel
indexes to patient coordinates) and a ``D×H×W`` integer array of class ids.
:func:`check_volume_pair` is the contract's check, shared by the dataset build
(:mod:`digits_core.datasets.volumes`, which stores the pair as slabs) and
``digits plugin check``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .images import RecordError
from .labels import MASK_DTYPES
from .records import FEATURE_DTYPES


class Volume(NamedTuple):
    """A 3-D image and its geometry.

    Attributes:
        array: ``D×H×W×C`` (or ``D×H×W``) numpy array of a feature dtype.
        spacing: Voxel size in mm along D, H, W.
        affine: 4×4 matrix mapping voxel indexes ``(w, h, d, 1)`` (NIfTI's
            ``i, j, k`` order) to RAS patient coordinates in mm.
        name: The case's name (e.g. ``"heart_003"``).
    """

    array: np.ndarray
    spacing: tuple
    affine: np.ndarray
    name: str = ""


def check_volume_pair(volume: Any, label: Any) -> tuple[Volume, np.ndarray]:
    """Check a plugin's ``(Volume, label)`` pair; return it with the feature as ``D×H×W×C`` little-endian.

    Raises:
        RecordError: The pair breaks the volume contract (the message says how).
    """
    if not isinstance(volume, Volume):
        raise RecordError(f"a volume plugin's feature must be a digits_core Volume, not {type(volume).__name__}")
    arr = np.asarray(volume.array)
    if arr.ndim == 3:
        arr = arr[..., None]
    if arr.ndim != 4 or min(arr.shape) < 1:
        raise RecordError(f"volume feature must be D×H×W×C (or D×H×W), got shape {np.shape(volume.array)}")
    if arr.dtype.name not in FEATURE_DTYPES:
        raise RecordError(f"volume dtype {arr.dtype} is not one of {', '.join(FEATURE_DTYPES)}")
    spacing = tuple(float(s) for s in volume.spacing)
    if len(spacing) != 3 or not all(np.isfinite(spacing)) or min(spacing) <= 0:
        raise RecordError(f"volume spacing must be three positive numbers (mm along D, H, W), not {volume.spacing}")
    affine = np.asarray(volume.affine, dtype=np.float64)
    if affine.shape != (4, 4) or not np.isfinite(affine).all():
        raise RecordError(f"volume affine must be a finite 4×4 matrix, got shape {affine.shape}")
    lab = np.asarray(label)
    if lab.dtype.name not in MASK_DTYPES:
        raise RecordError(f"a label volume must be an integer array ({', '.join(MASK_DTYPES)}), not {lab.dtype}")
    if lab.shape != arr.shape[:3]:
        raise RecordError(f"label volume shape {lab.shape} differs from the volume's D×H×W {arr.shape[:3]}")
    if lab.dtype.kind == "i" and lab.size and lab.min() < 0:
        raise RecordError(f"label volume has a negative class id ({lab.min()})")
    arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    lab = np.ascontiguousarray(lab, dtype=lab.dtype.newbyteorder("<"))
    return Volume(arr, spacing, affine, str(volume.name)), lab
