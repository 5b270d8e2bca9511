"""``nifti-volumes`` from a CSV of image,label pairs: the same records as the folders, bad rows named by line."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from digits_core import DatasetError, FormValidationError
from digits_core.datasets import create_dataset
from digits_core.paths import OutsideDataRootsError, confined_to


@pytest.fixture
def scattered(synth, tmp_path):
    """The synthetic cases with labels renamed and moved apart from the images (no file-name matching possible)."""
    images, labels = tmp_path / "data" / "scans", tmp_path / "data" / "elsewhere" / "masks"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    rows = ["image,label"]
    for number, name in enumerate(synth.cases):
        shutil.copy(synth.task / "imagesTr" / f"{name}.nii.gz", images / f"{name}.nii.gz")
        shutil.copy(synth.task / "labelsTr" / f"{name}.nii.gz", labels / f"seg-{number}.nii.gz")
        label = labels / f"seg-{number}.nii.gz"  # absolute on even lines, relative to the CSV on odd ones
        rows.append(f"scans/{name}.nii.gz,{label if number % 2 == 0 else 'elsewhere/masks/' + label.name}")
    return tmp_path / "data", rows


def test_a_csv_of_pairs_builds_the_records_the_folders_build(synth, scattered, tmp_path, case_records):
    root, rows = scattered
    (root / "pairs.csv").write_text("\n".join(rows) + "\n")
    by_csv = create_dataset(
        "nifti-volumes", {"pairs_file": str(root / "pairs.csv")}, jobs_dir=tmp_path / "jobs", workers=1
    )
    by_folders = create_dataset(
        "nifti-volumes",
        {"image_folder": str(synth.task / "imagesTr"), "label_folder": str(synth.task / "labelsTr")},
        jobs_dir=tmp_path / "jobs",
        workers=1,
    )
    a, b = case_records(by_csv), case_records(by_folders)
    assert sorted(a) == sorted(b) == sorted(synth.cases)
    for name in synth.cases:
        (stage_a, vol_a, lab_a), (stage_b, vol_b, lab_b) = a[name], b[name]
        assert stage_a == stage_b  # the same split by case name
        assert np.array_equal(vol_a.array, vol_b.array) and np.array_equal(lab_a, lab_b)
        assert np.array_equal(vol_a.affine, vol_b.affine) and lab_a.any()


@pytest.mark.parametrize(
    "line, message",
    [
        ("scans/heart_001.nii.gz", r"pairs\.csv line 3: give two columns"),
        ("scans/heart_001.nii.gz,", r"pairs\.csv line 3: give two columns"),
        (
            "scans/heart_001.nii.gz,elsewhere/masks/missing.nii.gz",
            r"pairs\.csv line 3: the label .*missing\.nii\.gz "
            r"is not a NIfTI file",
        ),
        (
            "scans/heart_000.nii.gz,elsewhere/masks/seg-1.nii.gz",
            r"pairs\.csv line 3: the case heart_000 is already "
            r"on line 2",
        ),
    ],
)
def test_a_bad_row_is_an_error_naming_the_csv_line(scattered, tmp_path, line, message):
    root, rows = scattered
    (root / "pairs.csv").write_text("\n".join([rows[0], rows[1], line, *rows[3:]]) + "\n")
    with pytest.raises(DatasetError, match=message):
        create_dataset("nifti-volumes", {"pairs_file": str(root / "pairs.csv")}, jobs_dir=tmp_path / "jobs", workers=1)
    assert not list((tmp_path / "jobs").glob("*/dataset/dataset.json"))  # nothing published


@pytest.mark.parametrize("column", ["image", "label"])
def test_each_csv_column_outside_the_data_roots_is_refused_on_its_own_with_no_existence_oracle(
    scattered, tmp_path, column
):
    from digits_core import registry

    root, rows = scattered
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(root / "scans" / "heart_000.nii.gz", outside / "real.nii.gz")
    image_in, label_in = rows[3].split(",")  # a row whose files are inside the roots
    messages = []
    for name in ("real.nii.gz", "missing.nii.gz"):
        # only one column leaves the roots: the other one is a real pair's file inside them
        row = f"../outside/{name},{label_in}" if column == "image" else f"{image_in},../outside/{name}"
        (root / "pairs.csv").write_text("\n".join([*rows[:3], row]) + "\n")
        plugin = registry.get_data_ingestion("nifti-volumes")(pairs_file=str(root / "pairs.csv"))
        with confined_to([root]), pytest.raises(OutsideDataRootsError) as exc:
            plugin.list_cases()
        messages.append(str(exc.value))
    assert messages[0] == messages[1]  # the same answer whether the file outside exists or not
    assert messages[0].startswith(f"{root / 'pairs.csv'} line 4, {column} column: the path is outside")
    assert "real.nii.gz" not in messages[0] and "outside/" not in messages[0]
    (root / "pairs.csv").write_text("\n".join(rows) + "\n")
    with confined_to([root]):  # the rows inside the roots pass the same gate
        plugin = registry.get_data_ingestion("nifti-volumes")(pairs_file=str(root / "pairs.csv"))
        assert len(plugin.list_cases()[0]) == len(rows) - 1


def test_the_form_takes_the_folders_or_the_csv_and_gates_the_csv(synth, scattered, tmp_path):
    from digits_core import registry
    from digits_core.forms import validate_values

    root, rows = scattered
    (root / "pairs.csv").write_text("\n".join(rows) + "\n")
    form = registry.get_data_ingestion("nifti-volumes").get_dataset_form()
    with pytest.raises(FormValidationError) as exc:
        validate_values(form, {})
    assert "pairs_file" in exc.value.errors["image_folder"][0]
    with pytest.raises(FormValidationError) as exc:
        validate_values(form, {"pairs_file": str(root / "pairs.csv"), "image_folder": str(synth.task / "imagesTr")})
    assert "not both" in exc.value.errors["image_folder"][0]
    with pytest.raises(FormValidationError) as exc:
        validate_values(form, {"pairs_file": str(root / "nope.csv")})
    assert "does not exist" in exc.value.errors["pairs_file"][0]
    with confined_to([root / "scans"]), pytest.raises(FormValidationError) as exc:
        validate_values(form, {"pairs_file": str(root / "pairs.csv")})
    assert "outside the server's data roots" in exc.value.errors["pairs_file"][0]
    assert validate_values(form, {"pairs_file": str(root / "pairs.csv")})["pairs_file"] == str(root / "pairs.csv")
