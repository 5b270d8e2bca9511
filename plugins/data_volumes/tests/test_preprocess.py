"""Intensity normalisation works in one float32 copy, changed in place: same values as the textbook formulas."""

from __future__ import annotations

import numpy as np
import pytest

from digits_core import Volume
from digits_data_volumes.preprocess import normalize


def _volume(dtype=np.int16, channels=2):
    rng = np.random.default_rng(3)
    data = rng.normal(300, 80, size=(13, 9, 7, channels)).astype(dtype)
    return Volume(data, (2.0, 1.0, 1.0), np.eye(4), "case")


def test_zscore_per_channel_matches_the_float64_formula_and_leaves_the_input_alone():
    volume = _volume()
    before = volume.array.copy()
    out = normalize(volume, "zscore").array
    reference = volume.array.astype(np.float64)
    reference = (reference - reference.mean(axis=(0, 1, 2))) / reference.std(axis=(0, 1, 2))
    assert out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(volume.array, before)  # the source volume is not changed in place


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_ct_window_clips_and_scales_to_0_1(dtype):
    volume = _volume(dtype, channels=1)
    before = volume.array.copy()
    out = normalize(volume, "ct-window", window=(250.0, 350.0)).array
    reference = (np.clip(volume.array.astype(np.float64), 250, 350) - 250) / 100
    np.testing.assert_allclose(out, reference, rtol=1e-6, atol=1e-6)
    assert out.min() == 0.0 and out.max() == 1.0
    np.testing.assert_array_equal(volume.array, before)
