"""Bad volumes are named errors: a missing slice, mixed orientations, a label on another voxel grid."""

from __future__ import annotations

import json

import numpy as np
import pydicom
import pytest

from digits_core import DatasetError
from digits_core.datasets import create_dataset
from digits_data_volumes.geometry import VolumeFormatError, dicom_files, read_series
from digits_data_volumes.synth import write_nifti


def _by_position(folder):
    files = dicom_files(folder)
    return sorted(files, key=lambda p: float(pydicom.dcmread(str(p), stop_before_pixels=True).ImagePositionPatient[2]))


def test_series_with_a_missing_slice_names_the_gap(synth_copy):
    folder = synth_copy / "dicom" / "heart_000"
    ordered = _by_position(folder)
    ordered[5].unlink()
    with pytest.raises(VolumeFormatError, match=r"heart_000: 1 missing slice\(s\) between") as info:
        read_series(folder)
    assert ordered[4].name in str(info.value) and ordered[6].name in str(info.value)


def test_series_with_mixed_orientations_is_refused(synth_copy):
    folder = synth_copy / "dicom" / "heart_000"
    path = dicom_files(folder)[3]
    ds = pydicom.dcmread(str(path))
    ds.ImageOrientationPatient = [0, 1, 0, 0, 0, -1]
    ds.save_as(str(path))
    with pytest.raises(VolumeFormatError, match="heart_000: mixed orientations") as info:
        read_series(folder)
    assert path.name in str(info.value)


def test_series_file_names_and_instance_numbers_do_not_order_slices(synth):
    folder = synth.dicom / "heart_000"
    numbers = [int(pydicom.dcmread(str(p), stop_before_pixels=True).InstanceNumber) for p in _by_position(folder)]
    assert numbers != sorted(numbers)  # the generator shuffled them
    volume, ordered = read_series(folder)
    from digits_data_volumes.geometry import read_nifti

    assert np.array_equal(volume.array, read_nifti(synth.task / "imagesTr" / "heart_000.nii.gz").array)
    assert len(ordered) == 12


def _shifted_label(task, name, shift=None, shape=None):
    import nibabel as nib

    image = nib.load(str(task / "imagesTr" / f"{name}.nii.gz"))
    affine = image.affine.copy()
    data = np.asanyarray(nib.load(str(task / "labelsTr" / f"{name}.nii.gz")).dataobj)
    if shift is not None:
        affine[:3, 3] += shift
    if shape is not None:
        data = data[: shape[0]]
    write_nifti(task / "labelsTr" / f"{name}.nii.gz", np.ascontiguousarray(data), affine)


@pytest.mark.parametrize(
    "damage, message",
    [
        ({"shift": [5.0, 0, 0]}, "label affine differs from the affine of its image"),
        ({"shape": (10,)}, "label shape .* differs from the shape"),
    ],
)
def test_label_on_another_grid_fails_its_case_naming_both_files(synth_copy, tmp_path, damage, message):
    task = synth_copy / "Task99_SynthHeart"
    _shifted_label(task, "heart_002", **damage)
    with pytest.raises(DatasetError, match="more than max-errors"):
        create_dataset("msd-volumes", {"data_folder": str(task)}, jobs_dir=tmp_path, workers=1, max_errors=0)
    job = create_dataset("msd-volumes", {"data_folder": str(task)}, jobs_dir=tmp_path, workers=1, max_errors=1)
    errors = [json.loads(line) for line in (job.path / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 1 and "heart_002" in errors[0]["entry"]
    assert "labelsTr/heart_002.nii.gz" in errors[0]["error"] and "imagesTr/heart_002.nii.gz" in errors[0]["error"]
    import re

    assert re.search(message, errors[0]["error"])


def test_decathlon_manifest_naming_a_missing_file_is_an_error(synth_copy, tmp_path):
    task = synth_copy / "Task99_SynthHeart"
    (task / "imagesTr" / "heart_004.nii.gz").unlink()
    with pytest.raises(DatasetError, match="training item 4: .*heart_004.nii.gz is not a NIfTI file"):
        create_dataset("msd-volumes", {"data_folder": str(task)}, jobs_dir=tmp_path, workers=1)


def test_plugin_check_checks_volume_pairs(synth, capsys):
    from digits_core.cli import main

    assert main(["plugin", "check", "msd-volumes", "--form", f"data_folder={synth.task}", "--entries", "1"]) == 0
    assert "encode_entry(train:" in capsys.readouterr().out


def test_plugin_check_names_a_broken_volume_pair():
    from digits_core import Volume
    from digits_core.plugins.check import _volume_problem

    volume = Volume(np.zeros((4, 8, 8, 1), np.float32), (1.0, 1.0, 1.0), np.eye(4), "x")
    assert _volume_problem((volume, np.zeros((4, 8, 8), np.uint8))) is None
    assert "differs from the volume's D×H×W" in _volume_problem((volume, np.zeros((4, 8, 9), np.uint8)))
    assert "spacing must be three positive numbers" in _volume_problem(
        (volume._replace(spacing=(1, 0, 1)), np.zeros((4, 8, 8), np.uint8))
    )
