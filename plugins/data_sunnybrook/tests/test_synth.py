"""The synthetic Sunnybrook generator: exact layout, real DICOM, masks from the written contours."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pydicom
import pytest
from pydicom.uid import ExplicitVRLittleEndian, MRImageStorage

from digits_data_sunnybrook.contours import rasterize_polygon, read_contour
from digits_data_sunnybrook.layout import load_series_table, pad_case
from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR, TRAINING_CONTOURS, case_ids, generate

EXPECTED_SERIES = {"SC-HF-I-1": "0004", "SC-HF-I-2": "0106", "SC-HF-I-4": "0116"}


def expert_dir(root, case):
    return root / CONTOURS_DIR / TRAINING_CONTOURS / pad_case(case) / "contours-manual" / "IRCCI-expert"


def test_series_table_holds_the_15_training_cases():
    table = load_series_table()
    assert len(table) == 15
    assert table["SC-HF-I-1"] == "0004" and table["SC-N-40"] == "0944" and table["SC-HF-NI-34"] == "0446"


def test_exact_layout(synth_root):
    root = synth_root.root
    assert synth_root.cases == EXPECTED_SERIES
    assert sorted(p.name for p in (root / IMAGES_DIR).iterdir()) == sorted(EXPECTED_SERIES)  # unpadded
    for case, series in EXPECTED_SERIES.items():
        names = sorted(p.name for p in (root / IMAGES_DIR / case).iterdir())
        main = [n for n in names if n.startswith(f"IM-{series}-")]
        assert len(main) == 3 * 20 and main[0] == f"IM-{series}-0001.dcm" and main[-1] == f"IM-{series}-0060.dcm"
        others = {n[3:7] for n in names} - {series}
        assert len(others) == 2  # the decoy series share the folder
        contours = sorted(p.name for p in expert_dir(root, case).iterdir())
        numbers = synth_root.contoured[case]
        assert len(numbers) == 6  # 3 slices x 2 phases
        assert all(n % 20 == 1 for n in numbers[::2])  # end-diastole: phase 0 = slice*20 + 1
        es = numbers[1] - 1
        assert numbers == sorted([s * 20 + p + 1 for s in range(3) for p in (0, es)])
        assert contours == sorted([f"IM-0001-{n:04d}-{k}contour-manual.txt" for n in numbers for k in "io"])


def test_files_reread_with_expected_tags(synth_root):
    path = synth_root.image_folder / "SC-HF-I-2" / "IM-0106-0023.dcm"
    ds = pydicom.dcmread(path)  # strict read: preamble + file meta present
    assert ds.file_meta.TransferSyntaxUID == ExplicitVRLittleEndian
    assert ds.file_meta.MediaStorageSOPClassUID == MRImageStorage == ds.SOPClassUID
    assert ds.file_meta.MediaStorageSOPInstanceUID == ds.SOPInstanceUID
    assert ds.Modality == "MR" and ds.PatientID == "SC-HF-I-2" and ds.SeriesNumber == 106
    assert ds.InstanceNumber == 23 and ds.Rows == 64 and ds.Columns == 64
    assert (ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation) == (16, 12, 11, 0)
    assert ds.PhotometricInterpretation == "MONOCHROME2" and ds.SamplesPerPixel == 1
    assert len(ds.ImageOrientationPatient) == 6 and len(ds.ImagePositionPatient) == 3
    assert float(ds.TriggerTime) == 2 * 1000 / 20  # phase 2 of slice 1
    assert len(ds.PixelSpacing) == 2 and float(ds.MagneticFieldStrength) == 1.5
    pixels = ds.pixel_array
    assert pixels.dtype == np.uint16 and pixels.max() <= 4095 and pixels.max() > 500
    decoy = pydicom.dcmread(synth_root.image_folder / "SC-HF-I-2" / "IM-0107-0001.dcm")
    assert decoy.SeriesInstanceUID != ds.SeriesInstanceUID
    assert list(decoy.ImageOrientationPatient) != list(ds.ImageOrientationPatient)
    assert decoy.StudyInstanceUID == ds.StudyInstanceUID


def test_fast_writer_bytes_equal_pydicom_dcmwrite(synth_root):
    path = synth_root.image_folder / "SC-HF-I-1" / "IM-0004-0041.dcm"
    ds = pydicom.dcmread(path)
    out = io.BytesIO()
    pydicom.dcmwrite(out, ds, enforce_file_format=True)
    assert out.getvalue() == path.read_bytes()


def test_left_ventricle_is_exactly_the_icontour_polygon(synth_root):
    for case, series in EXPECTED_SERIES.items():
        for number in synth_root.contoured[case]:
            pixels = pydicom.dcmread(synth_root.image_folder / case / f"IM-{series}-{number:04d}.dcm").pixel_array
            mask = rasterize_polygon(
                read_contour(expert_dir(synth_root.root, case) / f"IM-0001-{number:04d}-icontour-manual.txt"),
                pixels.shape,
            ).astype(bool)
            ring = (
                rasterize_polygon(
                    read_contour(expert_dir(synth_root.root, case) / f"IM-0001-{number:04d}-ocontour-manual.txt"),
                    pixels.shape,
                ).astype(bool)
                & ~mask
            )
            assert 0.005 < mask.mean() < 0.08
            # the blood pool is bright, the myocardial ring around it dark
            assert pixels[mask].mean() > 2.5 * pixels[ring].mean()
            assert pixels[mask].min() > pixels[ring].max() - 4 * 30  # separated up to noise


def test_deterministic_and_seed_dependent(tmp_path):
    a = generate(tmp_path / "a", cases=1, size=32, seed=5, slices=1)
    b = generate(tmp_path / "b", cases=1, size=32, seed=5, slices=1)
    c = generate(tmp_path / "c", cases=1, size=32, seed=6, slices=1)
    name = "SC-HF-I-1/IM-0004-0001.dcm"
    assert (a.image_folder / name).read_bytes() == (b.image_folder / name).read_bytes()
    assert (a.image_folder / name).read_bytes() != (c.image_folder / name).read_bytes()


def test_extra_cases_get_ids_outside_the_table():
    pairs = case_ids(17)
    assert pairs[:15] == list(load_series_table().items())
    assert pairs[15:] == [("SC-N-50", "1100"), ("SC-N-51", "1110")]


@pytest.mark.slow  # a subprocess writing 549 DICOM files
def test_command_line_three_cases_64(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "digits_data_sunnybrook.synth",
            str(tmp_path / "out"),
            "--cases",
            "3",
            "--size",
            "64",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Wrote 549 DICOM files for 3 cases and 48 i-contours" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "digits_data_sunnybrook.synth", str(tmp_path / "o2"), "--size", "8"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--size must be at least 32" in bad.stderr
