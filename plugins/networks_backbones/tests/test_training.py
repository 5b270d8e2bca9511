"""Real training runs of a backbone: ImageNet-style weights from Keras's cache into a 1-channel input,
frozen for an epoch (BatchNorm statistics untouched), then fine-tuned; inputs below the minimum refused.

The weights file is a real Keras application's file made here (MobileNetV3-Small without its top, built
with random weights and saved under Keras's own file name into ``$KERAS_HOME/models``); the test network
declares that file's hash, as the bundled networks declare Keras's published hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from digits_networks_backbones import BACKBONES, make_network

from digits_core import FormValidationError, hookimpl, registry
from digits_core.cli import main
from digits_core.engine import train
from digits_core.engine.batchnorm import momentum_for
from digits_core.engine.snapshots import load_snapshot
from digits_core.engine.weights import file_digest, resolve_weights
from digits_core.inference.export import export_model

MNV3 = BACKBONES["mobilenet_v3_small"]


class _Networks:
    """A throwaway network plugin: one backbone with the test's own weights table."""

    def __init__(self, backbone):
        self.backbone = backbone

    @hookimpl
    def digits_register_networks(self):
        return {self.backbone.name: make_network(self.backbone)}


@pytest.fixture
def imagenet_file(tmp_path, monkeypatch):
    """A real MobileNetV3-Small (no top) weights file in an empty Keras cache; yields (path, source model)."""
    import keras

    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setenv("DIGITS_ZOO", str(tmp_path / "zoo"))
    monkeypatch.setenv("DIGITS_OFFLINE", "1")
    keras.utils.set_random_seed(7)
    app = keras.applications.MobileNetV3Small(
        include_top=False, weights=None, input_shape=(32, 32, 3), include_preprocessing=False
    )
    for layer in app.layers:  # BatchNorm statistics unlike a fresh layer's, so a change would show
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.moving_mean.assign(np.full(layer.moving_mean.shape, 0.1, np.float32))
            layer.moving_variance.assign(np.full(layer.moving_variance.shape, 2.0, np.float32))
    path = tmp_path / "keras" / "models" / MNV3.weights_file
    path.parent.mkdir(parents=True)
    app.save(path)  # Keras's legacy .h5 layout, as its published application files
    return path, app


@pytest.fixture
def test_network(imagenet_file):
    path, _ = imagenet_file
    backbone = dataclasses.replace(MNV3, name="test_mnv3_small", weights_hash=file_digest(path, "md5"))
    plugin = _Networks(backbone)
    registry.register(plugin)
    try:
        yield backbone
    finally:
        registry.unregister(plugin)


@pytest.mark.slow  # real training: 40 s in make test-fast, which must stay under a minute
def test_one_channel_fine_tunes_from_keras_cache_weights(imagenet_file, test_network, tiny_dataset, digits_jobs_dir):
    path, app = imagenet_file
    dataset = tiny_dataset(channels=1, count=16)
    job = train(
        dataset,
        test_network.name,
        jobs_dir=digits_jobs_dir,
        weights="imagenet",
        epochs=2,
        batch_size=8,
        freeze_epochs=1,
        backbone_lr_mult=0.5,
        lr_policy="fixed",
        seed=3,
    )
    assert job.status.value == "Done"
    info = json.loads((Path(job.path) / "model.json").read_text())
    assert info["weights"]["name"] == "imagenet"
    assert info["weights"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info["weights"]["source"] == MNV3.weights_origin
    assert info["options"]["freeze_epochs"] == 1 and info["options"]["backbone_lr_mult"] == 0.5
    start = [v.numpy() for v in app.weights]
    frozen = [v.numpy() for v in load_snapshot(job, 1, jobs_dir=digits_jobs_dir).get_layer("backbone").weights]
    tuned = [v.numpy() for v in load_snapshot(job, 2, jobs_dir=digits_jobs_dir).get_layer("backbone").weights]
    # epoch 1: the backbone is the file's, its first convolution summed over RGB, BatchNorm statistics kept
    np.testing.assert_allclose(frozen[0], start[0].sum(axis=2, keepdims=True), rtol=1e-6)
    for before, after in zip(start[1:], frozen[1:], strict=True):
        np.testing.assert_array_equal(before, after)
    # epoch 2: unfrozen, the kernels learn; BatchNorm stays in inference mode (its statistics do not move)
    moved = [not np.array_equal(a, b) for a, b in zip(frozen, tuned, strict=True)]
    kernels = [i for i, v in enumerate(app.weights) if v.path.endswith("/kernel")]
    assert sum(moved[i] for i in kernels) > len(kernels) // 2  # (the first blocks' ReLUs may pass no gradient)
    names = [v.path for v in app.weights]
    stats = [i for i, name in enumerate(names) if "moving_" in name]
    assert stats and not any(moved[i] for i in stats)
    # the lab publishes the tuned encoder to its zoo, with provenance, and the next network starts from it
    assert main(["zoo", "add", "--from-model", job.id, "--epoch", "2", "--name", "lab", "--license", "CC0-1.0"]) == 0
    entry = json.loads((Path(os.environ["DIGITS_ZOO"]) / "manifest.json").read_text())["entries"]["lab"]
    assert (entry["network"], entry["input_channels"], entry["job"]) == (test_network.name, 1, job.id)
    assert entry["dataset"] == dataset.id and entry["source"] == f"job {job.id} epoch 2.0"
    found = resolve_weights("zoo:lab", test_network.name, test_network.weights_table())
    again = make_network(test_network)((32, 32, 1), 2, weights_file=found.path, weights_channels=found.channels)
    for before, after in zip(tuned, again.get_layer("backbone").weights, strict=True):
        np.testing.assert_array_equal(before, after.numpy())


def test_tampered_cache_file_refused_before_any_job(imagenet_file, test_network, tiny_dataset, digits_jobs_dir):
    path, _ = imagenet_file
    dataset = tiny_dataset(count=4)
    before = sorted(p.name for p in Path(digits_jobs_dir).iterdir())
    with path.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(FormValidationError, match=f"{path.name} has md5 .* expected {test_network.weights_hash}"):
        train(dataset, test_network.name, jobs_dir=digits_jobs_dir, weights="imagenet", epochs=1)
    assert sorted(p.name for p in Path(digits_jobs_dir).iterdir()) == before


def test_input_below_minimum_refused_naming_it(tiny_dataset, digits_jobs_dir):
    dataset = tiny_dataset(size=16, count=4)
    before = sorted(p.name for p in Path(digits_jobs_dir).iterdir())
    with pytest.raises(FormValidationError, match=r"at least 32x32 pixels; the images are 16x16.*input_size=32"):
        train(dataset, "mobilenet_v3_small", jobs_dir=digits_jobs_dir, weights="none", epochs=1)
    with pytest.raises(FormValidationError, match="input_size 24"):
        train(
            dataset, "mobilenet_v3_small", jobs_dir=digits_jobs_dir, weights="none", network_params={"input_size": 24}
        )
    assert sorted(p.name for p in Path(digits_jobs_dir).iterdir()) == before


@pytest.mark.slow
def test_small_regression_images_resized_in_the_graph(tiny_dataset, digits_jobs_dir):
    dataset = tiny_dataset(size=16, count=8, channels=3, regression=True)
    job = train(
        dataset,
        "mobilenet_v3_small",
        jobs_dir=digits_jobs_dir,
        weights="none",
        epochs=1,
        batch_size=4,
        network_params={"input_size": 32},
    )
    info = json.loads((Path(job.path) / "model.json").read_text())
    assert job.status.value == "Done" and info["task"] == "regression" and info["weights"] is None
    assert info["options"]["mean_subtraction"] == "none" and info["options"]["scale"] == "none"
    model = load_snapshot(job, jobs_dir=digits_jobs_dir)
    assert model.get_layer("backbone").inputs[0].shape[1:] == (32, 32, 3)
    assert_export_parity(job, "tflite", digits_jobs_dir)


@pytest.mark.slow
def test_detection_heads_on_a_backbone(tiny_dataset, digits_jobs_dir):
    dataset = tiny_dataset(size=32, count=8, channels=3, detection=True)
    job = train(dataset, "mobilenet_v3_small", jobs_dir=digits_jobs_dir, weights="none", epochs=1)
    info = json.loads((Path(job.path) / "model.json").read_text())
    assert job.status.value == "Done" and info["task"] == "detection"
    assert (info["batch_size"], info["options"]["lr_policy"], info["options"]["augmentation"]["scale"]) == (
        4,
        "multistep",
        0.25,
    )
    assert load_snapshot(job, jobs_dir=digits_jobs_dir).output_shape == (None, 8, 8, 2 + 4)  # stride 4
    names = {json.loads(line)["name"] for line in (Path(job.path) / "metrics.jsonl").read_text().splitlines()}
    assert "val_map50" in names


def assert_export_parity(job, fmt, jobs_dir):
    """Export ``job`` (preprocessing in the graph) and check its parity report against digits infer passed."""
    archive = export_model(
        job.id, Path(jobs_dir) / f"export.{fmt}.tar.gz", format=fmt, parity_sample=4, jobs_dir=jobs_dir
    )
    with tarfile.open(archive) as tar:
        name = next(n for n in tar.getnames() if n.endswith("parity.json"))
        report = json.load(tar.extractfile(name))
    assert report["passed"] and report["format"] == fmt and report["inputs"] > 0, report


@pytest.mark.slow
def test_segmentation_unet_on_the_encoder_stages(tiny_dataset, digits_jobs_dir):
    dataset = tiny_dataset(size=32, count=8, channels=1, segmentation=True)
    job = train(dataset, "mobilenet_v3_small", jobs_dir=digits_jobs_dir, weights="none", epochs=1)
    info = json.loads((Path(job.path) / "model.json").read_text())
    assert job.status.value == "Done" and info["task"] == "segmentation"
    assert (info["batch_size"], info["options"]["lr_policy"]) == (8, "fixed")  # the segmentation defaults
    model = load_snapshot(job, jobs_dir=digits_jobs_dir)
    assert model.output_shape == (None, 32, 32, 2)
    stages = model.get_layer("backbone").outputs
    assert [tuple(s.shape[1:3]) for s in stages] == [(16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]
    assert sum(layer.name.endswith("_concat") for layer in model.layers) == len(stages) - 1  # the skips
    # from random weights, BatchNorm statistics follow training (Keras's MobileNetV3 momentum 0.999 would keep
    # the initial ones for hundreds of steps and validate at chance: the engine fits it to the epoch's steps)
    momenta = {layer.momentum for layer in model._flatten_layers(recursive=True) if hasattr(layer, "moving_variance")}
    assert momenta == {momentum_for(1)}, momenta  # 8 images, batch 8: one step an epoch
    assert_export_parity(job, "onnx", digits_jobs_dir)
