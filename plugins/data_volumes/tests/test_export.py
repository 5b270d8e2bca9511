"""``digits export`` of a volume model: the SavedModel runs the sliding window itself, and matches ``digits infer``.

Uses the session's trained ``unet3d`` (``trained`` in conftest.py): no training of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def test_volume_savedmodel_runs_the_sliding_window_and_matches_digits_infer(trained, tmp_path):
    from digits_core.cli import main

    jobs, _, model = trained
    out = tmp_path / "volume.tar.gz"
    assert main(["--jobs-dir", str(jobs), "export", "--model", model.name, "--out", str(out)]) == 0
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    (top,) = (tmp_path / "x").iterdir()
    parity = json.loads((top / "parity.json").read_text())
    info = json.loads((model / "model.json").read_text())
    assert parity["passed"] is True and parity["inputs"] == info["val_count"] >= 1
    assert parity["mask_iou"] >= 0.99 and parity["voxel_agreement"] >= 0.99 and parity["max_abs_diff"] < 1e-3
    assert parity["tolerance"] == pytest.approx(2e-3) and parity["failed_checks"] == []  # probabilities bounded
    exported = json.loads((top / "info.json").read_text())
    assert exported["kind"] == "volume" and exported["volume"]["patch"] == info["volume"]["patch"]
    assert (top / "serving" / model.name / str(info["volume"]["epochs"]) / "saved_model.pb").is_file()

    # A volume bigger than the patch in every axis and of odd sizes: many overlapping tiles, edge padding, the
    # last tile flush with the far edge. The SavedModel runs in a process that imports only TensorFlow.
    from digits_core.datasets.volumes import VolumeStageReader
    from digits_core.engine.volume_loop import predict_volume

    reader = VolumeStageReader(Path(info["dataset_path"]) / "val")
    case = reader.case(0)[0].array.astype(np.float32)
    reader.close()
    big = np.concatenate([case, case[::-1]], axis=0)[:23]
    big = np.concatenate([big, big[:, ::-1]], axis=1)[:, :37]
    big = np.concatenate([big, big[:, :, ::-1]], axis=2)[:, :, :41]
    np.save(tmp_path / "big.npy", big)
    script = (
        "import sys, numpy as np, tensorflow as tf\n"
        "serve = tf.saved_model.load(sys.argv[1]).signatures['serving_default']\n"
        "out = serve(images=tf.constant(np.load(sys.argv[2])[None]))\n"
        "np.save(sys.argv[3], out['probabilities'].numpy()[0]); assert out['classes'].dtype == tf.uint8\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(top / "saved_model"),
            str(tmp_path / "big.npy"),
            str(tmp_path / "probs.npy"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import keras

    config = info["volume"]
    reference = predict_volume(
        keras.models.load_model(model / "model.keras", compile=False),
        big,
        "unet3d",
        config["patch"],
        info["num_outputs"],
        overlap=config["overlap"],
    )
    got = np.load(tmp_path / "probs.npy")
    assert got.shape == reference.shape == big.shape[:3] + (info["num_outputs"],)
    assert np.abs(got - reference).max() < 1e-3
    assert np.mean(np.argmax(got, -1) == np.argmax(reference, -1)) >= 0.999


def test_volume_export_names_the_formats_it_can_write(trained, tmp_path):
    from digits_core.errors import InferenceError
    from digits_core.inference.export import export_model

    jobs, _, model = trained
    for fmt in ("onnx", "tflite"):
        with pytest.raises(InferenceError, match=r"volume model \(unet3d\).*savedmodel.*keras .*, not " + fmt):
            export_model(model.name, tmp_path / f"v-{fmt}.tar.gz", format=fmt, jobs_dir=jobs)
    assert not list(tmp_path.iterdir())
    keras_export = export_model(model.name, tmp_path / "v.tar.gz", format="keras", jobs_dir=jobs)
    with tarfile.open(keras_export) as tar:
        names = {m.name.split("/", 1)[-1] for m in tar.getmembers()}
    assert {"model.keras", "info.json", "labels.txt"} <= names and "parity.json" not in names
