"""Encoded (PNG / JPEG pass-through) datasets: decoded by TensorFlow inside the engine's tf.data pipeline.

Datasets are built with the real ``image-classification`` plugin from real
image files; the batches the engine yields must equal the reader's Pillow
decode (``ds.read_all``) exactly for PNG, and for JPEG within
:data:`JPEG_MAX_DIFF`.
"""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image

# TensorFlow decodes and trains in every test here.
pytestmark = pytest.mark.slow

#: Largest |TF - Pillow| difference allowed for JPEG pixels. The engine decodes JPEG with
#: ``dct_method="INTEGER_ACCURATE"`` (libjpeg-turbo's ISLOW IDCT, Pillow's default, fancy
#: upsampling on both sides): TF 2.21 and Pillow agree exactly, gray and RGB 4:2:0. With
#: TF's default IDCT (INTEGER_FAST) the max difference measured here was 3 levels.
JPEG_MAX_DIFF = 0

H, W = 6, 8


def _write_tree(root, kind: str, per_class: int = 10):
    """Class folders ``a``/``b`` of real image files; ``kind`` picks type and format."""
    rng = np.random.default_rng(zlib.crc32(kind.encode()))  # str hash() varies per process
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            if kind == "gray16":
                arr = rng.integers(0, 65536, (H, W), dtype=np.uint16)
                Image.fromarray(arr).save(root / cls / f"{i}.png")
            elif kind in ("gray8", "gray_jpg"):
                arr = rng.integers(0, 256, (H, W), dtype=np.uint8)
            else:
                arr = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
            if kind in ("gray8", "rgb8"):
                Image.fromarray(arr).save(root / cls / f"{i}.png")
            elif kind == "gray_jpg":
                Image.fromarray(arr).save(root / cls / f"{i}.jpg", quality=85)
            elif kind == "rgb_mixed":  # pass-through keeps both: mixed png+jpg stage -> decode_image
                if i % 3 == 0:
                    Image.fromarray(arr).save(root / cls / f"{i}.png")
                else:
                    Image.fromarray(arr).save(root / cls / f"{i}.jpg", quality=90)


CASES = {
    # name: (tree kind, image_type, encoding, expected encodings, dtype, channels)
    "png_gray8": ("gray8", "grayscale", "png", {"png"}, "uint8", 1),
    "png_rgb8": ("rgb8", "color", "png", {"png"}, "uint8", 3),
    "png_gray16": ("gray16", "grayscale", "png", {"png"}, "uint16", 1),
    "jpg_gray8": ("gray_jpg", "grayscale", "passthrough", {"jpg"}, "uint8", 1),
    "mixed_rgb8": ("rgb_mixed", "color", "passthrough", {"jpg", "png"}, "uint8", 3),
}


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    from digits_core.datasets import create_dataset, open_dataset

    root = tmp_path_factory.mktemp("encoded")
    jobs = root / "jobs"
    out = {}
    for name, (kind, image_type, encoding, _, _, _) in CASES.items():
        _write_tree(root / name, kind)
        job = create_dataset(
            "image-classification",
            {
                "folder": str(root / name),
                "image_type": image_type,
                "width": W,
                "height": H,
                "encoding": encoding,
                "val_percent": 25,
                "shuffle": False,
            },
            name=name,
            workers=1,
            jobs_dir=jobs,
        )
        out[name] = open_dataset(job.id, jobs_dir=jobs)
    out["jobs"] = jobs
    return out


def _identity_prep(ds):
    from digits_core.engine.preprocessing import Preprocessing

    return Preprocessing("none", None, 1.0, None, tuple(ds.feature_shape()))


def _assert_pixels(got, want, name):
    got = np.asarray(got)
    assert got.shape == want.shape, name
    if CASES[name][3] == {"png"}:
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=name)
    else:
        diff = np.abs(got - want.astype(np.float32)).max()
        assert diff <= JPEG_MAX_DIFF, f"{name}: max |TF - Pillow| = {diff}"


def _no_pillow(*args, **kwargs):
    raise AssertionError("the engine decoded a record with Pillow (per-record Python decode)")


@pytest.mark.parametrize("name", list(CASES))
def test_pipeline_decodes_like_reader(encoded, name, monkeypatch):
    import tensorflow as tf

    from digits_core.engine.options import Augmentation
    from digits_core.engine.pipeline import Layout, StageSource, train_dataset, val_dataset
    from digits_core.interfaces import records

    ds = encoded[name]
    _, _, _, kinds, dtype, channels = CASES[name]
    assert {k for k, v in ds.feature_encodings("train").items() if v} == kinds
    assert ds.feature_dtype() == dtype and ds.feature_shape() == (H, W, channels)
    want_x, want_y = ds.read_all("train")
    vx, vy = ds.read_all("val")
    monkeypatch.setattr(records, "decode_image_bytes", _no_pillow)
    prep = _identity_prep(ds)
    for preload in (True, False):
        src = StageSource(ds, "train", preload=preload)
        assert src.encoded and src.encodings == kinds
        if preload:
            assert src.features.dtype == np.dtype(dtype)
            _assert_pixels(src.features.astype(np.float32), want_x, name)
        batches = train_dataset(
            src, layout=Layout(4), prep=prep, aug=Augmentation(), seed=0, shuffle=False, start_epoch=0, epochs=1
        )
        # no autotuning model thread: destroying an iterator joined it through its whole sleep (pipeline_options)
        assert batches.options().autotune.enabled is False and batches.options().deterministic is True
        xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in batches])
        _assert_pixels(np.concatenate(xs), want_x, name)
        np.testing.assert_array_equal(np.concatenate(ys), want_y)
        if not preload:  # a resume one step into the epoch: the same later batches, the skipped one never read
            reads: list[int] = []
            read_encoded = src.read_encoded
            monkeypatch.setattr(src, "read_encoded", lambda idx: (reads.append(len(idx)), read_encoded(idx))[1])
            resumed = train_dataset(
                src,
                layout=Layout(4),
                prep=prep,
                aug=Augmentation(),
                seed=0,
                shuffle=False,
                start_epoch=0,
                epochs=1,
                skip_batches=1,
            )
            _assert_pixels(np.concatenate([x.numpy() for x, _ in resumed]), want_x[len(xs[0]) :], name)
            assert len(reads) == len(xs) - 1
        # Streamed validation: bytes -> decode/normalize/pad inside tf.data.
        vsrc = StageSource(ds, "val", preload=preload)
        vbatches, steps = val_dataset(vsrc, layout=Layout(3), prep=prep)
        assert vbatches.options().autotune.enabled is False
        got = [(x.numpy(), y.numpy(), v.numpy()) for x, y, v in vbatches]
        assert len(got) == steps
        gx = np.concatenate([g[0] for g in got])
        valid = np.concatenate([g[2] for g in got]).astype(bool)
        _assert_pixels(gx[valid], vx, name)
        assert not gx[~valid].any()
        np.testing.assert_array_equal(np.concatenate([g[1] for g in got])[valid], vy)
    # The decoder keeps the stored dtype (16-bit stays uint16).
    from digits_core.engine.pipeline import make_decoder

    raw = ds.read_batch("train", 0, 1, decode=False)[0][0]
    assert make_decoder(ds.feature_shape(), dtype, kinds)(tf.constant(raw)).dtype == tf.as_dtype(dtype)


def test_bytes_array_keeps_trailing_nul_and_bad_record_fails(encoded):
    import tensorflow as tf

    from digits_core.engine.pipeline import bytes_array, decode_all

    data = [b"ab\x00\x00", b"c"]
    assert tf.constant(bytes_array(data)).numpy().tolist() == data
    ds = encoded["png_gray8"]
    good = ds.read_batch("train", 0, 2, decode=False)[0]
    other = io.BytesIO()
    Image.fromarray(np.zeros((H + 1, W), np.uint8)).save(other, format="PNG")
    with pytest.raises(tf.errors.InvalidArgumentError):
        decode_all([good[0], other.getvalue()], ds.feature_shape(), "uint8", {"png"})


def test_train_on_encoded_dataset(encoded, tmp_path):
    """Streaming PNG records (decoded in tf.data) trains exactly like the same images stored raw."""
    import json

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    ds = encoded["png_gray8"]
    raw = create_dataset(
        "image-classification",
        {
            "folder": str(encoded["jobs"].parent / "png_gray8"),
            "image_type": "grayscale",
            "width": W,
            "height": H,
            "encoding": "none",
            "val_percent": 25,
            "shuffle": False,
        },
        name="raw",
        workers=1,
        jobs_dir=encoded["jobs"],
    )
    runs = {}
    for name, dataset_id in (("encoded", ds.id), ("raw", raw.id)):
        job = train(
            dataset_id,
            "lenet",
            name=name,
            jobs_dir=encoded["jobs"],
            epochs=2,
            batch_size=8,
            preload=False,
            validation_interval=1,
            snapshot_interval=0,
            seed=5,
        )
        info = json.loads((job.path / "model.json").read_text())
        assert info["input_pipeline"] == "stream"
        runs[name] = [json.loads(line) for line in (job.path / "metrics.jsonl").read_text().splitlines()]
    metrics = runs["encoded"]
    names = {m["name"] for m in metrics}
    assert "loss" in names and any(n.startswith("val") for n in names)
    assert all(np.isfinite(m["value"]) for m in metrics)

    # Same seed, same pixels: every logged loss and validation value agrees with the raw-record run.
    def values(run):
        return [(m["name"], m["value"]) for m in run if m["name"] in ("loss", "val_loss", "val_accuracy")]

    assert len(values(metrics)) >= 4
    for (name, got), (raw_name, want) in zip(values(metrics), values(runs["raw"]), strict=True):
        assert name == raw_name and got == pytest.approx(want, rel=1e-4, abs=1e-6), (name, got, want)
