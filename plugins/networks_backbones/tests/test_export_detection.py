"""Every backbone's detector (``detectnet``'s heads) exports to ONNX and TFLite with a passing parity report.

The report on a detector compares boxes: ``digits infer``'s boxes on the parity inputs, found by the
export with the same class at IoU ≥ 0.9 and the same score, and no extra ones. A detector that finds no
box compares nothing and fails (``reference_boxes: 0``), so each backbone's detector here is trained
until it finds the one bright square of each 32×32 image: 1,200 steps (4,800 images, batch 4, one
epoch, Adam at 0.001 stepped down at 75 and 92 % as ``detectnet``) of the heads on the backbone
started from a weights file, as a user starts from ImageNet's. The file is a real Keras application's (random initial
weights, saved by the test); loaded weights keep the backbone's BatchNorm in inference mode, so only
the heads' BatchNorm statistics have to catch up with training. With half the steps, a network that
training mode scores above 0.9 scored its boxes 0.2 to 0.6 in inference mode, around ``digits
infer``'s 0.3 (MobileNetV3-Large found none on one run); from ``weights none`` every BatchNorm lags
and 120 steps found nothing.

``make test`` runs MobileNetV3-Small to ONNX (about 80 s on 2 cores); the other nine cells run with
``DIGITS_EXPORT_MATRIX=all``::

    DIGITS_EXPORT_MATRIX=all .venv/bin/python -m pytest plugins/networks_backbones/tests/test_export_detection.py

(the figures of a whole run are in docs/backbones.md, "Exports").
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest
from digits_networks_backbones import BACKBONES

from digits_core.engine import train
from digits_core.inference.export import export_model

MATRIX_ENV = "DIGITS_EXPORT_MATRIX"
DEFAULT_CELLS = {("mobilenet_v3_small", "onnx")}
#: Training images (one epoch at batch 4: 1,200 steps), validation images, and the parity report's share of
#: them (each compared as stored and stretched).
IMAGES, VAL_IMAGES, PARITY_SAMPLE = 4800, 16, 4


def _cells():
    full = os.environ.get(MATRIX_ENV) == "all"
    for name in sorted(BACKBONES):
        for fmt in ("onnx", "tflite"):
            skip = not full and (name, fmt) not in DEFAULT_CELLS
            reason = f"the whole detection matrix runs with {MATRIX_ENV}=all"
            yield pytest.param(name, fmt, marks=[pytest.mark.skip(reason=reason)] if skip else [])


def _application_weights(name: str, folder) -> str:
    """A weights file of backbone ``name``'s Keras application (random initial weights), saved by Keras."""
    import keras

    backbone = BACKBONES[name]
    make = getattr(keras.applications, backbone.app)
    app = make(include_top=False, weights=None, input_shape=(32, 32, 3), **backbone.app_kwargs)
    path = folder / f"{name}.weights.h5"
    app.save_weights(str(path))
    return str(path)


@pytest.fixture(scope="module")
def detectors(module_detection_dataset):
    """``(jobs folder, get(name) -> the trained detector job of backbone name)``; each trains once."""
    jobs, dataset = module_detection_dataset(IMAGES, VAL_IMAGES)
    cache: dict = {}

    def get(name):
        if name not in cache:
            weights = _application_weights(name, jobs)
            options = {"epochs": 1, "learning_rate": 0.001, "aug_scale": 0.0, "seed": 0}  # the rate measured here
            cache[name] = train(dataset, name, jobs_dir=jobs, weights=weights, **options)
        return cache[name]

    return jobs, get


@pytest.mark.slow
@pytest.mark.parametrize("name, fmt", list(_cells()))
def test_backbone_detector_exports_with_matched_boxes(name, fmt, detectors):
    jobs, get = detectors
    job = get(name)
    assert json.loads((Path(job.path) / "model.json").read_text())["task"] == "detection"
    archive = export_model(
        job.id, jobs / f"{name}.{fmt}.tar.gz", format=fmt, parity_sample=PARITY_SAMPLE, jobs_dir=jobs
    )
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        report = json.load(tar.extractfile(next(n for n in names if n.endswith("parity.json"))))
    figures = ("reference_boxes", "boxes_matched", "extra_boxes", "max_score_diff", "tolerance")
    print(name, fmt, {k: report.get(k) for k in figures})  # the figures of docs/backbones.md (pytest -rP)
    assert any(n.endswith(f"model.{fmt}") for n in names)
    assert report["passed"] is True and report["format"] == fmt and report["inputs"] == 2 * PARITY_SAMPLE, report
    # boxes were compared: digits infer found the square in most inputs, and the export found each of them
    assert report["reference_boxes"] >= PARITY_SAMPLE and report["boxes_matched"] >= 0.99, report
    assert report["extra_boxes"] == 0 and report["max_score_diff"] <= report["tolerance"], report
