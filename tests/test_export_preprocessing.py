"""The exported models' preprocessing graph gives the pixels ``digits infer`` gives.

:func:`digits_core.inference.export_graph.tf_prepare` (TensorFlow ops, inside
every export) against :func:`digits_core.resize.prepare_array` with the
constant padding inference uses: every resize mode × dtype × channel
conversion × odd size. In float64 (SavedModel, ONNX): uint8 bit-identical,
uint16 within one level on under 1 % of pixels (float32 rounding ties of
Pillow's float path), float data within 1e-6. In float32 (TFLite): within one
level on under 3 % of pixels.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from digits_core.resize import RESIZE_MODES, pad_value, prepare_array, resize_plan

pytestmark = pytest.mark.slow

# src h, w -> h, w: shrink, stretch, mixed, same aspect ratio, already at size, large shrink.
SIZES = [
    (37, 23, 15, 21),
    (23, 37, 17, 17),
    (9, 13, 15, 11),
    (31, 31, 13, 19),
    (15, 21, 15, 21),
    (101, 67, 13, 9),
    (20, 30, 10, 15),
]
KINDS = [
    ("uint8", 3, 3),
    ("uint8", 1, 1),
    ("uint8", 3, 1),
    ("uint8", 1, 3),
    ("uint8", 4, 3),
    ("uint16", 1, 1),
    ("uint16", 1, 3),
    ("uint16", 3, 1),
    ("float32", 1, 1),
    ("float32", 3, 3),
]


def _pixels(dtype: str, h: int, w: int, c: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rng.normal(0, 3, (h, w, c)).astype(np.float32)
    return rng.integers(0, int(np.iinfo(dtype).max) + 1, (h, w, c)).astype(dtype)


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("mode", RESIZE_MODES)
def test_export_graph_matches_resize_image(mode, precision):
    import tensorflow as tf

    from digits_core.inference.export_graph import tf_prepare

    for (dtype, c_in, c), (src_h, src_w, h, w) in itertools.product(KINDS, SIZES):
        arr = _pixels(dtype, src_h, src_w, c_in, src_h * src_w + c_in)
        expected = prepare_array(arr, (h, w, c), dtype, mode, constant_pad=True)
        got = tf_prepare(
            tf.constant(np.stack([arr, arr[::-1]])), (h, w, c), dtype, mode, float_type=tf.as_dtype(precision)
        ).numpy()
        assert got.shape == (2, h, w, c), (mode, dtype, c_in, c, src_h, src_w)
        flipped = prepare_array(arr[::-1], (h, w, c), dtype, mode, constant_pad=True)
        for out, ref in ((got[0], expected), (got[1], flipped)):
            if dtype == "float32":
                tol = 1e-6 if precision == "float64" else 1e-4
                np.testing.assert_allclose(out, ref, rtol=tol, atol=tol, err_msg=str((mode, dtype, src_h, src_w)))
            elif dtype == "uint16" or precision == "float32":
                # Pillow's float path (uint16), or float32 coefficients (TFLite): a rounding tie may flip the last level
                share = 0.01 if precision == "float64" else 0.03
                diff = np.abs(out - ref.astype(np.float32))
                assert diff.max() <= 1 and (diff > 0).mean() < share, (mode, dtype, c_in, c, src_h, src_w, h, w)
            else:
                assert np.array_equal(out, ref.astype(np.float32)), (mode, dtype, c_in, c, src_h, src_w, h, w)


def test_constant_padding_is_mid_grey_and_deterministic():
    arr = _pixels("uint8", 10, 40, 3, 1)
    plan = resize_plan(10, 40, 20, 20, "fill")
    first = prepare_array(arr, (20, 20, 3), "uint8", "fill", constant_pad=True)
    again = prepare_array(arr, (20, 20, 3), "uint8", "fill", constant_pad=True)
    assert plan.pad_y > 0 and np.array_equal(first, again)
    assert (first[: plan.pad_y] == 128).all() and (first[-plan.pad_y :] == 128).all()
    assert pad_value(np.uint16) == 32768 and pad_value(np.float32) == 0
