"""Reading volumes with their geometry: NIfTI files (nibabel) and DICOM series (pydicom).

Every source ends as the same thing, a :class:`digits_core.Volume` in the
closest canonical (RAS+) orientation: the array is ``D×H×W×C`` with D along
the volume's third voxel axis (NIfTI ``k``), H along ``j`` and W along ``i``;
the affine maps ``(i, j, k, 1)`` to RAS millimetres. A NIfTI file and a DICOM
series of the same voxels in the same place therefore give identical volumes.

DICOM slices are ordered by ``ImagePositionPatient`` projected on the slice
normal (the cross product of the ``ImageOrientationPatient`` cosines), never
by file name or ``InstanceNumber``; the slice spacing comes from those
positions. A gap (missing slice), irregular spacing, mixed orientations or
mixed series are :class:`VolumeFormatError` naming the folder. DICOM's LPS
patient coordinates become RAS by negating x and y.

Importing this module imports neither nibabel nor pydicom.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from digits_core import DatasetError, Volume
from digits_core.limits import dicom_pixels_problem, dicom_values, series_voxels_problem, volume_voxels_problem
from digits_core.paths import check_server_path, server_path_allowed

from .dicom_read import DicomTooLargeError, read_dicom

#: Affines are rounded to this many decimals (mm), so float noise of a source never tells two volumes apart.
AFFINE_DECIMALS = 5
#: Relative tolerance on slice spacing before a series counts as irregular.
SPACING_TOLERANCE = 0.01
_LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


class VolumeFormatError(DatasetError):
    """A volume file or series that cannot be read as a volume (the message names it)."""


NIFTI_SUFFIXES = (".nii", ".nii.gz")


def is_nifti(path: str | Path) -> bool:
    """True for a ``.nii`` / ``.nii.gz`` file name."""
    return str(path).lower().endswith(NIFTI_SUFFIXES)


def nifti_stem(path: str | Path) -> str:
    """The file name without ``.nii`` / ``.nii.gz``."""
    name = Path(path).name
    for suffix in (".nii.gz", ".nii"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def _canonical(data: np.ndarray, affine: np.ndarray, name: str) -> Volume:
    """``data`` in ``i, j, k[, c]`` order with ``affine`` → a canonical ``D×H×W×C`` :class:`Volume`."""
    import nibabel as nib

    ornt = nib.orientations.io_orientation(affine)
    data = nib.orientations.apply_orientation(data, ornt)
    affine = affine @ nib.orientations.inv_ornt_aff(ornt, data.shape[:3])
    array = np.swapaxes(data, 0, 2)  # i,j,k[,c] -> k,j,i[,c]
    array = np.ascontiguousarray(array[..., None] if array.ndim == 3 else array)
    spacing = tuple(round(float(s), AFFINE_DECIMALS) for s in np.sqrt((affine[:3, :3] ** 2).sum(axis=0))[::-1])
    return Volume(array, spacing, np.round(affine, AFFINE_DECIMALS) + 0.0, name)


def source_orientation(affine: np.ndarray) -> np.ndarray:
    """The nibabel orientation that took a source with ``affine`` to canonical (for :func:`to_source_array`)."""
    import nibabel as nib

    return nib.orientations.io_orientation(affine)


def to_source_array(canonical: np.ndarray, source_affine: np.ndarray) -> np.ndarray:
    """A canonical ``D×H×W`` array (as :func:`read_nifti` returns) back in the source's ``i, j, k`` voxel order."""
    import nibabel as nib

    ijk = np.swapaxes(canonical, 0, 2)
    back = nib.orientations.ornt_transform(
        nib.orientations.axcodes2ornt(("R", "A", "S")), source_orientation(source_affine)
    )
    return np.ascontiguousarray(nib.orientations.apply_orientation(ijk, back))


def load_nifti(path: str | Path, field: str = "path") -> Any:
    """Open a NIfTI image (header only; voxels are read on demand) through the path gate.

    Raises:
        VolumeFormatError: It is missing or not a NIfTI file.
    """
    import nibabel as nib

    path = check_server_path(path, field)
    try:
        return nib.load(str(path))
    except FileNotFoundError:
        raise VolumeFormatError(f"{path}: no such file") from None
    except Exception as exc:  # noqa: BLE001 - nibabel raises ImageFileError, OSError, EOFError, gzip errors
        raise VolumeFormatError(f"{path}: not a readable NIfTI file ({type(exc).__name__})") from None


def nifti_spacing(path: str | Path) -> tuple:
    """The canonical ``(D, H, W)`` voxel spacing of a NIfTI file, from its header only."""
    img = load_nifti(path)
    ornt = source_orientation(img.affine)
    zooms = np.sqrt((img.affine[:3, :3] ** 2).sum(axis=0))
    ordered = [0.0, 0.0, 0.0]
    for axis, (target, _) in enumerate(ornt):
        ordered[int(target)] = float(zooms[axis])
    return tuple(round(s, AFFINE_DECIMALS) for s in ordered[::-1])


def read_nifti(path: str | Path, *, field: str = "path", name: str = "") -> Volume:
    """Read a 3-D or 4-D (modalities last) NIfTI file as a canonical volume.

    Raises:
        VolumeFormatError: Unreadable, or not 3-D / 4-D.
    """
    img = load_nifti(path, field)
    if len(img.shape) not in (3, 4):
        raise VolumeFormatError(f"{path}: a volume must be 3-D or 4-D (modalities last), not shape {img.shape}")
    too_big = volume_voxels_problem(img.shape)  # from the header: a small .nii.gz may declare gigabytes
    if too_big:
        raise VolumeFormatError(f"{path}: {too_big}")
    try:
        data = np.asanyarray(img.dataobj)
    except Exception as exc:  # noqa: BLE001 - truncated or corrupt voxel data
        raise VolumeFormatError(f"{path}: its voxels cannot be read ({type(exc).__name__})") from None
    if data.dtype.kind == "f":
        data = data.astype(np.float32)
    return _canonical(data, np.asarray(img.affine, dtype=np.float64), name or nifti_stem(path))


def read_label_nifti(path: str | Path, image: Volume, image_path: str | Path, *, field: str = "label") -> np.ndarray:
    """Read a label NIfTI that must cover the image's voxels (same canonical shape and affine).

    Args:
        path: The label file.
        image: The canonical image volume it labels.
        image_path: The image's file or series folder, named in errors.

    Returns:
        The ``D×H×W`` class ids (uint8, or int32 past 255 classes).

    Raises:
        VolumeFormatError: Different shape or affine than the image, or non-integer or negative classes.
    """
    label = read_nifti(path, field=field)
    if label.array.shape[3] != 1:
        raise VolumeFormatError(f"{path}: a label volume has one channel, not {label.array.shape[3]}")
    data = label.array[..., 0]
    if data.shape != image.array.shape[:3]:
        raise VolumeFormatError(
            f"{path}: label shape {data.shape[::-1]} differs from the shape "
            f"{image.array.shape[:3][::-1]} of its image {image_path}"
        )
    if not np.allclose(label.affine, image.affine, atol=1e-3):
        raise VolumeFormatError(
            f"{path}: label affine differs from the affine of its image {image_path} "
            "(they do not cover the same voxels)"
        )
    if data.dtype.kind == "f" and not np.array_equal(data, np.round(data)):
        raise VolumeFormatError(f"{path}: label voxels must be whole class ids")
    if data.size and data.min() < 0:
        raise VolumeFormatError(f"{path}: label has a negative class id ({data.min()})")
    return data.astype(np.uint8 if data.max(initial=0) < 256 else np.int32)


# -- DICOM series ------------------------------------------------------------------


class SliceInfo(NamedTuple):
    """One DICOM slice's geometry (picklable)."""

    path: str
    series_uid: str
    orientation: tuple
    position: tuple
    pixel_spacing: tuple
    shape: tuple
    modality: str
    values: int = 0  # pixel values its header declares (rows x columns x samples x frames)
    nbytes: int = 0  # bytes they decode to


def _floats(ds: Any, keyword: str, count: int, path: Path) -> tuple:
    value = ds.get(keyword)
    try:
        numbers = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) != count:
        raise VolumeFormatError(f"{path}: {keyword} is missing or malformed; a volume slice needs it")
    return numbers


def read_slice_info(path: str | Path) -> SliceInfo:
    """Read one slice's geometry (no pixels).

    Raises:
        VolumeFormatError: Not DICOM, or a geometry tag is missing.
    """
    path = Path(path)
    try:
        ds = read_dicom(str(path), header_only=True)
    except DicomTooLargeError as exc:
        raise VolumeFormatError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - InvalidDicomError, OSError, truncated data
        raise VolumeFormatError(f"{path}: not a readable DICOM file ({type(exc).__name__})") from None
    for keyword in ("Rows", "Columns", "SeriesInstanceUID"):
        if keyword not in ds:
            raise VolumeFormatError(f"{path}: {keyword} is missing; a volume slice needs it")
    too_big = dicom_pixels_problem(ds)
    if too_big:
        raise VolumeFormatError(f"{path}: {too_big}")
    values = dicom_values(ds)
    bits = ds.get("BitsAllocated") or 8
    return SliceInfo(
        str(path),
        str(ds.SeriesInstanceUID),
        _floats(ds, "ImageOrientationPatient", 6, path),
        _floats(ds, "ImagePositionPatient", 3, path),
        _floats(ds, "PixelSpacing", 2, path),
        (int(ds.Rows), int(ds.Columns)),
        str(ds.get("Modality", "")),
        values,
        values * max(int(bits), 8) // 8,
    )


def dicom_files(folder: Path) -> list[Path]:
    """The files of a series folder that are not hidden (DICOM files often have no suffix).

    A symlink leading outside the data roots (on the web server) is left out before anything looks at its target.
    """
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and server_path_allowed(p) and p.is_file())


def order_series(slices: Sequence[SliceInfo], folder: str | Path) -> tuple[list[SliceInfo], float]:
    """Order a series' slices along the slice normal; return them and the slice spacing.

    Raises:
        VolumeFormatError: Mixed series or orientations, different slice sizes, two
            slices at one position, a missing slice or irregular spacing.
    """
    if not slices:
        raise VolumeFormatError(f"{folder}: no DICOM slices")
    if len({s.series_uid for s in slices}) > 1:
        raise VolumeFormatError(
            f"{folder}: holds slices of {len({s.series_uid for s in slices})} series; put one series per folder"
        )
    first = slices[0]
    for s in slices:
        if not np.allclose(s.orientation, first.orientation, atol=1e-4):
            raise VolumeFormatError(
                f"{folder}: mixed orientations ({Path(s.path).name} differs from "
                f"{Path(first.path).name} in ImageOrientationPatient)"
            )
        if s.shape != first.shape or not np.allclose(s.pixel_spacing, first.pixel_spacing, atol=1e-4):
            raise VolumeFormatError(
                f"{folder}: {Path(s.path).name} has another size or pixel spacing than {Path(first.path).name}"
            )
    normal = np.cross(first.orientation[:3], first.orientation[3:])
    ordered = sorted(slices, key=lambda s: float(np.dot(s.position, normal)))
    if len(ordered) < 2:
        raise VolumeFormatError(f"{folder}: a volume needs at least 2 slices, found 1")
    steps = np.diff([float(np.dot(s.position, normal)) for s in ordered])
    if steps.min() <= 1e-4:
        raise VolumeFormatError(f"{folder}: two slices at the same position; is a series duplicated?")
    spacing = float(np.median(steps))
    for index, step in enumerate(steps):
        if abs(step - spacing) > SPACING_TOLERANCE * spacing:
            gap = round(step / spacing)
            what = (
                f"{gap - 1} missing slice(s)"
                if gap >= 2 and abs(step - gap * spacing) < 0.05 * spacing
                else "irregular slice spacing"
            )
            raise VolumeFormatError(
                f"{folder}: {what} between {Path(ordered[index].path).name} and "
                f"{Path(ordered[index + 1].path).name} ({step:.3f} mm, the series' spacing is {spacing:.3f} mm)"
            )
    return ordered, spacing


def series_affine(ordered: Sequence[SliceInfo], spacing: float) -> np.ndarray:
    """The RAS affine of an ordered series, for voxel ``(i = column, j = row, k = slice)``."""
    row_cos = np.asarray(ordered[0].orientation[:3])
    col_cos = np.asarray(ordered[0].orientation[3:])
    normal = np.cross(row_cos, col_cos)
    lps = np.eye(4)
    lps[:3, 0] = row_cos * ordered[0].pixel_spacing[1]
    lps[:3, 1] = col_cos * ordered[0].pixel_spacing[0]
    lps[:3, 2] = normal * spacing
    lps[:3, 3] = ordered[0].position
    return _LPS_TO_RAS @ lps


def series_spacing(folder: str | Path, files: Sequence[str | Path] | None = None) -> tuple:
    """The canonical ``(D, H, W)`` spacing of a series (its folder, or ``files``), from its headers only."""
    paths = dicom_files(Path(folder)) if files is None else list(files)
    ordered, spacing = order_series([read_slice_info(p) for p in paths], folder)
    affine = series_affine(ordered, spacing)
    ornt = source_orientation(affine)
    zooms = np.sqrt((affine[:3, :3] ** 2).sum(axis=0))
    canonical = [0.0, 0.0, 0.0]
    for axis, (target, _) in enumerate(ornt):
        canonical[int(target)] = float(zooms[axis])
    return tuple(round(s, AFFINE_DECIMALS) for s in canonical[::-1])


def _slice_pixels(path: str, nbytes: int = 0) -> np.ndarray:
    try:
        ds = read_dicom(path, header_only=False, pixel_bytes=nbytes)
        too_big = dicom_pixels_problem(ds)
        pixels = None if too_big else ds.pixel_array  # refused before pydicom allocates from the header
    except Exception as exc:  # noqa: BLE001 - truncated data, missing codec, no pixels
        raise VolumeFormatError(f"{path}: its pixels cannot be read ({type(exc).__name__}: {exc})") from None
    if too_big or pixels is None:
        raise VolumeFormatError(f"{path}: {too_big}")
    if pixels.ndim != 2:
        raise VolumeFormatError(f"{path}: a series slice must be one grayscale frame, got shape {pixels.shape}")
    pixels = pixels.astype(pixels.dtype.newbyteorder("="))
    slope, intercept = float(ds.get("RescaleSlope", 1) or 1), float(ds.get("RescaleIntercept", 0) or 0)
    if slope != 1 or intercept != 0:
        pixels = pixels.astype(np.float32) * slope + intercept
    if str(ds.get("PhotometricInterpretation", "")) == "MONOCHROME1":
        pixels = pixels.max() + pixels.min() - pixels
    return pixels


def read_series(folder: str | Path, *, field: str = "folder", name: str = "") -> tuple[Volume, list[SliceInfo]]:
    """Read one DICOM series folder as a canonical volume; also return its slices in normal order.

    Raises:
        VolumeFormatError: See :func:`order_series`; or a slice cannot be read.
    """
    folder = check_server_path(folder, field)
    return read_series_files(dicom_files(Path(folder)), folder, name=name or Path(folder).name)


def read_series_files(
    files: Sequence[str | Path], where: str | Path, *, name: str = ""
) -> tuple[Volume, list[SliceInfo]]:
    """Read the DICOM files of one series (any order; a folder's, or fetched instances) as a canonical volume.

    Args:
        files: The slices' files.
        where: The series named in errors (its folder, or its UID on a server).
        name: The volume's name.

    Raises:
        VolumeFormatError: See :func:`order_series`; or a slice cannot be read.
    """
    slices = [read_slice_info(p) for p in files]
    too_big = series_voxels_problem([s.values for s in slices])  # the series as a whole, from the headers alone
    if too_big:
        raise VolumeFormatError(f"{where}: {too_big}")
    ordered, spacing = order_series(slices, where)
    stack = [_slice_pixels(s.path, s.nbytes) for s in ordered]
    dtype = np.result_type(*stack)
    data = np.stack([p.astype(dtype) for p in stack], axis=-1)  # rows (j), columns (i), slices (k)
    data = np.ascontiguousarray(np.swapaxes(data, 0, 1))  # -> i, j, k
    if data.dtype.name not in ("uint8", "uint16", "int16", "float32"):
        data = data.astype(np.float32)
    return _canonical(data, series_affine(ordered, spacing), name or Path(where).name), ordered


def read_label_seg(path: str | Path, folder: str | Path, *, field: str = "label") -> np.ndarray:
    """Read a DICOM-SEG drawn on the series in ``folder`` as its canonical ``D×H×W`` label volume.

    Each source slice's label map comes from the SEG frames that reference its SOP Instance UID
    (:class:`digits_data_dicomweb.seg.SegmentationLabels`); the stack gets the series' geometry.

    Raises:
        VolumeFormatError: Unreadable, not a SEG, or a slice of the series has no frame in it.
    """
    path = check_server_path(path, field)
    folder = Path(folder)
    return seg_label_volume(path, dicom_files(folder), folder)


def seg_label_volume(path: str | Path, files: Sequence[str | Path], where: str | Path) -> np.ndarray:
    """The canonical ``D×H×W`` label volume a DICOM-SEG file draws on the series of ``files``.

    Raises:
        VolumeFormatError: Unreadable, not a SEG, or a slice of the series has no frame in it.
    """
    from digits_data_dicomweb.seg import SegmentationError, SegmentationLabels

    ordered, spacing = order_series([read_slice_info(p) for p in files], where)
    try:
        header = read_dicom(str(path), header_only=True)
        seg = SegmentationLabels(
            read_dicom(str(path), header_only=False, pixel_bytes=dicom_values(header)), name=str(path)
        )  # SEG frames are 1 bit or 8 bits a value: its values bound its bytes
        maps = [seg.label_map(str(read_dicom(s.path, header_only=True).SOPInstanceUID)) for s in ordered]
    except DicomTooLargeError as exc:
        raise VolumeFormatError(f"{path}: {exc}") from None
    except SegmentationError as exc:
        raise VolumeFormatError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - not DICOM, truncated
        raise VolumeFormatError(f"{path}: not a readable DICOM-SEG ({type(exc).__name__})") from None
    data = np.ascontiguousarray(np.transpose(np.stack(maps), (2, 1, 0)))  # slice, row, column -> i, j, k
    return _canonical(data, series_affine(ordered, spacing), Path(where).name).array[..., 0]
