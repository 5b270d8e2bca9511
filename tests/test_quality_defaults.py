"""The defaults behind the quality floors, checked without TensorFlow: the ``scale`` option and the
BatchNormalization momentum fitted to the steps per epoch."""

from __future__ import annotations

import numpy as np
import pytest

from digits_core.engine.batchnorm import MAX_MOMENTUM, MIN_MOMENTUM, STALE_AFTER_EPOCH, momentum_for
from digits_core.engine.options import TrainingOptions
from digits_core.engine.preprocessing import resolve_scale
from digits_core.errors import FormValidationError


@pytest.mark.parametrize("steps", [3, 10, 25, 100])
def test_batchnorm_statistics_follow_within_an_epoch(steps):
    momentum = momentum_for(steps)
    assert momentum**steps == pytest.approx(STALE_AFTER_EPOCH)  # an epoch later, 10 % of the old statistics
    assert momentum_for(steps + 1) > momentum


def test_batchnorm_momentum_bounds():
    assert momentum_for(1) == MIN_MOMENTUM and momentum_for(0) == MIN_MOMENTUM
    assert momentum_for(100_000) == MAX_MOMENTUM == 0.99  # long epochs: Keras's default


def test_scale_option_values():
    assert TrainingOptions.from_kwargs().scale == "auto"
    assert TrainingOptions.from_kwargs(scale="None").scale == "none"
    assert TrainingOptions.from_kwargs(scale="0.5").scale == 0.5
    for bad in ("0", "-1", "nan", "inf", "pixels"):
        with pytest.raises(FormValidationError) as info:
            TrainingOptions.from_kwargs(scale=bad)
        assert "scale" in info.value.errors and "none" in info.value.errors["scale"][0]


def test_scale_option_resolves_per_dtype():
    sample = np.array([[0, 10, 20, 30]], np.uint8)
    assert resolve_scale("auto", np.uint8, sample, 0.0) == pytest.approx(1 / 255)  # DIGITS's rule for pixels
    assert resolve_scale("none", np.uint8, sample, 0.0) == 1.0  # character ids train as themselves
    assert resolve_scale(0.25, np.uint8, sample, 0.0) == 0.25
    wide = np.array([0.0, 2.0, 4.0, 6.0], np.float32)
    assert resolve_scale("auto", np.float32, wide, 3.0) == pytest.approx(1 / np.std(wide))


def test_detection_validation_recall_and_precision():
    from digits_core.engine.detection.task import recall_precision

    gt = np.array([[1, 10, 10, 30, 30], [2, 40, 40, 60, 60], [0, 0, 0, 5, 5]], np.float64)  # 2 objects + dontcare
    pred = np.array(
        [
            [1, 0.9, 11, 11, 30, 30],  # matches the class-1 box
            [2, 0.8, 0, 30, 20, 50],  # wrong place: a false positive
            [2, 0.1, 40, 40, 60, 60],
        ]
    )  # right, but below the reporting score
    figures = recall_precision([pred], [gt])
    assert figures == {"val_recall50": 0.5, "val_precision50": 0.5}
    assert recall_precision([pred], [gt], min_score=0.05) == {"val_recall50": 1.0, "val_precision50": 2 / 3}
    assert recall_precision([pred[:0]], [gt]) == {"val_recall50": 0.0, "val_precision50": 0.0}
