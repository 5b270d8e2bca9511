"""A folder pool's volume candidates: ``D×H×W`` ``.npy`` files, read at the model's voxel spacing.

Scoring (:mod:`~digits_core.labeling.volume_scoring`) and a round's retraining
(:mod:`~digits_core.labeling.volume_rounds`) read them alike: the ``.npy``'s voxels are the volume at the model's
target spacing, so nothing is resampled and a proposal or a label lies on the same voxels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .pool import PoolError


def folder_volume(source: dict[str, Any], cand: dict[str, Any]) -> Any:
    """A folder pool candidate's volume: its ``.npy`` file as a ``D×H×W`` array.

    Raises:
        PoolError: The path leaves the pool's root, or the file is not a readable 3-D ``.npy`` array (named).
    """
    import numpy as np

    root = Path(source["root"]).resolve()
    path = (root / str(cand["source"].get("path") or "")).resolve()
    if not path.is_relative_to(root) or path.suffix.lower() != ".npy":
        raise PoolError(
            f"Candidate {cand['id']}: {cand['source'].get('path')} is not a .npy volume in the pool folder."
        )
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PoolError(f"{path}: not a readable .npy volume ({exc})") from None
    if array.ndim != 3 or min(array.shape) < 1:
        raise PoolError(f"{path}: a volume candidate is a D×H×W array, not shape {array.shape}.")
    return array


def model_spacing(info: dict[str, Any]) -> tuple[float, float, float]:
    """The ``(D, H, W)`` spacing a folder pool's ``.npy`` voxels are read at: the model's target spacing (or 1 mm)."""
    spacing = info.get("target_spacing_mm") or (1.0, 1.0, 1.0)
    return (float(spacing[0]), float(spacing[1]), float(spacing[2]))


def write_nifti(array: Any, path: Path, spacing: tuple[float, float, float]) -> None:
    """Write a ``D×H×W`` array as a NIfTI file the volume plugins read back as the same ``D×H×W`` voxels."""
    import nibabel  # the volume plugins' reader: installed with them
    import numpy as np

    affine = np.diag([spacing[2], spacing[1], spacing[0], 1.0])
    nibabel.save(nibabel.Nifti1Image(np.ascontiguousarray(np.transpose(array, (2, 1, 0))), affine), str(path))


__all__ = ["folder_volume", "model_spacing", "write_nifti"]
