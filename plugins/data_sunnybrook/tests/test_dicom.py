"""digits_data_sunnybrook.dicom against pydicom's own test files and files damaged on purpose."""

from __future__ import annotations

import pickle

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file
from pydicom.pixels import get_decoder
from pydicom.uid import ExplicitVRLittleEndian, JPEGLSLossless

from digits_core.errors import DigitsError
from digits_data_sunnybrook.dicom import (
    DicomReadError,
    MissingDecoderError,
    check_decoders,
    count_frames,
    image_dtype,
    read_dicom_frames,
    read_dicom_header,
    read_dicom_image,
    series_key,
    slice_position,
    to_uint8,
)


def data_file(name):
    path = get_testdata_file(name)
    assert path is not None, f"pydicom test file {name} missing"
    return path


def raw_pixels(path):
    """The stored values as pydicom gives them, in native byte order (independent of the module)."""
    ds = pydicom.dcmread(path)
    arr = ds.pixel_array
    return ds, arr.astype(arr.dtype.newbyteorder("="))


@pytest.mark.parametrize(
    "name", ["MR_small.dcm", "MR_small_bigendian.dcm", "MR_small_implicit.dcm", "MR_small_RLE.dcm"]
)
def test_mr_small_variants_give_the_same_native_int16(name):
    _, expected = raw_pixels(data_file("MR_small.dcm"))
    image = read_dicom_image(data_file(name))
    assert image.shape == (64, 64, 1)
    assert image.dtype == np.int16
    assert image.dtype.byteorder in ("=", "<") and image.dtype.isnative
    np.testing.assert_array_equal(image[..., 0], expected)
    # the raw bytes are native too: what LMDB would store
    assert np.frombuffer(image.tobytes(), dtype=np.int16).reshape(64, 64).tolist() == expected.tolist()


def test_big_endian_source_really_is_big_endian():
    ds = pydicom.dcmread(data_file("MR_small_bigendian.dcm"))
    assert ds.pixel_array.dtype.byteorder == ">"  # what the module must convert


def test_ct_rescale_to_hounsfield_units():
    ds, raw = raw_pixels(data_file("CT_small.dcm"))
    slope, intercept = float(ds.RescaleSlope), float(ds.RescaleIntercept)
    assert (slope, intercept) == (1.0, -1024.0)
    image = read_dicom_image(data_file("CT_small.dcm"))
    # BitsStored 16 signed + intercept -1024 cannot fit int16 in general -> float32
    assert image.dtype == np.float32
    np.testing.assert_array_equal(image[..., 0], raw.astype(np.float64) * slope + intercept)
    stored = read_dicom_image(data_file("CT_small.dcm"), apply_rescale=False)
    assert stored.dtype == np.int16
    np.testing.assert_array_equal(stored[..., 0], raw)


def _synth_file(synth_root):
    return next((synth_root.image_folder / "SC-HF-I-1").glob("IM-0004-*.dcm"))


def test_integral_rescale_keeps_int16_and_fractional_gives_float32(synth_root, tmp_path):
    src = _synth_file(synth_root)
    ds, raw = raw_pixels(src)
    assert ds.BitsStored == 12 and ds.PixelRepresentation == 0
    ds.RescaleSlope, ds.RescaleIntercept = 1, -1024
    ds.save_as(tmp_path / "int.dcm")
    image = read_dicom_image(tmp_path / "int.dcm")
    assert image.dtype == np.int16  # 0..4095 - 1024 fits int16
    np.testing.assert_array_equal(image[..., 0], raw.astype(np.int32) - 1024)
    ds.RescaleSlope, ds.RescaleIntercept = 2.5, 10
    ds.save_as(tmp_path / "float.dcm")
    image = read_dicom_image(tmp_path / "float.dcm")
    assert image.dtype == np.float32
    np.testing.assert_allclose(image[..., 0], raw * 2.5 + 10)
    assert image_dtype(pydicom.dcmread(tmp_path / "float.dcm")) == np.float32


def test_unsigned_12_bit_stays_uint16(synth_root):
    src = _synth_file(synth_root)
    _, raw = raw_pixels(src)
    image = read_dicom_image(src)
    assert image.dtype == np.uint16
    np.testing.assert_array_equal(image[..., 0], raw)
    assert image.max() <= 4095


def test_monochrome1_is_inverted_over_the_stored_range(synth_root, tmp_path):
    src = _synth_file(synth_root)
    ds, raw = raw_pixels(src)
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.save_as(tmp_path / "m1.dcm")
    image = read_dicom_image(tmp_path / "m1.dcm")
    assert image.dtype == np.uint16
    np.testing.assert_array_equal(image[..., 0], 4095 - raw.astype(np.int64))  # 12 bits stored


def test_monochrome1_signed_int16(tmp_path):
    ds, raw = raw_pixels(data_file("MR_small.dcm"))
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.save_as(tmp_path / "m1.dcm")
    image = read_dicom_image(tmp_path / "m1.dcm")
    assert image.dtype == np.int16
    np.testing.assert_array_equal(image[..., 0], (-32768 + 32767) - raw.astype(np.int64))


def test_monochrome1_after_rescale_and_window(tmp_path):
    ds, raw = raw_pixels(data_file("CT_small.dcm"))
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.save_as(tmp_path / "ct_m1.dcm")
    hu = raw.astype(np.float64) - 1024
    image = read_dicom_image(tmp_path / "ct_m1.dcm")
    lo, hi = -32768 - 1024, 32767 - 1024
    np.testing.assert_array_equal(image[..., 0], (lo + hi) - hu)
    center, width = 40.0, 400.0
    windowed = read_dicom_image(tmp_path / "ct_m1.dcm", window=(center, width))
    expected = np.clip((hu - (center - 0.5)) / (width - 1) + 0.5, 0, 1)
    assert windowed.dtype == np.float32
    np.testing.assert_allclose(windowed[..., 0], 1.0 - expected, atol=1e-6)


def test_window_from_file_and_missing_window(synth_root, tmp_path):
    src = _synth_file(synth_root)
    ds, raw = raw_pixels(src)
    image = read_dicom_image(src, window="file")  # the generator writes center 600, width 1200
    np.testing.assert_allclose(image[..., 0], np.clip((raw - 599.5) / 1199 + 0.5, 0, 1), atol=1e-6)
    del ds.WindowCenter
    ds.save_as(tmp_path / "nowindow.dcm")
    with pytest.raises(DicomReadError, match="WindowCenter") as info:
        read_dicom_image(tmp_path / "nowindow.dcm", window="file")
    assert str(info.value).startswith(str(tmp_path / "nowindow.dcm"))


def test_garbage_in_unused_high_bits_is_masked(synth_root, tmp_path):
    src = _synth_file(synth_root)
    ds, raw = raw_pixels(src)
    dirty = (raw.astype(np.uint16) | np.uint16(0xA000)).astype("<u2")
    ds.PixelData = dirty.tobytes()
    ds.save_as(tmp_path / "dirty.dcm")
    image = read_dicom_image(tmp_path / "dirty.dcm")
    np.testing.assert_array_equal(image[..., 0], raw)


def test_missing_decoder_is_reported_before_reading():
    path = data_file("MR_small_jpeg_ls_lossless.dcm")
    if get_decoder(JPEGLSLossless).is_available:
        pytest.skip("a JPEG-LS decoder is installed here")
    with pytest.raises(MissingDecoderError) as info:
        check_decoders([data_file("MR_small.dcm"), path, path])
    message = str(info.value)
    assert path in message and "JPEG-LS" in message
    assert "digits-data-sunnybrook[codecs]" in message and "pylibjpeg" in message
    assert info.value.count == 2 and info.value.transfer_syntax == JPEGLSLossless
    with pytest.raises(MissingDecoderError, match="digits-data-sunnybrook"):
        read_dicom_image(path)
    with pytest.raises(MissingDecoderError, match="my-plugin\\[codecs\\]"):
        check_decoders([JPEGLSLossless], install_hint='pip install "my-plugin[codecs]"')


def test_check_decoders_counts_syntaxes_and_skips_unreadable(tmp_path):
    bad = tmp_path / "notes.dcm"
    bad.write_text("not dicom")
    counts = check_decoders([data_file("MR_small.dcm"), data_file("MR_small_RLE.dcm"), bad, ExplicitVRLittleEndian])
    # one file and one UID use explicit VR LE; RLE needs numpy only; the text file is skipped
    assert counts == {ExplicitVRLittleEndian: 2, "1.2.840.10008.1.2.5": 1}


@pytest.mark.parametrize("name", ["rtplan.dcm", "rtstruct.dcm"])
def test_files_without_pixels(name):
    with pytest.raises(DicomReadError) as info:
        read_dicom_image(data_file(name))
    assert str(info.value).startswith(data_file(name))
    assert "PixelData" in str(info.value)


def _bad_files(tmp_path):
    mr = open(data_file("MR_small.dcm"), "rb").read()
    files = {
        "text.dcm": b"This is a text file, not a DICOM file.\n" * 4,
        "empty.dcm": b"",
        "cut300.dcm": mr[:300],
        "cut_half.dcm": mr[: len(mr) // 2],
        "png.dcm": b"\x89PNG\r\n\x1a\n" + bytes(100),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = tmp_path / name
        paths[name].write_bytes(data)
    return paths


def test_bad_files_each_give_one_clear_error(tmp_path):
    for name, path in _bad_files(tmp_path).items():
        with pytest.raises(DicomReadError) as info:
            read_dicom_image(path)
        assert isinstance(info.value, DigitsError)
        assert str(info.value).startswith(str(path)), name
        assert info.value.path == str(path)
    with pytest.raises(DicomReadError, match="file not found"):
        read_dicom_image(tmp_path / "missing.dcm")
    with pytest.raises(DicomReadError, match="not a file"):
        read_dicom_image(tmp_path)
    with pytest.raises(DicomReadError, match="less than expected|pixel data"):
        read_dicom_image(data_file("MR_truncated.dcm"))


def test_error_survives_pickling():
    err = DicomReadError("/x/y.dcm", "broken")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == "/x/y.dcm: broken" and again.path == "/x/y.dcm"
    missing = MissingDecoderError("/a.dcm", "why", "1.2.3", ["pkg"], 3)
    again = pickle.loads(pickle.dumps(missing))
    assert again.packages == ["pkg"] and again.count == 3


def test_multi_frame_is_rejected_unless_a_frame_is_asked():
    path = data_file("SC_rgb_rle_2frame.dcm")
    with pytest.raises(DicomReadError, match="multi-frame file \\(2 frames\\)"):
        read_dicom_image(path)
    assert count_frames(path) == 2
    frames = read_dicom_frames(path)
    assert frames.shape == (2, 100, 100, 3) and frames.dtype == np.uint8
    expected = pydicom.dcmread(path).pixel_array
    np.testing.assert_array_equal(read_dicom_image(path, frame=1), expected[1])
    np.testing.assert_array_equal(frames, expected)
    with pytest.raises(DicomReadError, match="out of range"):
        read_dicom_image(path, frame=2)


def test_header_helpers(synth_root):
    files = sorted((synth_root.image_folder / "SC-HF-I-1").glob("IM-0004-00[0-4]1.dcm"))
    headers = [read_dicom_header(f) for f in files]
    assert len({series_key(h) for h in headers}) == 1
    positions = [slice_position(h) for h in headers]
    assert all(p is not None for p in positions)
    assert len(set(np.round(positions, 3))) == 3  # image 1, 21, 41 = three slices
    assert slice_position(pydicom.Dataset()) is None


def test_to_uint8_normalises_by_the_data():
    data = np.array([[100, 1100], [2100, 4095]], dtype=np.uint16)
    out = to_uint8(data)
    assert out.dtype == np.uint8 and out.min() == 0 and out.max() == 255
    assert to_uint8(np.full((2, 2), 7)).max() == 0
