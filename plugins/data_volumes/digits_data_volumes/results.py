"""Inference inputs and results of the volume plugins: a source in, its label volume back on the source's voxels.

:func:`load_source` reads a NIfTI file or a DICOM series folder (a 2-D
picture is a clear error: a volume network needs a volume) and keeps what
it takes to go back: the source's own affine and voxel order, and for DICOM
the slices in normal order. :func:`to_source` turns a label predicted on the
preprocessed (canonical, resampled) grid back into the source's voxel grid
(nearest neighbour); :func:`write_results` writes it as NIfTI with the
**source affine** (so it overlays the image in 3D Slicer or ITK-SNAP) and,
for a DICOM series, as one multi-frame DICOM-SEG referencing every source
slice (highdicom, through :func:`digits_data_dicomweb.seg.build_segmentations`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from digits_core.paths import check_server_path

from .geometry import VolumeFormatError, is_nifti, load_nifti, nifti_stem, read_nifti, read_series, to_source_array

#: File suffixes of 2-D pictures, refused with a message that says what a volume network needs.
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".dcm", ".npy")


def load_source(path: str | Path) -> tuple[Any, dict]:
    """Read an inference source as a canonical volume; return it and the context :func:`to_source` needs.

    Raises:
        VolumeFormatError: Not a NIfTI volume or a DICOM series folder, or only one slice thick.
    """
    source = check_server_path(path, "input")
    if source.is_dir():
        return series_source(*read_series(source, field="input"), str(source))
    elif is_nifti(source):
        volume = read_nifti(source, field="input")
        context = {"kind": "nifti", "path": str(source), "source_affine": np.asarray(load_nifti(source).affine)}
    elif source.suffix.lower() in PICTURE_SUFFIXES or not source.exists():
        raise VolumeFormatError(
            f"{source}: {'is a 2-D image' if source.exists() else 'does not exist'}; a volume "
            "network needs a 3-D volume: a NIfTI file (.nii, .nii.gz) or a DICOM series folder"
        )
    else:
        raise VolumeFormatError(f"{source}: not a NIfTI file (.nii, .nii.gz) or a DICOM series folder")
    return _checked(volume, context, source)


def series_source(volume: Any, ordered: list, where: str) -> tuple[Any, dict]:
    """A DICOM series read with :func:`~.geometry.read_series` (or ``read_series_files``) as an inference source.

    Args:
        volume: The canonical volume.
        ordered: Its slices in normal order.
        where: The series named in errors and results (its folder, or ``dicomweb:UID``).
    """
    context = {
        "kind": "dicom",
        "path": where,
        "slices": [s.path for s in ordered],
        "source_affine": _series_source_affine(ordered),
    }
    return _checked(volume, context, where)


def _checked(volume: Any, context: dict, source: Any) -> tuple[Any, dict]:
    if min(volume.array.shape[:3]) < 2:
        raise VolumeFormatError(
            f"{source}: is a 2-D image (shape {volume.array.shape[:3]}); a volume network "
            "needs a 3-D volume of several slices"
        )
    context.update(
        canonical_shape=list(volume.array.shape[:3]), canonical_spacing=list(volume.spacing), name=volume.name
    )
    return volume, context


def _series_source_affine(ordered) -> np.ndarray:
    from .geometry import order_series, series_affine

    _, spacing = order_series(ordered, "")
    return series_affine(ordered, spacing)


def to_source(label: np.ndarray, spacing, context: dict) -> np.ndarray:
    """A ``D×H×W`` label on the preprocessed grid (``spacing``) → the source's ``i, j, k`` voxels (nearest)."""
    from scipy import ndimage

    shape = tuple(context["canonical_shape"])
    if label.shape != shape:
        scale = np.asarray(context["canonical_spacing"], float) / np.asarray(spacing, float)
        label = ndimage.affine_transform(label, scale, output_shape=shape, order=0, mode="nearest")
    return to_source_array(label.astype(np.uint8), np.asarray(context["source_affine"]))


def write_results(label_ijk: np.ndarray, context: dict, out_dir: str | Path, class_labels: list[str]) -> list[str]:
    """Write the source-grid label as ``NAME_seg.nii.gz`` (source affine) and, for DICOM, ``NAME_seg.dcm``."""
    import nibabel as nib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = context.get("name") or nifti_stem(context["path"])
    affine = np.asarray(context["source_affine"], dtype=np.float64)
    image = nib.Nifti1Image(np.ascontiguousarray(label_ijk, dtype=np.uint8), affine)
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=1)
    nifti = out / f"{name}_seg.nii.gz"
    nib.save(image, str(nifti))
    written = [str(nifti)]
    if context["kind"] == "dicom":
        path = out / f"{name}_seg.dcm"
        volume_seg(label_ijk, context, class_labels).save_as(str(path))
        written.append(str(path))
    return written


def volume_seg(label_ijk: np.ndarray, context: dict, class_labels: list[str]) -> Any:
    """The multi-frame DICOM-SEG (one frame per source slice, every slice referenced) of a series' label.

    The SEG is built once per context and kept there, so the file written and the object stored are one.
    """
    if context.get("seg") is not None:
        return context["seg"]
    import pydicom

    from digits_data_dicomweb.seg import build_segmentations

    sources = [pydicom.dcmread(p, stop_before_pixels=True) for p in context["slices"]]
    masks = np.ascontiguousarray(np.transpose(label_ijk, (2, 1, 0)))  # i, j, k -> slice, row, column
    labels = list(class_labels) + [str(i) for i in range(len(class_labels), int(masks.max()) + 1)]
    (seg,) = build_segmentations(sources, masks, labels, series_description="DIGITS Core volume segmentation")
    context["seg"] = seg
    return seg
