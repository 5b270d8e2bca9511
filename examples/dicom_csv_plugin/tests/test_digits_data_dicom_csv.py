"""Tests of the dicom-csv data plugin, on real DICOM files written with pydicom.

Run with ``python -m pytest tests``.
"""

from pathlib import Path

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
        validate_values(
            DicomCsvIngestion.get_dataset_form(), {"dicom_folder": str(toy), "labels_csv": str(toy / "bad.csv")}
        )


def test_split_keeps_each_patient_on_one_side(toy):
    plugin = make_plugin(toy, percent_val=25)
    train, val = plugin.itemize_entries("train"), plugin.itemize_entries("val")
    assert (len(train), len(val), plugin.itemize_entries("test")) == (9, 3, [])
    patients = {
        stage: {pydicom.dcmread(path).PatientID for path, _ in entries}
        for stage, entries in (("train", train), ("val", val))
    }
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


def test_csv_paths_may_use_backslashes(toy):
    (toy / "labels.csv").write_text((toy / "labels.csv").read_text().replace("/", "\\"))
    entry = make_plugin(toy).itemize_entries("train")[0]
    assert Path(entry[0]).is_file()


def test_a_missing_decoder_fails_before_any_work(toy):
    from pydicom.data import get_testdata_file
    from pydicom.pixels import get_decoder
    from pydicom.uid import JPEGLSLossless

    if get_decoder(JPEGLSLossless).is_available:
        pytest.skip("a JPEG-LS decoder is installed here")
    (toy / "P001" / "jpeg-ls.dcm").write_bytes(Path(get_testdata_file("MR_small_jpeg_ls_lossless.dcm")).read_bytes())
    with open(toy / "labels.csv", "a") as handle:
        handle.write("P001/jpeg-ls.dcm,normal\n")
    with pytest.raises(DicomReadError, match=r"jpeg-ls\.dcm.*JPEG-LS.*digits-data-sunnybrook\[codecs\]"):
        make_plugin(toy).itemize_entries("train")


def test_inference_lists_the_chosen_files(toy):
    values = validate_values(DicomCsvIngestion.get_inference_form(), {"dicom_path": str(toy / "P002")})
    plugin = DicomCsvIngestion(is_inference_db=True, **{**make_plugin(toy).userdata, **values})
    entries = plugin.itemize_entries("test")
    assert [Path(path).name for path, _ in entries] == ["IM-0001.dcm", "IM-0002.dcm", "IM-0003.dcm"]
    assert plugin.itemize_entries("train") == []
    feature, label = plugin.encode_entry(entries[0])
    assert feature.shape == (16, 16, 1) and label is None


def test_templates_render_the_forms():
    env = jinja2.Environment(autoescape=True)
    for get_form, get_template, field in [
        (DicomCsvIngestion.get_dataset_form, DicomCsvIngestion.get_dataset_template, "dicom_folder"),
        (DicomCsvIngestion.get_inference_form, DicomCsvIngestion.get_inference_template, "dicom_path"),
    ]:
        source, context = get_template(get_form()())
        assert f'name="{field}"' in env.from_string(source).render(**context)


def test_registry_finds_the_plugin():
    # Installed with pip, the entry point provides it; otherwise register it in process.
    registry.register(DicomCsvIngestion, replace=True)
    try:
        assert registry.get_data_ingestion("dicom-csv") is DicomCsvIngestion
    finally:
        registry.unregister(DicomCsvIngestion)
