"""Fixtures of the backbones plugin's tests: tiny real datasets built in process."""

from __future__ import annotations

import numpy as np
import pytest
from wtforms import Form, IntegerField

from digits_core.interfaces import DataIngestion
from digits_core.plugins.testing import build_dataset


class _Form(Form):
    count = IntegerField("Training images", default=16)
    size = IntegerField("Size", default=32)
    channels = IntegerField("Channels", default=3)
    regression = IntegerField("Regression", default=0)
    segmentation = IntegerField("Segmentation", default=0)
    detection = IntegerField("Detection", default=0)
    val_count = IntegerField("Validation images (0: a quarter of the training images, at least 4)", default=0)


class TinyImages(DataIngestion):
    """Two classes told apart by brightness (or, for regression, the brightness as the label)."""

    plugin_id = "backbones-tiny-images"
    title = "Tiny images (backbones tests)"
    category = "Tests"

    @staticmethod
    def get_dataset_form():
        return _Form

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    @property
    def label_kind(self):
        if int(self.segmentation):
            return "mask"
        if int(self.detection):
            return "boxes"
        return "regression" if int(self.regression) else "class"

    def itemize_entries(self, stage):
        if stage == "train":
            self.userdata["class_labels"] = (
                ["background", "square"] if int(self.segmentation) or int(self.detection) else ["dark", "bright"]
            )
        val = int(self.val_count or 0) or max(4, int(self.count) // 4)
        n = {"train": int(self.count), "val": val}.get(stage, 0)
        return [(stage, i) for i in range(n)]

    def encode_entry(self, entry):
        stage, index = entry
        rng = np.random.default_rng([0 if stage == "train" else 1, index])
        label = index % 2
        base = 60 + 120 * label
        size, channels = int(self.size), int(self.channels)
        image = np.clip(base + rng.normal(0, 20, (size, size, channels)), 0, 255).astype(np.uint8)
        if int(self.regression):
            return image, np.array([base / 255.0], np.float32)
        if int(self.segmentation):  # a bright square on the dark background: class 1
            image = np.clip(60 + rng.normal(0, 20, (size, size, channels)), 0, 255).astype(np.uint8)
            top, left = rng.integers(0, size // 2, size=2)
            mask = np.zeros((size, size), np.uint8)
            mask[top : top + size // 2, left : left + size // 2] = 1
            image[mask == 1] = 200
            return image, mask
        if int(self.detection):  # one bright square, its box (class 1)
            image = np.clip(60 + rng.normal(0, 20, (size, size, channels)), 0, 255).astype(np.uint8)
            side = size // 4
            top, left = (int(v) for v in rng.integers(0, size - side, size=2))
            image[top : top + side, left : left + side] = 220
            return image, np.array([[1, left, top, left + side, top + side]], np.float32)
        return image, label


@pytest.fixture
def digits_jobs_dir(tmp_path, monkeypatch):
    """A temporary, empty jobs folder, also ``$DIGITS_JOBS_DIR``."""
    path = tmp_path / "digits-jobs"
    path.mkdir()
    monkeypatch.setenv("DIGITS_JOBS_DIR", str(path))
    return path


@pytest.fixture
def tiny_dataset(digits_jobs_dir):
    """``tiny_dataset(size=32, channels=3, count=16, regression=False, segmentation=False, detection=False)``."""

    def make(size=32, channels=3, count=16, regression=False, segmentation=False, detection=False):
        values = {"count": count, "size": size, "channels": channels, "regression": int(regression)}
        values.update(segmentation=int(segmentation), detection=int(detection))
        return build_dataset(TinyImages, values, jobs_dir=digits_jobs_dir)

    return make


@pytest.fixture(scope="module")
def module_tiny_dataset(tmp_path_factory):
    """``(jobs folder, dataset)``: one tiny regression dataset (4 images of 32×32×3) shared by a test module."""
    jobs = tmp_path_factory.mktemp("module-jobs")
    values = {"count": 4, "size": 32, "channels": 3, "regression": 1, "segmentation": 0, "detection": 0}
    return jobs, build_dataset(TinyImages, values, jobs_dir=jobs)


@pytest.fixture(scope="module")
def module_detection_dataset(tmp_path_factory):
    """``make(count, val) -> (jobs folder, dataset)``: a detection set of 32×32×3 images, one box each."""

    def make(count, val):
        jobs = tmp_path_factory.mktemp("detection-jobs")
        values = {"count": count, "size": 32, "channels": 3, "regression": 0, "segmentation": 0, "detection": 1}
        values["val_count"] = val
        return jobs, build_dataset(TinyImages, values, jobs_dir=jobs)

    return make


@pytest.fixture(scope="module")
def module_task_dataset(tmp_path_factory):
    """``make(count, segmentation=False) -> (jobs folder, dataset)``: a 32×32×3 classification (or segmentation) set."""

    def make(count, segmentation=False):
        jobs = tmp_path_factory.mktemp("task-jobs")
        values = {"count": count, "size": 32, "channels": 3, "regression": 0, "segmentation": int(segmentation)}
        values.update(detection=0, val_count=4)
        return jobs, build_dataset(TinyImages, values, jobs_dir=jobs)

    return make
