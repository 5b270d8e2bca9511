"""``dicom-series`` finds its series in a folder tree (PATIENT/STUDY/SERIES, as PACS exports lay them out)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from digits_core import DatasetError
from digits_core.datasets import create_dataset


@pytest.fixture
def pacs_export(synth, tmp_path):
    """The synthetic series as PATIENT/STUDY/SERIES (every series folder named SE1), a DICOMDIR and a README at
    the top; labels mirrored as PATIENT/STUDY/SE1.nii.gz."""
    export, labels = tmp_path / "export", tmp_path / "labels"
    for name in synth.cases:
        shutil.copytree(synth.dicom / name, export / name / "ST1" / "SE1")
        (labels / name / "ST1").mkdir(parents=True)
        shutil.copy(synth.task / "labelsTr" / f"{name}.nii.gz", labels / name / "ST1" / "SE1.nii.gz")
    (export / "DICOMDIR").write_bytes(b"\0" * 128 + b"DICM index, not a slice")
    (export / "README.txt").write_text("exported by a PACS")
    return export, labels


def test_series_in_a_patient_study_series_tree_build_the_records_of_the_flat_folders(
    synth, pacs_export, tmp_path, case_records
):
    export, labels = pacs_export
    tree = case_records(
        create_dataset(
            "dicom-series",
            {"series_folder": str(export), "label_folder": str(labels)},
            jobs_dir=tmp_path / "jobs",
            workers=1,
        )
    )
    flat = case_records(
        create_dataset("msd-volumes", {"data_folder": str(synth.task)}, jobs_dir=tmp_path / "jobs", workers=1)
    )
    assert sorted(tree) == [f"{name}_ST1_SE1" for name in sorted(synth.cases)]  # unique names from the path
    for name in synth.cases:
        (_, vol_t, lab_t), (_, vol_f, lab_f) = tree[f"{name}_ST1_SE1"], flat[name]
        assert np.array_equal(vol_t.array, vol_f.array) and np.array_equal(lab_t, lab_f) and lab_t.any()
        assert np.array_equal(vol_t.affine, vol_f.affine) and vol_t.spacing == vol_f.spacing


def test_tree_labels_may_also_sit_flat_under_the_case_name_and_a_missing_one_names_both_places(pacs_export, tmp_path):
    from digits_core import registry

    export, labels = pacs_export
    flat = tmp_path / "flat-labels"
    flat.mkdir()
    for label in sorted(labels.rglob("SE1.nii.gz")):
        shutil.copy(label, flat / f"{label.parent.parent.name}_ST1_SE1.nii.gz")
    plugin = registry.get_data_ingestion("dicom-series")
    cases, _ = plugin(series_folder=str(export), label_folder=str(flat)).list_cases()
    assert [c.label for c in cases] == [str(p) for p in sorted(flat.iterdir())]
    assert [c.image for c in cases] == [str(p) for p in sorted(export.glob("*/ST1/SE1"))]
    (flat / "heart_002_ST1_SE1.nii.gz").unlink()
    with pytest.raises(
        DatasetError,
        match=r"heart_002/ST1/SE1: no label heart_002/ST1/SE1\.nii\.gz or "
        r"heart_002_ST1_SE1\.nii\.gz",
    ):
        plugin(series_folder=str(export), label_folder=str(flat)).list_cases()


def test_one_level_of_series_folders_keeps_its_names(synth):
    from digits_core import registry

    cases, _ = registry.get_data_ingestion("dicom-series")(
        series_folder=str(synth.dicom), label_folder=str(synth.task / "labelsTr")
    ).list_cases()
    assert [c.name for c in cases] == sorted(synth.cases)


def test_a_symlinked_series_folder_is_followed_inside_the_roots_and_left_out_outside(synth, pacs_export, tmp_path):
    from digits_core import registry
    from digits_core.paths import confined_to

    export, labels = pacs_export
    outside = tmp_path / "outside"
    shutil.copytree(synth.dicom / "heart_000", outside / "SE9")
    (export / "heart_000" / "ST1" / "SE9").symlink_to(outside / "SE9", target_is_directory=True)
    (export / "heart_000" / "ST1" / "loop").symlink_to(export, target_is_directory=True)  # walked once, no loop
    shutil.copy(labels / "heart_000" / "ST1" / "SE1.nii.gz", labels / "heart_000" / "ST1" / "SE9.nii.gz")
    plugin = registry.get_data_ingestion("dicom-series")(series_folder=str(export), label_folder=str(labels))
    names = [c.name for c in plugin.list_cases()[0]]
    assert "heart_000_ST1_SE9" in names and len(names) == len(synth.cases) + 1  # the CLI: not confined
    with confined_to([export, labels]):
        names = [c.name for c in plugin.list_cases()[0]]
    assert "heart_000_ST1_SE9" not in names and len(names) == len(synth.cases)
