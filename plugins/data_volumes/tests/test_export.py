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


def test_volume_model_exports_from_its_page_with_a_parity_verdict(trained):
    """The model page's Export panel offers a volume model what ``digits export`` does (issue 43 item 4)."""
    import re

    from digits_core.web import create_app

    jobs, _, model = trained
    client = create_app(jobs, start_scheduler=False, testing=True).test_client()
    html = client.get(f"/models/{model.name}").get_data(as_text=True)
    panel = html[html.index('id="export"') :]
    menu = re.search(r'<select[^>]*id="export-format".*?</select>', panel, re.S).group(0)
    assert re.findall(r'<option value="([a-z]+)"', menu) == ["savedmodel", "keras"]
    assert 'id="export-quantize"' not in panel and 'id="export-none"' not in panel

    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    as_json = {"Accept": "application/json"}
    refused = client.post(f"/models/{model.name}/export", data={"format": "onnx", "csrf_token": token}, headers=as_json)
    assert refused.status_code == 400 and "savedmodel or keras" in refused.get_data(as_text=True)

    done = client.post(
        f"/models/{model.name}/export", data={"format": "savedmodel", "csrf_token": token}, headers=as_json
    )
    assert done.status_code == 200, done.get_data(as_text=True)
    answer = done.get_json()
    assert answer["parity"]["passed"] is True and answer["parity"]["mask_iou"] >= 0.99
    page = client.get(f"/models/{model.name}").get_data(as_text=True)
    row = re.search(rf'<tr data-export="{re.escape(answer["name"])}".*?</tr>', page, re.S).group(0)
    assert "passed" in row and "mask IoU" in row
    archive = client.get(answer["download"])
    assert archive.status_code == 200 and archive.data[:2] == b"\x1f\x8b"  # a gzip archive
