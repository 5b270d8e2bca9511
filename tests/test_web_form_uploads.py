"""Files uploaded through a data plugin's inference form reach the plugin as saved paths."""

from __future__ import annotations

import io
import types

import numpy as np
import pytest
from werkzeug.datastructures import FileStorage, MultiDict

from digits_core import FormValidationError
from digits_core.forms import bind_form, validate_form
from digits_core.web.inference_views import _save_form_uploads


@pytest.fixture(scope="module")
def dicom_file(tmp_path_factory):
    from digits_data_sunnybrook.synth import generate

    result = generate(tmp_path_factory.mktemp("synth"), cases=1, size=32, slices=1)
    return sorted(result.image_folder.rglob("*.dcm"))[0]


def _upload(path, name="scan.dcm"):
    return FileStorage(stream=io.BytesIO(path.read_bytes()), filename=name)


def test_uploads_are_saved_in_the_model_job_and_replaced_by_their_paths(tmp_path, dicom_file):
    job = types.SimpleNamespace(path=tmp_path / "job")
    values = {"dicom_file": "", "dicom_upload": _upload(dicom_file, "../../evil name.dcm"), "validation_record": ""}
    saved = _save_form_uploads(job, values)
    path = saved["dicom_upload"]
    assert isinstance(path, str) and path.startswith(str(job.path / "inference"))
    assert "evil_name.dcm" in path and ".." not in path  # the browser's file name is sanitized
    assert open(path, "rb").read() == dicom_file.read_bytes()
    assert saved["dicom_file"] == "" and values["dicom_upload"] is not saved["dicom_upload"]
    empty = _save_form_uploads(job, {"dicom_upload": FileStorage(stream=io.BytesIO(b""), filename="")})
    assert empty == {"dicom_upload": ""}


def test_sunnybrook_inference_form_accepts_an_upload_but_not_with_a_path(dicom_file):
    from digits_data_sunnybrook.forms import SunnybrookInferenceForm

    form = bind_form(
        SunnybrookInferenceForm, formdata=MultiDict({"dicom_upload": _upload(dicom_file)}), meta={"csrf": False}
    )
    assert validate_form(form)["dicom_upload"].filename == "scan.dcm"
    both = MultiDict({"dicom_upload": _upload(dicom_file), "dicom_file": str(dicom_file)})
    with pytest.raises(FormValidationError) as info:
        validate_form(bind_form(SunnybrookInferenceForm, formdata=both, meta={"csrf": False}))
    assert "not both" in info.value.errors["validation_record"][0]


def test_sunnybrook_plugin_encodes_the_saved_upload(tmp_path, dicom_file):
    from digits_data_sunnybrook.dicom import read_dicom_image
    from digits_data_sunnybrook.ingestion import SunnybrookIngestion

    saved = _save_form_uploads(types.SimpleNamespace(path=tmp_path), {"dicom_upload": _upload(dicom_file)})
    plugin = SunnybrookIngestion(
        is_inference_db=True, channel_conversion="L", dicom_file="", validation_record="", **saved
    )
    entries = plugin.itemize_entries("test")
    assert len(entries) == 1
    image, mask = plugin.encode_entry(entries[0])
    assert mask is None and image.dtype == np.uint16
    np.testing.assert_array_equal(image, read_dicom_image(dicom_file))
    # An API caller may hand over a file object instead.
    plugin = SunnybrookIngestion(
        is_inference_db=True,
        channel_conversion="L",
        dicom_file="",
        validation_record="",
        dicom_upload=io.BytesIO(dicom_file.read_bytes()),
    )
    image, _ = plugin.encode_entry(plugin.itemize_entries("test")[0])
    np.testing.assert_array_equal(image, read_dicom_image(dicom_file))
