"""Truncated DICOM files: told apart from files missing tags, cheaply, with pydicom's warnings kept off stderr."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydicom.data import get_testdata_file

from digits_data_sunnybrook.dicom import DicomReadError, check_pixel_data_length, read_dicom_image


def _cut(tmp_path: Path, name: str, fraction: float) -> Path:
    data = Path(get_testdata_file(name)).read_bytes()
    path = tmp_path / f"cut-{name}"
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def test_truncated_jpeg2000_is_reported_as_truncated_not_as_missing_tags(tmp_path):
    path = _cut(tmp_path, "MR_small_jp2klossless.dcm", 0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydicom's "End of file reached" warning must not escape
        with pytest.raises(DicomReadError) as info:
            read_dicom_image(path)
    message = str(info.value)
    assert message.startswith(f"{path}: pixel data truncated: the compressed (JPEG 2000")
    assert "header intact: 64x64" in message and "missing" not in message
    # pydicom's warning is carried by the error, once.
    assert message.count("End of file reached before delimiter") == 1


@pytest.mark.parametrize(
    "name, fraction, expected",
    [
        ("MR_small.dcm", 0.9, r"pixel data truncated: \d+ of 8192 bytes \(64x64, 1 frame\(s\), 16 bits\)"),
        ("MR_small_jp2klossless.dcm", 0.6, "pixel data truncated: the compressed"),
        ("JPEG2000.dcm", 0.9, r"pixel data missing: the file ends where the pixel data should start"),
    ],
)
def test_cheap_pixel_data_length_check(tmp_path, name, fraction, expected):
    with pytest.raises(DicomReadError, match=expected):
        check_pixel_data_length(_cut(tmp_path, name, fraction))


@pytest.mark.parametrize(
    "name",
    [
        "MR_small.dcm",
        "MR_small_jp2klossless.dcm",
        "JPEG2000.dcm",
        "SC_rgb_jpeg.dcm",
        "SC_ybr_full_422_uncompressed.dcm",
        "image_dfl.dcm",
    ],
)
def test_intact_files_pass_the_length_check(name):
    check_pixel_data_length(get_testdata_file(name))
