"""Tests of the dicom-csv data plugin, on real DICOM files written with pydicom.

Run with ``python -m pytest tests``.
"""

import jinja2
import numpy as np
import pydicom
import pytest

from digits_core import FormValidationError, registry, validate_values
from digits_data_dicom_csv import DicomCsvIngestion
from digits_data_dicom_csv.toy import write_toy_data
from digits_data_sunnybrook.dicom import DicomReadError


@pytest.fixture
def toy(tmp_path):
    """Four patients with three 16x16 CT slices each, and labels.csv."""
    write_toy_data(tmp_path, patients=4, images=3, size=16)
    return tmp_path


def make_plugin(folder, **extra):
    values = {"dicom_folder": str(folder), "labels_csv": str(folder / "labels.csv"), **extra}
    return DicomCsvIngestion(**validate_values(DicomCsvIngestion.get_dataset_form(), values))


def test_form_rejects_a_csv_without_the_label_column(toy):
    (toy / "bad.csv").write_text("file,class\nP001/IM-0001.dcm,normal\n")
    with pytest.raises(FormValidationError, match="labels_csv.*'label'"):
        validate_values(DicomCsvIngestion.get_dataset_form(),
                        {"dicom_folder": str(toy), "labels_csv": str(toy / "bad.csv")})


def test_split_keeps_each_patient_on_one_side(toy):
    plugin = make_plugin(toy, percent_val=25)
    train, val = plugin.itemize_entries("train"), plugin.itemize_entries("val")
    assert (len(train), len(val), plugin.itemize_entries("test")) == (9, 3, [])
    patients = {stage: {pydicom.dcmread(path).PatientID for path, _ in entries}
                for stage, entries in (("train", train), ("val", val))}
    assert len(patients["val"]) == 1 and not patients["train"] & patients["val"]
    assert plugin.userdata["class_labels"] == ["lesion", "normal"]
    assert plugin.userdata["split"]["val"] == {"patients": 1, "images": 3}


def test_features_are_hounsfield_units(toy):
    plugin = make_plugin(toy)
    path, label = plugin.itemize_entries("train")[0]
    feature, encoded_label = plugin.encode_entry((path, label))
    ds = pydicom.dcmread(path)
    expected = ds.pixel_array.astype(np.int32) * int(ds.RescaleSlope) + int(ds.RescaleIntercept)
    assert feature.shape == (16, 16, 1) and feature.dtype == np.int16
    np.testing.assert_array_equal(feature[:, :, 0], expected)
    assert feature[0, 0, 0] < -900 and encoded_label == label


def test_a_broken_file_is_named_in_the_error(toy):
    (toy / "P001" / "IM-0001.dcm").write_text("not a DICOM file")
    plugin = make_plugin(toy)
    entries = plugin.itemize_entries("train") + plugin.itemize_entries("val")
    broken = [e for e in entries if e[0].endswith("IM-0001.dcm") and "P001" in e[0]]
    with pytest.raises(DicomReadError, match="P001.IM-0001.dcm"):
        plugin.encode_entry(broken[0])


def test_template_renders_the_form():
    form = DicomCsvIngestion.get_dataset_form()()
    source, context = DicomCsvIngestion.get_dataset_template(form)
    html = jinja2.Environment(autoescape=True).from_string(source).render(**context)
    assert 'name="dicom_folder"' in html and 'name="labels_csv"' in html


def test_registry_finds_the_plugin():
    # Installed with pip, the entry point provides it; otherwise register it in process.
    registry.register(DicomCsvIngestion, replace=True)
    try:
        assert registry.get_data_ingestion("dicom-csv") is DicomCsvIngestion
    finally:
        registry.unregister(DicomCsvIngestion)
