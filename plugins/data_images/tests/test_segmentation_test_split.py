"""image-segmentation holds out a test stage (``test_percent``) for ``digits evaluate`` (issue 42)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import FormValidationError


def _pairs(tmp_path, n):
    img_dir, lbl_dir = tmp_path / "images", tmp_path / "labels"
    img_dir.mkdir()
    lbl_dir.mkdir()
    for i in range(n):
        mask = np.zeros((6, 6), np.uint8)
        mask[i % 4 : i % 4 + 2, 1:4] = 1
        Image.fromarray((mask * 200 + i).astype(np.uint8)).save(img_dir / f"{i:02d}.png")
        Image.fromarray(mask).save(lbl_dir / f"{i:02d}.png")
    return img_dir, lbl_dir


def test_test_percent_holds_out_a_disjoint_test_stage(tmp_path):
    img_dir, lbl_dir = _pairs(tmp_path, 20)
    form = {"image_folder": str(img_dir), "label_folder": str(lbl_dir), "val_percent": 20, "test_percent": 25}
    job = create_dataset("image-segmentation", form, workers=1, jobs_dir=tmp_path / "jobs")
    ds = open_dataset(job.path)
    assert (ds.count("train"), ds.count("val"), ds.count("test")) == (11, 4, 5)
    seen = [
        tuple(f.reshape(-1)[:1]) + (int(f.sum()),) for stage in ("train", "val", "test") for f in ds.read_all(stage)[0]
    ]
    assert len(set(seen)) == 20  # every image once, in exactly one stage
    # the default keeps the old split: no test stage, the same validation images
    old = create_dataset("image-segmentation", {**form, "test_percent": 0}, workers=1, jobs_dir=tmp_path / "jobs")
    assert open_dataset(old.path).count("test") == 0 and open_dataset(old.path).count("val") == 4


def test_validation_plus_test_share_must_leave_training_images(tmp_path):
    img_dir, lbl_dir = _pairs(tmp_path, 4)
    form = {"image_folder": str(img_dir), "label_folder": str(lbl_dir), "val_percent": 50, "test_percent": 50}
    with pytest.raises(FormValidationError, match="test_percent"):
        create_dataset("image-segmentation", form, workers=1, jobs_dir=tmp_path / "jobs")
