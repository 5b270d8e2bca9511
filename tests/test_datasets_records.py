"""One record's bytes: bit-exact round trips per dtype, label kinds, contract violations."""

from __future__ import annotations

import lmdb
import numpy as np
import pytest
import wtforms

from digits_core import DataIngestion
from digits_core.datasets import EncodedImage, RecordError
from digits_core.datasets.storage import StageWriter, close_reader, open_reader, read_keys, read_range, release_reader
from digits_core.interfaces import records as rec


def _roundtrip(feature, label):
    data, meta, _ = rec.pack_record(feature, label)
    return rec.unpack_record(data), meta


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "float32"])
def test_feature_dtypes_round_trip_bit_exactly(dtype):
    rng = np.random.default_rng(1)
    if dtype == "float32":
        feature = rng.standard_normal((5, 7, 3)).astype(np.float32)
        feature[0, 0, 0] = np.float32(np.nan)
        feature[0, 0, 1] = np.float32(-0.0)
    else:
        info = np.iinfo(dtype)
        feature = rng.integers(info.min, info.max, (5, 7, 3), endpoint=True).astype(dtype)
    (out, label), meta = _roundtrip(feature, 3)
    assert out.dtype == np.dtype(dtype) and out.shape == (5, 7, 3)
    assert out.tobytes() == feature.tobytes()
    assert meta.feature_dtype == dtype and meta.feature_shape == (5, 7, 3)
    assert label == 3 and label.dtype == np.int64


def test_hw_feature_becomes_hwc_and_big_endian_is_stored_by_value():
    feature = np.arange(12, dtype=">u2").reshape(3, 4)
    (out, _), meta = _roundtrip(feature, 0)
    assert out.shape == (3, 4, 1) and out.dtype == np.uint16
    assert np.array_equal(out[:, :, 0], feature.astype(np.uint16))
    assert out.dtype.byteorder in ("=", "<", "|")


@pytest.mark.parametrize(
    "label, kind, dtype, shape",
    [
        (7, "class", "int64", ()),
        (np.int32(2), "class", "int64", ()),
        (0.25, "regression", "float64", ()),
        (np.float32(1.5), "regression", "float32", ()),
        (np.array([1.0, -2.5, 3.25], np.float32), "regression", "float32", (3,)),
        (np.array([1.0, 2.0], np.float64), "regression", "float64", (2,)),
    ],
)
def test_label_kinds(label, kind, dtype, shape):
    feature = np.zeros((2, 3, 1), np.uint8)
    (_, out), meta = _roundtrip(feature, label)
    assert rec.LABEL_KINDS[meta.label_kind] == kind
    assert meta.label_dtype == dtype and meta.label_shape == shape
    assert np.asarray(out).dtype == np.dtype(dtype)
    assert np.array_equal(np.asarray(out), np.asarray(label, dtype=dtype))


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int32"])
def test_mask_labels(dtype):
    mask = (np.arange(20).reshape(4, 5) % 3).astype(dtype)
    (_, out), meta = _roundtrip(np.zeros((4, 5, 3), np.uint8), mask)
    assert rec.LABEL_KINDS[meta.label_kind] == "mask"
    assert out.dtype == np.dtype(dtype) and out.shape == (4, 5)
    assert np.array_equal(out, mask)


@pytest.mark.parametrize(
    "feature, label, message",
    [
        ([1, 2, 3], 0, "numpy array"),
        (np.zeros((2, 2, 2, 2), np.uint8), 0, "H×W×C"),
        (np.zeros((2, 2), np.int64), 0, "dtype int64"),
        (np.zeros((2, 2), np.uint8), None, "label is None"),
        (np.zeros((2, 2), np.uint8), True, "bool"),
        (np.zeros((2, 2), np.uint8), "cat", "not str"),
        (np.zeros((2, 2), np.uint8), np.zeros((3, 3), np.uint8), "differs from the feature"),
    ],
)
def test_contract_violations_raise_record_error(feature, label, message):
    with pytest.raises(RecordError, match=message):
        rec.pack_record(feature, label)


@pytest.mark.parametrize(
    "label, kind, message",
    [
        (np.zeros((2, 2), np.float32), "mask", "integer array"),
        (np.array([1, 2]), "regression", "float32 or float64"),
        (
            np.zeros((1, 4, 5), np.float32),
            "boxes",
            r"declared as boxes must be an N×5 float array; got shape \(1, 4, 5\)",
        ),
        (np.zeros((4, 6), np.float32), "boxes", r"N×5 float array; got shape \(4, 6\)"),
        (np.zeros((2, 2, 3), np.uint8), "image", "declared as image must be an H×W×C float array"),
        (0.5, "class", "declared as class must be an int class index; got float"),
        (np.zeros((2, 2), np.uint8), "story", 'label kind "story" is not one of'),
    ],
)
def test_a_label_contradicting_its_declared_kind_is_refused(label, kind, message):
    with pytest.raises(RecordError, match=message):
        rec.pack_record(np.zeros((2, 2), np.uint8), label, kind)


@pytest.mark.parametrize("words", [5, 6])
def test_labels_are_never_guessed_from_their_shape(words):
    """A float story×sentence label is raw whatever its width: 5 columns do not make boxes (the bAbI bug)."""
    story = np.arange(4 * words, dtype=np.float32).reshape(4, words)
    (_, out), meta = _roundtrip(np.zeros((8, 8), np.uint8), story)
    assert rec.LABEL_KINDS[meta.label_kind] == "raw" and meta.label_shape == (4, words)
    assert out.dtype == np.float32 and np.array_equal(out, story)
    # declared, the same array is boxes
    _, meta, _ = rec.pack_record(np.zeros((8, 8), np.uint8), np.zeros((2, 5), np.float32), "boxes")
    assert rec.LABEL_KINDS[meta.label_kind] == "boxes" and meta.label_shape == (None, 5)


@pytest.mark.parametrize(
    "label",
    [
        np.arange(24, dtype=np.float32).reshape(1, 4, 6),
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.array([[True, False]]),
        np.float64(2.5),
    ],
)
def test_raw_labels_round_trip_with_their_shape(label):
    data, meta, _ = rec.pack_record(np.zeros((3, 3), np.uint8), label, "raw")
    _, out = rec.unpack_record(data)
    assert rec.LABEL_KINDS[meta.label_kind] == "raw" and meta.label_shape == np.shape(label)
    assert np.shape(out) == np.shape(label) and np.array_equal(out, np.asarray(label, out.dtype))


def test_declared_labels_win_over_the_plugins_kind():
    label = rec.DeclaredLabel(np.zeros((1, 2, 5), np.float32), "raw")
    _, meta, _ = rec.pack_record(np.zeros((3, 3), np.uint8), *rec.declared(label, "boxes"))
    assert rec.LABEL_KINDS[meta.label_kind] == "raw" and meta.label_shape == (1, 2, 5)
    _, meta, _ = rec.pack_record(np.zeros((3, 3), np.uint8), 3, "regression")  # an int declared regression
    assert rec.LABEL_KINDS[meta.label_kind] == "regression" and meta.label_dtype == "float64"


def test_encoded_png_round_trips_uint8_and_uint16():
    rng = np.random.default_rng(2)
    rgb = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    gray16 = rng.integers(0, 65536, (6, 5), dtype=np.uint16)
    for arr in (rgb, gray16):
        enc = EncodedImage.from_array(arr, "png")
        data, meta, pixels = rec.pack_record(enc, 1)
        assert meta.encoding == rec.PNG and pixels is not None
        out, _ = rec.unpack_record(data)
        assert out.dtype == arr.dtype and np.array_equal(out.reshape(arr.shape), arr)
        raw, _ = rec.unpack_record(data, decode=False)
        assert raw == enc.data
    with pytest.raises(RecordError, match="1-channel PNG"):
        EncodedImage.from_array(np.zeros((2, 2, 3), np.uint16), "png")
    with pytest.raises(RecordError, match="uint8 or uint16"):
        rec.pack_record(EncodedImage(b"x", "png", (2, 2, 1), "float32"), 0)


def test_stage_writer_grows_the_map_and_reads_ranges(tmp_path):
    writer = StageWriter(tmp_path / "train", map_size=64 * 1024)
    records = [bytes([i % 256]) * 3000 for i in range(200)]  # ~600 KB: the map must grow
    for start in range(0, 200, 50):
        writer.append(records[start : start + 50])
    assert writer.map_grows >= 1 and writer.count == 200
    writer.close()
    env = open_reader(tmp_path / "train")
    assert open_reader(tmp_path / "train") is env  # one environment per file and process (LMDB's rule)
    assert read_range(env, 10, 13) == records[10:13]
    assert read_range(env, 195, 300) == records[195:]
    assert read_keys(env, [199, 0, 5]) == [records[199], records[0], records[5]]
    release_reader(tmp_path / "train")
    assert open_reader(tmp_path / "train") is env  # one user left
    release_reader(tmp_path / "train")
    release_reader(tmp_path / "train")  # the last user closes it
    again = open_reader(tmp_path / "train")
    assert again is not env and read_range(again, 0, 1) == records[:1]
    close_reader(tmp_path / "train")
    with pytest.raises(lmdb.Error):
        lmdb.open(str(tmp_path / "missing"), readonly=True, create=False)


class _Stories(DataIngestion):
    """The bAbI idiom: a float story×sentence label of 5 words per sentence, the kind not declared."""

    plugin_id = "test-stories"

    @staticmethod
    def get_dataset_form():
        return wtforms.Form

    @staticmethod
    def get_dataset_template(form):
        return "", {}

    def itemize_entries(self, stage):
        return list(range(6)) if stage == "train" else []

    def encode_entry(self, entry):
        return np.full((4, 4, 1), entry, np.uint8), np.full((3, 5), entry / 10, np.float32)


def test_a_dataset_of_raw_labels_keeps_their_kind_and_shape(tmp_path):
    from digits_core.plugins.testing import build_dataset

    dataset = build_dataset(_Stories, {}, jobs_dir=tmp_path)
    assert (dataset.label_kind, dataset.label_dtype, dataset.label_shape) == ("raw", "float32", (3, 5))
    features, labels = dataset.read_batch("train", 1, 4)
    assert features.shape == (3, 4, 4, 1) and labels.shape == (3, 3, 5)
    assert np.allclose(labels[:, 0, 0], [0.1, 0.2, 0.3]) and features[2, 0, 0, 0] == 3
