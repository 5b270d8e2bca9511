"""The backbones as networks: declared without TensorFlow, built from keras.applications, any channel count."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from digits_networks_backbones import BACKBONES, make_network
from digits_networks_backbones.build import adapt_input_conv

NAMES = ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_v2_b0", "resnet50_v2", "convnext_tiny")


def test_listing_networks_declares_metadata_without_tensorflow():
    code = (
        "import sys\n"
        "from digits_core.engine.networks import list_networks\n"
        "specs = {s.name: s for s in list_networks()}\n"
        f"for name in {NAMES!r}:\n"
        "    s = specs[name]\n"
        "    print(name, s.source, ','.join(s.tasks), s.min_size, ','.join(s.weights), s.defaults['weights'])\n"
        "print('TF' if 'tensorflow' in sys.modules or 'keras' in sys.modules else 'NO-TF')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    for name in NAMES:
        assert f"{name} plugin classification,regression,segmentation,detection 32 imagenet imagenet" in out
    assert out.strip().endswith("NO-TF")


def conv(image: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """A 'valid' 2-D convolution (cross-correlation) of H×W×C by h×w×C×O, in numpy."""
    h, w = kernel.shape[:2]
    rows, cols = image.shape[0] - h + 1, image.shape[1] - w + 1
    out = np.zeros((rows, cols, kernel.shape[3]))
    for i in range(rows):
        for j in range(cols):
            out[i, j] = np.tensordot(image[i : i + h, j : j + w], kernel, axes=([0, 1, 2], [0, 1, 2]))
    return out


@pytest.mark.parametrize("channels", [1, 2, 5, 6])
def test_first_convolution_adapted_as_timm_does(channels):
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(3, 3, 3, 4)).astype(np.float32)
    adapted = adapt_input_conv(kernel, channels)
    assert adapted.shape == (3, 3, channels, 4)
    if channels == 1:
        np.testing.assert_allclose(adapted[:, :, 0], kernel.sum(axis=2), rtol=1e-6)
    else:  # repeated along the input axis and scaled by 3/N
        np.testing.assert_allclose(adapted[:, :, 0], kernel[:, :, 0] * 3 / channels, rtol=1e-6)
        np.testing.assert_allclose(
            adapted[:, :, channels - 1], kernel[:, :, (channels - 1) % 3] * 3 / channels, rtol=1e-6
        )
    if channels % 3 and channels != 1:
        return  # timm's rule is exact for 1 channel and multiples of 3; an approximation otherwise
    grey = rng.uniform(size=(6, 6, 1))
    # an image whose channels are all equal answers as the RGB image of that grey does
    np.testing.assert_allclose(
        conv(np.repeat(grey, channels, axis=2), adapted), conv(np.repeat(grey, 3, axis=2), kernel), rtol=1e-5
    )
    assert adapt_input_conv(kernel, 3) is not None and np.array_equal(adapt_input_conv(kernel, 3), kernel)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_backbone_builds_for_both_tasks_and_any_channels(name):
    build = make_network(BACKBONES[name])
    x = np.random.default_rng(1).uniform(0, 255, size=(2, 32, 32, 5)).astype(np.float32)
    model = build((32, 32, 5), 3, task="classification")
    probabilities = np.asarray(model(x, training=False))
    assert probabilities.shape == (2, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert model.get_layer("backbone").count_params() > 0.9 * BACKBONES[name].parameters
    regression = build((32, 32, 1), 2, task="regression", input_size=48)
    assert regression.get_layer("backbone").inputs[0].shape[1:] == (48, 48, 1)
    assert np.asarray(regression(x[..., :1], training=False)).shape == (2, 2)
    segmentation = build((64, 48, 5), 4, task="segmentation")
    masks = np.asarray(
        segmentation(np.random.default_rng(2).uniform(0, 255, size=(2, 64, 48, 5)).astype(np.float32), training=False)
    )
    assert masks.shape == (2, 64, 48, 4)
    np.testing.assert_allclose(masks.sum(axis=-1), 1.0, rtol=1e-5)
    assert len(segmentation.get_layer("backbone").outputs) >= 4  # stages at strides 2 (or 4) to 32


@pytest.mark.slow  # real training: 40 s in make test-fast, which must stay under a minute
def test_backbone_schedule_freezes_then_slows_and_refuses_several_replicas():
    import keras

    from digits_core import FormValidationError
    from digits_core.engine.finetune import make_schedule
    from digits_core.engine.options import TrainingOptions

    inputs = keras.Input((4,))
    encoder = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="backbone")
    model = keras.Model(inputs, keras.layers.Dense(2, name="head")(encoder(inputs)))
    opts = TrainingOptions.from_kwargs(weights="imagenet", freeze_epochs=2, backbone_lr_mult=0.25)
    schedule = make_schedule(model, opts)
    assert [v.path for v in schedule.variables] == [v.path for v in encoder.trainable_variables]
    assert [schedule.factor(e) for e in (0, 1, 2, 5)] == [0.0, 0.0, 0.25, 0.25]
    schedule.callback().on_epoch_begin(2)
    assert float(schedule.scale.numpy()) == 0.25
    assert make_schedule(model, opts, start_epoch=3).scale.numpy() == np.float32(0.25)  # a resumed run
    assert make_schedule(model, TrainingOptions.from_kwargs(weights="none", freeze_epochs=2)) is None
    assert make_schedule(model, TrainingOptions.from_kwargs(weights="imagenet")) is None  # nothing to change
    with pytest.raises(FormValidationError, match="freeze_epochs 0 and backbone_lr_mult 1"):
        make_schedule(model, opts, replicas=2)


def test_digits_networks_lists_tasks_input_limit_and_weights(capsys):
    import json

    from digits_core.cli import main

    assert main(["networks", "--json"]) == 0
    listed = {n["name"]: n for n in json.loads(capsys.readouterr().out)}
    for name in NAMES:
        assert listed[name]["tasks"] == ["classification", "regression", "segmentation", "detection"]
        assert (listed[name]["min_size"], listed[name]["weights"]) == (32, ["imagenet"])
    assert (listed["lenet"]["min_size"], listed["lenet"]["weights"]) == (0, [])
