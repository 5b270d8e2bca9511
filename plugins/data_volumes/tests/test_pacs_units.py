"""The DICOMweb pieces of the volume plugins that need no server: which server a value names, the inference form."""

from __future__ import annotations

import pytest

from digits_core import FormValidationError
from digits_core.forms import validate_values
from digits_data_dicomweb.ingestion import open_source
from digits_data_volumes.pacs import VolumeInferenceForm, open_server


def test_an_inference_url_overrides_the_dataset_server_with_its_own_credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", "operator-secret")
    dataset = {"server_url": "http://127.0.0.1:8042/dicom-web", "username": "digits", "cache_folder": str(tmp_path)}
    assert open_source(dataset).url == "http://127.0.0.1:8042/dicom-web"
    other = open_source({**dataset, "dicomweb_url": "http://127.0.0.1:9042/dicom-web", "dicomweb_username": "ann"})
    assert other.url == "http://127.0.0.1:9042/dicom-web" and other._auth == ("ann", "operator-secret")
    assert open_server({"cache_folder": str(tmp_path)}) is None  # a NIfTI-only dataset names no server


def test_the_volume_inference_form_takes_no_series_or_one_uid():
    assert validate_values(VolumeInferenceForm, {}, "volume inference")["dicomweb_series"] == ""
    assert validate_values(VolumeInferenceForm, {"dicomweb_series": "1.2.3"}, "f")["dicomweb_series"] == "1.2.3"
    with pytest.raises(FormValidationError, match="dicomweb_series"):
        validate_values(VolumeInferenceForm, {"dicomweb_series": "../etc"}, "volume inference")
    with pytest.raises(FormValidationError, match="dicomweb_series"):
        validate_values(VolumeInferenceForm, {"dicomweb_series": "1.2.3 1.2.4"}, "volume inference")
