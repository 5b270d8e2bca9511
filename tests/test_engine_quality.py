"""Quality with default settings on small real-world-like data (slow; run in CI).

* scikit-learn's handwritten digits (1,797 8x8 images) exported to class
  folders and built with the image-classification plugin: LeNet reaches
  >= 0.97 validation accuracy with default settings (how fast it trains is
  measured in ``bench/train_throughput.py``, never asserted here);
* the synthetic Sunnybrook set at 64x64 (real DICOM + contour files from
  ``digits_data_sunnybrook.synth``, built with the image-sunnybrook plugin):
  the default segmentation network (U-Net, Dice + cross-entropy) reaches
  validation Dice >= 0.85.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from digits_core.jobs import JobStatus

pytestmark = pytest.mark.slow


def test_sklearn_digits_lenet_reaches_97_percent(tmp_path):
    from PIL import Image
    from sklearn.datasets import load_digits

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    digits = load_digits()
    root = tmp_path / "digits"
    for i, (image, label) in enumerate(zip(digits.images, digits.target)):
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray((image * 255 / 16).astype(np.uint8)).save(root / str(label) / f"{i:04d}.png")
    jobs = tmp_path / "jobs"
    ds = create_dataset(
        "image-classification",
        {"folder": str(root), "image_type": "grayscale", "width": 8, "height": 8},
        workers=2,
        jobs_dir=jobs,
    )
    job = train(ds.id, "lenet", name="sklearn-digits", jobs_dir=jobs, seed=0)  # default settings otherwise
    info = json.loads((job.path / "model.json").read_text())
    assert job.status is JobStatus.DONE and info["val_count"] > 400  # 25 % held out
    assert info["final_metrics"]["val_accuracy"] >= 0.97, info["final_metrics"]


def test_synthetic_sunnybrook_unet_dice(tmp_path):
    from digits_core.datasets import create_dataset
    from digits_core.engine import read_metrics, train
    from digits_data_sunnybrook.synth import generate

    synth = generate(tmp_path / "sunnybrook", cases=10, size=64, seed=0, slices=8)
    jobs = tmp_path / "jobs"
    ds = create_dataset(
        "image-sunnybrook",
        {"image_folder": str(synth.image_folder), "contour_folder": str(synth.contour_folder), "pct_val": 20},
        workers=2,
        jobs_dir=jobs,
    )
    job = train(ds.id, None, name="lv", jobs_dir=jobs, epochs=15, seed=0)  # default network: U-Net, Dice + CE
    info = json.loads((job.path / "model.json").read_text())
    assert info["network"] == "unet" and info["loss"] == "dice_ce" and info["parameters"] >= 200_000
    dice = [p["value"] for p in read_metrics(job) if p["name"] == "val_dice"]
    assert info["best_metric_name"] == "val_dice" and info["best_metric"] == pytest.approx(max(dice))
    assert max(dice) >= 0.85, dice
    assert dice[-1] >= 0.7, dice
