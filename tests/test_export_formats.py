"""Every export format of every task, run in its own runtime, against ``digits infer`` (real TensorFlow).

Tiny models trained once per module: a LeNet on class folders of odd-sized
images (resize ``half_crop``), a U-Net on synthetic LV images, a regression
network, an image-to-image network on image pairs (resize ``fill``) and a
``detectnet`` on synthetic KITTI boxes (resize ``crop``). Each export runs in
a subprocess that imports only its runtime (onnxruntime, the TFLite
interpreter, TensorFlow's SavedModel loader, Keras), and its parity report
must pass: top-1 agreement 100 %, mask IoU ≥ 0.99, boxes matched, outputs
within tolerance.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from digits_core import registry
from digits_core.inference.export import EXPORT_DIR

pytestmark = pytest.mark.slow
SAMPLE = 3


def _class_folders(root, rng):
    for c, colour in enumerate([(220, 40, 40), (40, 220, 40), (40, 40, 220)]):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(10):
            h, w = int(rng.integers(13, 31)), int(rng.integers(13, 31))
            img = rng.normal(60, 20, (h, w, 3))
            img[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = colour
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(root / f"c{c}" / f"{i}.png")


def _pairs(root, rng):
    for folder in ("noisy", "clean"):
        (root / folder).mkdir(parents=True)
    for i in range(12):
        clean = np.zeros((18, 14, 3), np.uint8)
        clean[4 + i % 6 : 10 + i % 6, 3:11] = (200, 120, 40)
        noisy = np.clip(clean + rng.normal(0, 25, clean.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(root / "noisy" / f"{i:02d}.png")
        Image.fromarray(clean).save(root / "clean" / f"{i:02d}.png")


# A custom network with an op that neither tf2onnx nor TFLite's builtin ops have.
ODD_NET = """
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="export_odd_net")
class BesselLayer(keras.layers.Layer):
    def call(self, x):
        return tf.math.bessel_i1e(x)


def build_model(input_shape, num_outputs, **params):
    inputs = keras.Input(input_shape)
    x = BesselLayer(name="bessel")(keras.layers.Rescaling(1 / 255.0)(inputs))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_outputs, activation="softmax")(x))
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from synthetic_plugins import SyntheticLV, SyntheticRegression

    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_images import synth_detection

    root = tmp_path_factory.mktemp("export-formats")
    jobs = root / "jobs"
    rng = np.random.default_rng(0)
    _class_folders(root / "classes", rng)
    _pairs(root / "pairs", rng)
    synth_detection.generate(str(root / "synth"), images=24, val_images=8, size=48, seed=3)
    s = root / "synth"
    registry.register(SyntheticLV)
    registry.register(SyntheticRegression)
    try:
        lv = create_dataset("synthetic-lv", {"count": 12, "val_count": 6, "size": 24}, workers=1, jobs_dir=jobs)
        reg = create_dataset(
            "synthetic-regression", {"count": 24, "val_count": 6, "size": 16}, workers=1, jobs_dir=jobs
        )
    finally:
        registry.unregister(SyntheticLV)
        registry.unregister(SyntheticRegression)
    classes = create_dataset(
        "image-classification",
        {"folder": str(root / "classes"), "width": 16, "height": 16, "resize_mode": "half_crop", "val_percent": 25},
        workers=1,
        jobs_dir=jobs,
    )
    pairs = create_dataset(
        "image-processing",
        {
            "feature_folder": str(root / "pairs" / "noisy"),
            "label_folder": str(root / "pairs" / "clean"),
            "width": 16,
            "height": 16,
            "resize_mode": "fill",
            "val_percent": 50,
        },
        workers=1,
        jobs_dir=jobs,
    )
    boxes = create_dataset(
        "object-detection",
        {
            "train_image_folder": str(s / "train" / "images"),
            "train_label_folder": str(s / "train" / "labels"),
            "val_image_folder": str(s / "val" / "images"),
            "val_label_folder": str(s / "val" / "labels"),
            "custom_classes": synth_detection.CLASS_MAPPING,
            "width": 48,
            "height": 32,
            "resize_mode": "crop",
        },
        workers=1,
        jobs_dir=jobs,
    )
    return jobs, {
        "lenet": train(classes.id, "lenet", name="lenet", epochs=1, batch_size=8, jobs_dir=jobs, seed=0),
        "unet": train(lv.id, "unet", name="unet", epochs=1, batch_size=6, jobs_dir=jobs, seed=0),
        "regression": train(reg.id, None, name="reg", epochs=1, batch_size=8, jobs_dir=jobs, seed=0),
        "image2image": train(pairs.id, None, name="i2i", epochs=1, batch_size=4, jobs_dir=jobs, loss="mae", seed=0),
        "detectnet": train(boxes.id, None, name="det", epochs=1, batch_size=8, jobs_dir=jobs, seed=0),
        "odd": train(
            classes.id,
            str(_write(root / "odd_net.py", ODD_NET)),
            name="odd",
            epochs=1,
            batch_size=8,
            jobs_dir=jobs,
            seed=0,
        ),
    }


def _write(path, text):
    path.write_text(text)
    return path


def _export(jobs, job, tmp_path, fmt, **kwargs):
    from digits_core.inference import export_model

    archive = export_model(
        job.id, tmp_path / f"{fmt}.tar.gz", format=fmt, parity_sample=SAMPLE, jobs_dir=jobs, **kwargs
    )
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / fmt, filter="tar")
    (folder,) = (tmp_path / fmt).iterdir()
    return folder, json.loads((folder / "parity.json").read_text())


# Format x task: every format on LeNet; each other task in at least three formats, chosen so each distinct
# path runs: the float64 graph in TensorFlow (savedmodel) and in onnxruntime (onnx), the float32 graph (tflite),
# and the bare network (keras: the same path for every task but detection, whose raw output maps are compared
# with the network's own). detectnet's SavedModel is test_savedmodel_has_the_tf_serving_layout_... below.
# Not run, as they repeat a path above: unet/regression/image-to-image keras, regression/image-to-image savedmodel.
# Resize modes: LeNet half_crop, image-to-image fill, detectnet crop, U-Net and regression squash; every parity
# input is also fed stretched to an odd size, so each mode runs in the export's graph (every mode x dtype x odd
# size against resize_image: tests/test_export_preprocessing.py).
CASES = [
    ("lenet", "savedmodel"),
    ("lenet", "onnx"),
    ("lenet", "tflite"),
    ("lenet", "keras"),
    ("unet", "savedmodel"),
    ("unet", "onnx"),
    ("unet", "tflite"),
    ("regression", "onnx"),
    ("regression", "tflite"),
    ("image2image", "onnx"),
    ("image2image", "tflite"),
    ("detectnet", "onnx"),
    ("detectnet", "tflite"),
    ("detectnet", "keras"),
]


@pytest.mark.parametrize("network,fmt", CASES)
def test_export_runs_in_its_runtime_and_matches_digits_infer(models, tmp_path, network, fmt):
    jobs, trained = models
    job = trained[network]
    folder, report = _export(jobs, job, tmp_path, fmt)
    assert report["passed"] is True, report
    assert report["inputs"] == 2 * SAMPLE and report["reference"] == "digits infer"
    task = json.loads((folder / "info.json").read_text())["task"]
    if task == "classification":
        assert report["top1_agreement"] == 1.0 and report["max_abs_diff"] < 1e-4
    elif task == "segmentation":
        assert report["mask_iou"] >= 0.99
    elif task == "detection" and fmt == "keras":  # the bare network: its output maps, not boxes
        assert report["compared"] == "raw network output maps" and report["max_abs_diff"] <= 1e-4
    elif task == "detection":
        assert report["boxes_matched"] >= 0.99 and report["reference_boxes"] >= 0
    else:
        assert report["max_abs_diff"] <= report["tolerance"]


def test_savedmodel_has_the_tf_serving_layout_and_detection_boxes_in_input_pixels(models, tmp_path):
    """tensorflow_model_server's layout (<name>/<version>/saved_model.pb), loaded by plain TensorFlow."""
    from digits_core.inference import infer

    jobs, trained = models
    job = trained["detectnet"]
    folder, report = _export(jobs, job, tmp_path, "savedmodel")
    assert report["passed"] is True
    info = json.loads((folder / "info.json").read_text())
    assert (folder / info["tf_serving"]["base_path"] / "1" / "saved_model.pb").is_file()
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (53, 71, 3)).astype(np.uint8)
    image[10:30, 20:50] = 250
    np.save(tmp_path / "image.npy", image)
    code = (
        "import json, sys, numpy as np, tensorflow as tf\n"
        f"serve = tf.saved_model.load({str(folder / info['tf_serving']['base_path'] / '1')!r})"
        ".signatures['serving_default']\n"
        f"out = serve(images=tf.constant(np.load({str(tmp_path / 'image.npy')!r})[None]))\n"
        "print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}))\n"
        "print(any(m.startswith('digits') for m in sys.modules))\n"
    )
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    lines = plain.stdout.strip().splitlines()
    out, imported = json.loads(lines[-2]), lines[-1]
    assert imported == "False"
    expected = infer(job.id, [("x", image)], jobs_dir=jobs).samples[0].detections
    kept = [k for k, score in enumerate(out["scores"][0]) if score > 0]
    assert len(kept) == len(expected)
    for k, det in zip(kept, expected):
        assert out["classes"][0][k] == det["class_id"]
        assert np.allclose(out["boxes"][0][k], det["box"], atol=0.05)
        assert max(out["boxes"][0][k][0::2]) <= 71 and max(out["boxes"][0][k][1::2]) <= 53


def test_tflite_quantized_exports_and_errors(models, tmp_path):
    from digits_core.errors import InferenceError
    from digits_core.inference import export_model

    jobs, trained = models
    folder, report = _export(jobs, trained["lenet"], tmp_path, "tflite", quantize="dynamic")
    assert json.loads((folder / "info.json").read_text())["quantize"] == "dynamic"
    assert report["top1_agreement"] >= 0.99
    with pytest.raises(InferenceError, match="applies to the tflite format"):
        export_model(trained["lenet"].id, tmp_path / "x.tar.gz", format="onnx", quantize="dynamic", jobs_dir=jobs)


def test_a_failed_parity_report_fails_the_export_unless_allowed(models, tmp_path, monkeypatch):
    from digits_core.errors import InferenceError
    from digits_core.inference import export_model, export_parity

    jobs, trained = models
    real = export_parity.run_runtime

    def off_by_one(fmt, folder, arrays, timeout=600):  # an export whose runtime disagrees on one input
        outputs = real(fmt, folder, arrays, timeout)
        outputs[3]["outputs"] = outputs[3]["outputs"] + 1.0  # whatever its shape (a batch of one), every value off
        return outputs

    monkeypatch.setattr(export_parity, "run_runtime", off_by_one)
    job = trained["regression"]
    # An earlier test exported this model to onnx: without its cached export, this one converts and compares anew.
    shutil.rmtree(Path(job.path) / EXPORT_DIR, ignore_errors=True)
    # input 3 of 2 x SAMPLE (3): the first validation image stretched to 19x21 (synthetic 16x16 images)
    with pytest.raises(InferenceError, match=r"worst input: val\[0\] at 19x21"):
        export_model(job.id, tmp_path / "bad.tar.gz", format="onnx", parity_sample=SAMPLE, jobs_dir=jobs)
    assert not (tmp_path / "bad.tar.gz").exists()
    archive = export_model(
        job.id, tmp_path / "kept.tar.gz", format="onnx", parity_sample=SAMPLE, allow_mismatch=True, jobs_dir=jobs
    )
    assert archive.is_file()


@pytest.mark.parametrize("fmt,converter", [("onnx", "tf2onnx"), ("tflite", "The TFLite converter")])
def test_a_custom_layer_the_converter_lacks_is_named(models, tmp_path, fmt, converter):
    """tf2onnx writes an op it cannot translate into the file and carries on: the export names op and layer."""
    from digits_core.errors import InferenceError
    from digits_core.inference import export_model

    jobs, trained = models
    job = trained["odd"]
    message = (
        f'{converter} cannot convert this model: it has no equivalent for the op BesselI1e in layer "bessel". '
        "Export it as savedmodel or keras instead, or replace that layer in the network."
    )
    with pytest.raises(InferenceError) as failed:
        export_model(job.id, tmp_path / "odd.tar.gz", format=fmt, parity_sample=SAMPLE, jobs_dir=jobs)
    assert str(failed.value) == message
    assert not (tmp_path / "odd.tar.gz").exists()
    assert not list((Path(job.path) / EXPORT_DIR).glob(f"*-{fmt}"))  # nothing half-made is kept as an export
