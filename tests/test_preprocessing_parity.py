"""One preprocessing: the dataset path and the inference path give bit-identical arrays.

Dataset path: ``digits_data_images.encoding.load_resized`` (what the image
plugins store for every record). Inference path: ``imageio.read_image`` +
``imageio.prepare_image`` (what ``digits infer``, the web UI and the API feed
the model). Both draw ``fill``/``half_crop`` noise from the generator they
are given, so with the same generator even the noise matches; with
inference's default generator everything outside the noise matches.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.inference.imageio import prepare_image, read_image
from digits_core.resize import RESIZE_MODES, resize_plan, seeded_rng

SIZES = [(37, 23, 15, 21), (23, 37, 17, 17), (9, 13, 15, 11), (31, 31, 13, 19)]  # src h, w -> h, w (odd)


def _pixels(kind: str, h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(h * 100 + w)
    if kind == "uint16":
        return rng.integers(0, 65536, (h, w), dtype=np.uint32).astype(np.uint16)
    if kind == "float32":
        return rng.normal(0, 3, (h, w, 1)).astype(np.float32)
    return rng.integers(0, 256, (h, w, 3) if kind == "rgb" else (h, w), dtype=np.uint16).astype(np.uint8)


def _write(tmp_path, kind: str, arr: np.ndarray):
    if kind == "float32":
        path = tmp_path / "x.npy"
        np.save(path, arr)
    else:
        path = tmp_path / "x.png"
        Image.fromarray(arr).save(path)  # uint16 -> 16-bit PNG ("I;16")
    return path


def _outside_noise(arr: np.ndarray, plan) -> np.ndarray:
    if plan.pad_y:
        return arr[plan.pad_y : arr.shape[0] - plan.pad_y]
    if plan.pad_x:
        return arr[:, plan.pad_x : arr.shape[1] - plan.pad_x]
    return arr


@pytest.mark.parametrize("mode", RESIZE_MODES)
@pytest.mark.parametrize(
    "kind,channels", [("gray", 1), ("rgb", 3), ("rgb", 1), ("gray", 3), ("uint16", 1), ("uint16", 3), ("float32", 1)]
)
def test_dataset_and_inference_paths_are_bit_identical(tmp_path, mode, kind, channels):
    from digits_core.resize import resize_image
    from digits_data_images.encoding import load_resized

    for src_h, src_w, h, w in SIZES:
        arr = _pixels(kind, src_h, src_w)
        path = _write(tmp_path, kind, arr)
        if kind == "float32":  # float data reaches datasets as arrays, not image files
            stored = resize_image(arr, h, w, mode, rng=seeded_rng(7, str(path)))
        else:
            stored = load_resized(str(path), str(path), channels=channels, width=w, height=h, resize_mode=mode, seed=7)
        served = prepare_image(
            read_image(path), (h, w, channels), stored.dtype.name, mode, rng=seeded_rng(7, str(path))
        )
        assert served.dtype == stored.dtype and served.shape == stored.shape == (h, w, channels)
        assert np.array_equal(served, stored), (mode, kind, channels, src_h, src_w, h, w)
        default = prepare_image(read_image(path), (h, w, channels), stored.dtype.name, mode)
        plan = resize_plan(src_h, src_w, h, w, mode)
        assert np.array_equal(_outside_noise(default, plan), _outside_noise(stored, plan))


def test_uint16_noise_spans_the_16_bit_range():
    arr = _pixels("uint16", 10, 40)
    out = prepare_image(arr[:, :, None], (20, 20, 1), "uint16", "fill", rng=np.random.default_rng(1))
    plan = resize_plan(10, 40, 20, 20, "fill")
    assert plan.pad_y > 0 and out[: plan.pad_y].max() > 255


@pytest.mark.slow
def test_serving_signature_resize_within_one_level():
    """The SavedModel resizes with ``tf.image.resize`` (bilinear, antialiased): within 1 level of Pillow's.

    The export's signature implements ``squash``; on random images (the worst case for
    rounding) every pixel is within 1.0 intensity level of the dataset path before
    normalization (measured max 0.97, mean 0.28 levels of 255).
    """
    import tensorflow as tf

    from digits_core.resize import resize_image

    for src_h, src_w, h, w in SIZES + [(64, 48, 28, 28), (13, 9, 28, 28)]:
        for kind in ("gray", "rgb", "uint16"):
            arr = _pixels(kind, src_h, src_w)
            arr = arr[:, :, None] if arr.ndim == 2 else arr
            ours = resize_image(arr, h, w, "squash").astype(np.float32)
            theirs = tf.image.resize(tf.cast(arr[None], tf.float32), (h, w), method="bilinear", antialias=True)[
                0
            ].numpy()
            assert np.abs(ours - theirs).max() < 1.0, (kind, src_h, src_w, h, w)
