"""A synthetic Medical Segmentation Decathlon task, and the same cases as DICOM series.

Each case is a cardiac-like MR volume: a bright ellipsoid "left atrium"
(class 1) and an unlabelled vessel as bright as it, inside
smoothly varying tissue, with Rician
noise, anisotropic spacing (slices thicker than pixels; every fourth case
coarser, so resampling has work), and every third case stored with a flipped
``i`` axis (a negative affine column: the voxels are mirrored in the file,
the anatomy is not). Written as::

    OUT/Task99_SynthHeart/dataset.json, imagesTr/heart_NNN.nii.gz, labelsTr/heart_NNN.nii.gz
    OUT/dicom/heart_NNN/<random name>.dcm    (one MR slice per file; shuffled names and InstanceNumbers)
    OUT/seg/heart_NNN.dcm                    (with --seg: the label as a DICOM-SEG drawn on the series)

Command line::

    python -m digits_data_volumes.synth OUT_DIR --cases 12 --shape 16,32,32 --seed 0 [--seg]
"""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

TASK = "Task99_SynthHeart"
LABELS = {"0": "background", "1": "left atrium"}
_LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


class SynthSet(NamedTuple):
    """What :func:`generate` wrote."""

    root: Path
    task: Path
    dicom: Path
    cases: list[str]


def case_volume(
    rng: np.random.Generator, shape: Sequence[int], spacing: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """One synthetic case in canonical ``D×H×W`` order: ``(int16 image, uint8 label)``.

    The blob's size is in mm, so cases of different spacing show the same anatomy. An unlabelled vessel
    (a cylinder through every slice, as bright as the atrium) is told apart by its 3-D shape only.
    """
    zz, yy, xx = np.meshgrid(*(np.arange(n) * s for n, s in zip(shape, spacing)), indexing="ij")
    extent = [n * s for n, s in zip(shape, spacing)]
    side = rng.integers(2)  # the atrium on one side, an unlabelled vessel as bright as it on the other
    centre = [
        extent[0] * rng.uniform(0.4, 0.6),
        extent[1] * rng.uniform(0.38, 0.62),
        extent[2] * (rng.uniform(0.28, 0.36) if side else rng.uniform(0.64, 0.72)),
    ]
    radii = [
        extent[0] * rng.uniform(0.18, 0.26),
        extent[1] * rng.uniform(0.14, 0.2),
        extent[2] * rng.uniform(0.14, 0.2),
    ]
    r = np.sqrt(
        ((zz - centre[0]) / radii[0]) ** 2 + ((yy - centre[1]) / radii[1]) ** 2 + ((xx - centre[2]) / radii[2]) ** 2
    )
    label = (r <= 1.0).astype(np.uint8)
    vessel_x = extent[2] * (rng.uniform(0.68, 0.76) if side else rng.uniform(0.24, 0.32))
    vessel = np.hypot(yy - extent[1] * rng.uniform(0.4, 0.6), xx - vessel_x) <= min(extent[1:]) * 0.11
    tissue = 200 + 60 * np.sin(yy / extent[1] * np.pi * rng.uniform(0.5, 1.5)) * np.cos(xx / extent[2] * np.pi)
    signal = np.where(vessel, 430.0, tissue)
    signal = np.where(label == 1, 430.0, signal)
    sigma = 70.0
    noisy = np.sqrt((signal + rng.normal(0, sigma, shape)) ** 2 + rng.normal(0, sigma, shape) ** 2)  # Rician
    return np.clip(np.rint(noisy), 0, 32000).astype(np.int16), label


def nifti_geometry(canonical: np.ndarray, spacing: Sequence[float], flip: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``i, j, k`` voxels and RAS affine of a canonical ``D×H×W`` array (``i`` mirrored when ``flip``)."""
    data = np.swapaxes(canonical, 0, 2)  # D,H,W -> i(W), j(H), k(D)
    zooms = (spacing[2], spacing[1], spacing[0])
    affine = np.diag([*zooms, 1.0])
    affine[:3, 3] = [-(n - 1) * z / 2 for n, z in zip(data.shape, zooms)]
    if flip:
        data = data[::-1]
        affine[:3, 3] += affine[:3, 0] * (data.shape[0] - 1)
        affine[:3, 0] *= -1
    return np.ascontiguousarray(data), affine


def write_nifti(path: Path, data: np.ndarray, affine: np.ndarray) -> None:
    """Write ``data`` (``i, j, k``) with ``affine`` as a NIfTI-1 file."""
    import nibabel as nib

    img = nib.Nifti1Image(data, affine)
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    nib.save(img, str(path))


def write_series(
    folder: Path, data: np.ndarray, affine: np.ndarray, rng: np.random.Generator, *, patient: str, modality: str = "MR"
) -> list[Path]:
    """Write ``i, j, k`` int16 voxels with RAS ``affine`` as one DICOM series (one file per ``k`` slice).

    File names are random and InstanceNumbers shuffled, so only ImagePositionPatient orders the slices.
    """
    import pydicom
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    folder.mkdir(parents=True, exist_ok=True)
    lps = _LPS_TO_RAS @ affine
    col_step, row_step, slice_step = lps[:3, 0], lps[:3, 1], lps[:3, 2]
    dx, dy = float(np.linalg.norm(col_step)), float(np.linalg.norm(row_step))
    orientation = [float(v) + 0.0 for v in np.concatenate([col_step / dx, row_step / dy])]
    study, series, frame = generate_uid(), generate_uid(), generate_uid()
    numbers = rng.permutation(data.shape[2]) + 1
    paths = []
    for k in range(data.shape[2]):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = pydicom.uid.MRImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = pydicom.Dataset()
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
        ds.PatientName, ds.PatientID, ds.PatientBirthDate, ds.PatientSex = patient, patient, "", "O"
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.StudyID, ds.SeriesNumber, ds.AccessionNumber, ds.ReferringPhysicianName = "1", 1, "", ""
        ds.StudyDate, ds.StudyTime, ds.Manufacturer = "20260101", "120000", "DIGITS synthetic"
        ds.Modality = modality
        ds.InstanceNumber = int(numbers[k])
        ds.ImageOrientationPatient = orientation
        ds.ImagePositionPatient = [round(float(v), 6) + 0.0 for v in lps[:3, 3] + k * slice_step]
        ds.PixelSpacing = [dy, dx]
        ds.SliceThickness = float(np.linalg.norm(slice_step))
        pixels = np.ascontiguousarray(data[:, :, k].T.astype("<i2"))  # rows = j, columns = i
        ds.Rows, ds.Columns = pixels.shape
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.PixelData = pixels.tobytes()
        path = folder / f"{secrets.token_hex(6)}.dcm"
        ds.save_as(str(path), enforce_file_format=True)
        paths.append(path)
    return paths


def _remove_earlier(task: Path, dicom: Path) -> None:
    """Remove the files an earlier run wrote here (its cases only), so a rerun never mixes two sets."""
    import shutil

    for pattern in ("imagesTr/heart_*.nii.gz", "labelsTr/heart_*.nii.gz"):
        for path in task.glob(pattern):
            path.unlink()
    for folder in dicom.glob("heart_*"):
        if folder.is_dir() and all(p.suffix == ".dcm" for p in folder.iterdir()):
            shutil.rmtree(folder)


def generate(
    out: str | Path,
    *,
    cases: int = 12,
    shape: Sequence[int] = (16, 32, 32),
    seed: int = 0,
    spacing: Sequence[float] = (2.5, 1.25, 1.25),
    dicom: bool = True,
) -> SynthSet:
    """Write a synthetic Decathlon task (and, with ``dicom``, the same cases as DICOM series) under ``out``."""
    root = Path(out)
    task = root / TASK
    _remove_earlier(task, root / "dicom")
    (task / "imagesTr").mkdir(parents=True, exist_ok=True)
    (task / "labelsTr").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names, training = [], []
    for number in range(cases):
        name = f"heart_{number:03d}"
        coarse = number % 4 == 3
        case_spacing = tuple(round(s * 1.2, 4) for s in spacing) if coarse else tuple(spacing)
        case_shape = tuple(max(2, int(round(n / 1.2))) for n in shape) if coarse else tuple(shape)
        image, label = case_volume(rng, case_shape, case_spacing)
        data, affine = nifti_geometry(image, case_spacing, flip=number % 3 == 1)
        labels, _ = nifti_geometry(label, case_spacing, flip=number % 3 == 1)
        write_nifti(task / "imagesTr" / f"{name}.nii.gz", data, affine)
        write_nifti(task / "labelsTr" / f"{name}.nii.gz", labels, affine)
        if dicom:
            write_series(root / "dicom" / name, data, affine, rng, patient=name)
        names.append(name)
        training.append({"image": f"./imagesTr/{name}.nii.gz", "label": f"./labelsTr/{name}.nii.gz"})
    manifest = {
        "name": "SynthHeart",
        "description": "Synthetic cardiac-like MR volumes (DIGITS generator)",
        "tensorImageSize": "3D",
        "modality": {"0": "MRI"},
        "labels": LABELS,
        "numTraining": len(training),
        "numTest": 0,
        "training": training,
        "test": [],
    }
    (task / "dataset.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return SynthSet(root, task, root / "dicom", names)


def write_seg_labels(synth: SynthSet, out: str | Path) -> list[Path]:
    """Write each case's NIfTI label as a DICOM-SEG drawn on its DICOM series: ``out/CASE.dcm``.

    The label goes through world space, as a viewer would place it (the series' voxel order is
    not the NIfTI file's for the mirrored cases); the SEG references every slice of the series.
    """
    import nibabel as nib
    import pydicom

    from digits_data_dicomweb.seg import build_segmentations

    from .geometry import order_series, read_series, series_affine

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in synth.cases:
        _, ordered = read_series(synth.dicom / name)
        image = nib.load(str(synth.task / "imagesTr" / f"{name}.nii.gz"))
        truth = nib.load(str(synth.task / "labelsTr" / f"{name}.nii.gz"))
        affine = series_affine(ordered, order_series(ordered, name)[1])
        ornt = nib.orientations.ornt_transform(
            nib.orientations.io_orientation(image.affine), nib.orientations.io_orientation(affine)
        )
        ijk = nib.orientations.apply_orientation(np.asanyarray(truth.dataobj), ornt)
        (seg,) = build_segmentations(
            [pydicom.dcmread(s.path) for s in ordered],
            np.transpose(ijk, (2, 1, 0)),
            ["background", LABELS["1"]],
            manual=True,
        )
        seg.save_as(str(folder / f"{name}.dcm"))
        written.append(folder / f"{name}.dcm")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="output folder")
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--shape", default="16,32,32", help="D,H,W voxels of a case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-dicom", action="store_true", help="write the NIfTI task only")
    parser.add_argument(
        "--seg", action="store_true", help="also write each label as a DICOM-SEG on its series (OUT/seg/CASE.dcm)"
    )
    args = parser.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.split(","))
    result = generate(args.out, cases=args.cases, shape=shape, seed=args.seed, dicom=not args.no_dicom)
    print(f"wrote {len(result.cases)} cases: {result.task}" + ("" if args.no_dicom else f" and {result.dicom}"))
    if args.seg and not args.no_dicom:
        write_seg_labels(result, result.root / "seg")
        print(f"wrote {len(result.cases)} DICOM-SEG labels: {result.root / 'seg'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
