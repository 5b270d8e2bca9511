"""Small synthetic data plugins for the tests and benchmarks of the engine (not shipped in the package).

They are ordinary :class:`~digits_core.DataIngestion` subclasses (not
registered by entry point); register one in process around its use::

    from digits_core import registry
    from digits_core.datasets import create_dataset
    from synthetic_plugins import SyntheticShapes   # tests/ is on sys.path (tests/conftest.py)

    registry.register(SyntheticShapes)
    try:
        job = create_dataset("synthetic-shapes", {"count": 512, "size": 28}, workers=1)
    finally:
        registry.unregister(SyntheticShapes)

* ``synthetic-shapes``: classification, one bright pattern per class
  (bars, blocks, rings...) at a random position on a noisy background;
* ``synthetic-lv``: segmentation, a bright left-ventricle-like ellipse with a
  darker myocardium ring in a textured, noisy "thorax" (mask: 0 background, 1 LV);
* ``synthetic-regression``: the label is the (x, y) centre of a blob, in [0, 1].

Every entry is generated from its index, so datasets are reproducible.
"""

from __future__ import annotations

import numpy as np
from wtforms import Form, IntegerField, validators

from digits_core.interfaces import DataIngestion


class _Form(Form):
    count = IntegerField("Training images", default=256, validators=[validators.NumberRange(min=1)])
    val_count = IntegerField("Validation images", default=64, validators=[validators.NumberRange(min=0)])
    size = IntegerField("Image size", default=28, validators=[validators.NumberRange(min=4, max=512)])
    classes = IntegerField("Classes", default=4, validators=[validators.NumberRange(min=2, max=10)])
    seed = IntegerField("Seed", default=0)


class _Synthetic(DataIngestion):
    category = "Synthetic"

    @staticmethod
    def get_dataset_form():
        return _Form

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }} {{ form.size }}", {}

    def itemize_entries(self, stage):
        n = {"train": int(self.count), "val": int(self.val_count)}.get(stage, 0)
        offset = {"train": 0, "val": 1_000_000}.get(stage, 0)
        return [offset + i for i in range(n)]

    def _rng(self, entry):
        return np.random.default_rng([int(self.seed), int(entry)])


def _pattern(kind: int, size: int, rng) -> np.ndarray:
    s = size
    img = np.zeros((s, s), np.float32)
    half = max(2, s // 3)
    top, left = rng.integers(0, s - half + 1, size=2)
    yy, xx = np.mgrid[0:half, 0:half]
    if kind == 0:
        patch = xx % 3 == 0
    elif kind == 1:
        patch = yy % 3 == 0
    elif kind == 2:
        patch = np.ones((half, half), bool)
    elif kind == 3:
        c = (half - 1) / 2
        r = np.hypot(yy - c, xx - c)
        patch = (r > half * 0.25) & (r < half * 0.5)
    else:
        patch = (xx + yy) % (kind - 1) == 0
    img[top : top + half, left : left + half] = patch
    return img


class SyntheticShapes(_Synthetic):
    """Classification: one pattern per class on a noisy background (grayscale uint8)."""

    plugin_id = "synthetic-shapes"
    title = "Synthetic shapes (classification)"

    def itemize_entries(self, stage):
        entries = super().itemize_entries(stage)
        self.userdata["class_labels"] = [f"class{k}" for k in range(int(self.classes))]
        return entries

    def encode_entry(self, entry):
        rng = self._rng(entry)
        label = int(entry % int(self.classes))
        img = _pattern(label, int(self.size), rng) * rng.uniform(150, 255) + rng.normal(30, 12, (self.size,) * 2)
        return np.clip(img, 0, 255).astype(np.uint8)[..., None], label


def lv_image(size: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """One LV-like image (uint8 H×W) and its mask (uint8 0/1)."""
    s = size
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32)
    # thorax: a big soft ellipse with texture
    body = ((yy - s / 2) / (0.45 * s)) ** 2 + ((xx - s / 2) / (0.48 * s)) ** 2 < 1
    img = 40 + 50 * body + 12 * np.sin(xx / rng.uniform(2, 5)) * np.cos(yy / rng.uniform(2, 5))
    cy, cx = rng.uniform(0.35 * s, 0.65 * s, size=2)
    ry, rx = rng.uniform(0.09 * s, 0.2 * s, size=2)
    angle = rng.uniform(0, np.pi)
    dy, dx = yy - cy, xx - cx
    u = dx * np.cos(angle) + dy * np.sin(angle)
    v = -dx * np.sin(angle) + dy * np.cos(angle)
    r = (u / rx) ** 2 + (v / ry) ** 2
    lv = r < 1
    myo = (r >= 1) & (r < 1.8)
    img = img + 110 * lv - 25 * myo
    # a distractor: right ventricle-like blob, dimmer than the LV
    ry2, rx2 = ry * 0.8, rx * 1.1
    cx2 = cx + (rx + rx2) * 1.4 * (1 if cx < s / 2 else -1)
    rv = ((yy - cy) / ry2) ** 2 + ((xx - cx2) / rx2) ** 2 < 1
    img = img + 60 * (rv & ~lv)
    img = img + rng.normal(0, 10, (s, s))
    return np.clip(img, 0, 255).astype(np.uint8), lv.astype(np.uint8)


class SyntheticLV(_Synthetic):
    """Segmentation: a left-ventricle-like ellipse (mask 1) in a noisy textured thorax."""

    plugin_id = "synthetic-lv"
    title = "Synthetic LV (segmentation)"

    def itemize_entries(self, stage):
        entries = super().itemize_entries(stage)
        self.userdata["class_labels"] = ["background", "lv"]
        self.userdata["color_palette"] = [[0, 0, 0], [255, 0, 0]]
        return entries

    def encode_entry(self, entry):
        img, mask = lv_image(int(self.size), self._rng(entry))
        return img[..., None], mask.astype(np.int64)


class SyntheticRegression(_Synthetic):
    """Regression: the label is the (row, col) centre of a bright blob, scaled to [0, 1]."""

    plugin_id = "synthetic-regression"
    title = "Synthetic blob centres (regression)"

    def encode_entry(self, entry):
        rng = self._rng(entry)
        s = int(self.size)
        cy, cx = rng.uniform(0.2, 0.8, size=2)
        yy, xx = np.mgrid[0:s, 0:s] / (s - 1)
        img = 200 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.01) + rng.normal(20, 5, (s, s))
        return np.clip(img, 0, 255).astype(np.uint8)[..., None], np.array([cy, cx], np.float32)


class SyntheticPairs(_Synthetic):
    """Pairs for a Siamese network: two shape images stacked as 2 channels; label 1 = same class."""

    plugin_id = "synthetic-pairs"
    title = "Synthetic image pairs (same / different)"

    def itemize_entries(self, stage):
        entries = super().itemize_entries(stage)
        self.userdata["class_labels"] = ["different", "same"]
        return entries

    def encode_entry(self, entry):
        rng = self._rng(entry)
        same = int(entry % 2)
        a = int(rng.integers(0, int(self.classes)))
        b = a if same else int((a + rng.integers(1, int(self.classes))) % int(self.classes))
        size = int(self.size)
        channels = []
        for kind in (a, b):
            img = _pattern(kind, size, rng) * rng.uniform(150, 255) + rng.normal(30, 12, (size, size))
            channels.append(np.clip(img, 0, 255).astype(np.uint8))
        return np.stack(channels, axis=-1), same


def build_small_shapes_dataset(jobs_dir) -> str:
    """A Done ``synthetic-shapes`` dataset (96 train / 40 val 16×16 images, 3 classes) in ``jobs_dir``; its id.

    The plugin is registered in process only while the dataset is built.
    """
    from digits_core import registry
    from digits_core.datasets import create_dataset

    registry.register(SyntheticShapes)
    try:
        job = create_dataset(
            "synthetic-shapes", {"count": 96, "val_count": 40, "size": 16, "classes": 3}, workers=1, jobs_dir=jobs_dir
        )
    finally:
        registry.unregister(SyntheticShapes)
    return job.id
