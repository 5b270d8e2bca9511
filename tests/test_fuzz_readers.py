"""Hostile files thrown at the bundled plugins' readers: a named error or a skipped entry, never a raw exception.

A bounded, seeded loop (no extra dependency, the same cases on every run):
valid KITTI, COCO, targets CSV / JSON-lines, list files, ``.npy``/``.npz``,
DICOM and DICOM-SEG files are cut short, bit-flipped, padded with junk and
given absurd numbers, and each reader must either return or raise a
:class:`ValueError` / :class:`~digits_core.errors.DigitsError` naming the
file. The per-test timeout catches a hang; the cases stay small, so memory
stays bounded (a header declaring a huge array must be refused, not mapped).
"""

from __future__ import annotations

import io
import json
import random
import zipfile

import numpy as np
import pytest

from digits_core.errors import DigitsError

# Damaged files make pydicom warn as it guesses; the readers' answers are what is checked.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SEED = 23
CASES = 40
NAMED = (ValueError, DigitsError)
NUMBERS = ["1e999", "-1e999", "nan", "inf", "9" * 400, "-0", "0x10", "1_000", "", "\x00", "١٢٣", "1e-400"]


def mutations(data: bytes, rng: random.Random, count: int = CASES):
    """``count`` hostile variants of ``data``: cuts, flips, junk, absurd numbers (text formats)."""
    yield b""
    yield data[: len(data) // 2]
    for _ in range(count):
        kind = rng.randrange(5)
        buf = bytearray(data)
        if kind == 0 and buf:
            del buf[rng.randrange(len(buf)) :]
        elif kind == 1 and buf:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif kind == 2:
            at = rng.randrange(len(buf) + 1)
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        elif kind == 3:
            text = buf.decode("latin-1")
            tokens = text.split(" ")
            for _ in range(rng.randint(1, 4)):
                tokens[rng.randrange(len(tokens))] = rng.choice(NUMBERS)
            buf = bytearray(" ".join(tokens).encode("latin-1", "replace"))
        else:
            buf = bytearray(buf * rng.randint(2, 30))
        yield bytes(buf)


def run_all(tmp_path, name: str, seed_bytes: bytes, read) -> int:
    """Write each variant to ``tmp_path/name`` and call ``read(path)``; count the refusals."""
    rng = random.Random(f"{SEED}:{name}")
    refused = 0
    for variant in mutations(seed_bytes, rng):
        path = tmp_path / name
        path.write_bytes(variant)
        try:
            read(str(path))
        except NAMED as exc:
            refused += 1
            assert str(exc).strip(), f"an empty message for {variant[:60]!r}"
        except Exception as exc:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{name}: {type(exc).__name__}: {exc} for {variant[:80]!r}")
    return refused


KITTI = (
    b"car 0.00 0 -1.58 587.01 173.33 614.12 200.12 1.65 1.67 3.64 -0.65 1.71 46.70 -1.59\n"
    b"pedestrian 0.00 0 0.21 10 20 30 40 1.0 1.0 1.0 0 0 0 0\n"
)


@pytest.mark.timeout(120)
def test_kitti_labels(tmp_path):
    from digits_core import read_kitti_labels

    assert run_all(tmp_path, "000001.txt", KITTI, lambda p: read_kitti_labels(p, {"car": 1})) > 0


@pytest.mark.timeout(120)
def test_coco_annotations(tmp_path):
    from digits_data_images.detection_labels import read_coco

    coco = json.dumps(
        {
            "images": [{"id": 1, "file_name": "a.png"}],
            "categories": [{"id": 3, "name": "car"}],
            "annotations": [{"id": 9, "image_id": 1, "category_id": 3, "bbox": [1, 2, 3, 4]}],
        }
    ).encode()
    assert run_all(tmp_path, "train.json", coco, lambda p: read_coco(p, None)) > 0
    for hostile in (
        {"images": [{"id": 1, "file_name": {"a": 1}}]},
        {"images": [None]},
        {"images": [], "annotations": [{"bbox": "1234"}]},
        {"images": "x"},
        [],
        3,
        {"images": [{"id": 1, "file_name": "a"}], "categories": [{"id": [], "name": 1}]},
        {
            "images": [{"id": 1, "file_name": "a"}],
            "annotations": [{"image_id": 1, "category_id": 1, "bbox": [1e999, 0, 1, 1]}],
        },
    ):
        path = tmp_path / "h.json"
        path.write_text(json.dumps(hostile))
        try:
            read_coco(str(path), None)
        except NAMED:
            pass


@pytest.mark.timeout(120)
def test_targets_csv_and_json_lines(tmp_path):
    from digits_data_images.targets import read_targets

    csv_text = b"path,x,y\n0.png,1.5,2\n1.png,3,4e2\n"
    jsonl = (
        json.dumps({"path": "0.png", "x": 1.5, "y": 2}) + "\n" + json.dumps({"path": "1.png", "targets": [3, 4]}) + "\n"
    ).encode()
    assert run_all(tmp_path, "targets.csv", csv_text, lambda p: read_targets(p)) > 0
    assert run_all(tmp_path, "targets.jsonl", jsonl, lambda p: read_targets(p)) > 0
    for line in (
        '{"path": 3, "x": 1}',
        '{"path": ["a"], "x": 1}',
        '{"path": "a", "targets": {"a": 1}}',
        '{"path": "a", "x": [1]}',
        '"just a string"',
        '{"path": "a", "x": true}',
        "[1, 2]",
    ):
        path = tmp_path / "h.jsonl"
        path.write_text(line + "\n")
        with pytest.raises(NAMED):
            read_targets(str(path))


@pytest.mark.timeout(120)
def test_list_files(tmp_path):
    from digits_data_images import listing

    text = b"images/0.png 0\nimages/a b.png 1\n# comment\n\n"
    assert run_all(tmp_path, "train.txt", text, lambda p: listing.read_list_file(p)) > 0
    run_all(tmp_path, "paths.txt", text, lambda p: listing.read_path_list(p))


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _touch(array) -> None:
    if array.size:
        np.asarray(array.reshape(-1)[-1])  # the last element: a mapping cut short would fault here


GOOD_NPY = _npy(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))


def lying_npys(tmp_path, shapes):
    """``GOOD_NPY``'s 24 bytes of data behind a header declaring each of ``shapes``: yields each file's path."""
    header_end = GOOD_NPY.index(b"\n") + 1
    for shape in shapes:
        head = ("{'descr': '|u1', 'fortran_order': False, 'shape': %s, }" % shape).encode()
        head = head.ljust(header_end - 11, b" ") + b"\n"
        path = tmp_path / "lying.npy"
        path.write_bytes(GOOD_NPY[:8] + len(head).to_bytes(2, "little") + head + GOOD_NPY[header_end:])
        yield path


@pytest.mark.timeout(120)
def test_npy_and_npz(tmp_path):
    from digits_data_images.arrays import open_array

    good = GOOD_NPY
    assert run_all(tmp_path, "features.npy", good, lambda p: _touch(open_array(p))) > 0
    for path in lying_npys(tmp_path, ("(99999999999999, 99999999999999)", "(-1, 3)", "(2**64,)", "('a',)", "(1e3,)")):
        with pytest.raises(NAMED):
            open_array(str(path))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("features.npy", good)
        zf.writestr("labels.npy", _npy(np.array([0, 1])))
    assert run_all(tmp_path, "arrays.npz", archive.getvalue(), lambda p: _touch(open_array(p, "features"))) > 0


@pytest.mark.timeout(120)
def test_inference_npy_inputs(tmp_path):
    """``digits infer`` / Test-the-model inputs: a lying or pickled ``.npy`` is an InferenceError naming the file."""
    from digits_core.errors import InferenceError
    from digits_core.inference.imageio import read_image, read_mask

    assert run_all(tmp_path, "input.npy", GOOD_NPY, read_image) > 0
    for path in lying_npys(
        tmp_path, ("(99999999999999, 99999999999999)", "(-1, 3)", "(2**64,)", "(4, 4, 4)", "(2, 3)")
    ):
        for read in (read_image, lambda p: read_mask(p, 2, 3)):
            with pytest.raises(InferenceError, match="lying.npy"):  # never numpy's OverflowError / ValueError
                read(path)
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InferenceError, match="pickled.npy holds Python objects"):
        read_image(pickled)
    fortran = tmp_path / "fortran.npy"
    np.save(fortran, np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    assert read_image(fortran)[:, :, 0].tolist() == [[0, 1, 2], [3, 4, 5]]


def _dicom_bytes(modality: str = "MR") -> bytes:
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.4"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset("x.dcm", {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Modality, ds.PatientID = modality, "P1"
    ds.Rows, ds.Columns, ds.SamplesPerPixel, ds.PhotometricInterpretation = 4, 5, 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = np.arange(20, dtype=np.uint16).tobytes()
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return buffer.getvalue()


@pytest.mark.timeout(180)
def test_dicom_images(tmp_path):
    from digits_data_sunnybrook.dicom import read_dicom_frames, read_dicom_image

    data = _dicom_bytes()
    assert run_all(tmp_path, "IM-0001-0001.dcm", data, lambda p: read_dicom_image(p)) > 0
    run_all(tmp_path, "IM-0001-0002.dcm", data, lambda p: read_dicom_frames(p))


def test_an_absurd_frame_count_is_refused_before_decoding(tmp_path):
    """NumberOfFrames of 2·10⁹ (or a geometry needing terabytes) is refused from the header, naming the file."""
    import pydicom

    from digits_core.limits import MAX_DICOM_FRAMES, dicom_pixels_problem
    from digits_data_sunnybrook.dicom import DicomReadError, read_dicom_frames, read_dicom_image
    from digits_data_volumes.geometry import VolumeFormatError, _slice_pixels

    for name, tags in (
        ("frames.dcm", {"NumberOfFrames": 2_000_000_000}),
        ("geometry.dcm", {"NumberOfFrames": MAX_DICOM_FRAMES, "Rows": 65535, "Columns": 65535}),
    ):
        ds = pydicom.dcmread(io.BytesIO(_dicom_bytes()))
        for keyword, value in tags.items():
            setattr(ds, keyword, value)
        path = tmp_path / name
        ds.save_as(path)
        assert dicom_pixels_problem(pydicom.dcmread(path, stop_before_pixels=True))
        for read in (read_dicom_frames, lambda p: read_dicom_image(p, frame=0)):
            with pytest.raises(DicomReadError, match=f"{name}.*(NumberOfFrames|bytes decoded)"):
                read(path)
        with pytest.raises(VolumeFormatError, match=f"{name}.*(NumberOfFrames|bytes decoded)"):
            _slice_pixels(str(path))
    ds = pydicom.dcmread(io.BytesIO(_dicom_bytes()))
    ds.NumberOfFrames = 1
    assert dicom_pixels_problem(ds) is None and dicom_pixels_problem(ds, frames_read=1) is None


@pytest.mark.timeout(180)
def test_dicom_seg(tmp_path):
    import pydicom

    from digits_data_dicomweb.seg import SegmentationLabels

    def read(path):
        try:
            ds = pydicom.dcmread(path, force=True)
        except Exception as exc:  # noqa: BLE001 - pydicom's own parse errors are not the plugin's to name
            raise ValueError(f"{path}: not DICOM ({type(exc).__name__})") from None
        SegmentationLabels(ds, name=path)

    run_all(tmp_path, "seg.dcm", _dicom_bytes("SEG"), read)
