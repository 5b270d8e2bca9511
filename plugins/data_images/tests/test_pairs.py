"""image-pairs: same/different 2-channel pairs from class folders."""

from __future__ import annotations

import random

import numpy as np
import pytest

from digits_core.datasets import create_dataset, open_dataset
from digits_data_images.pairs import draw_pairs


def _class_folders(root, images, classes=3, per_class=6):
    """Class c holds flat images of value 40*c + i, so a pair's class is read back from its pixels."""
    for c in range(classes):
        for i in range(per_class):
            images.save(root / f"c{c}" / f"{i}.png", np.full((6, 6), 40 * c + i, np.uint8))


def test_draw_pairs_counts_and_classes():
    by_class = [[f"a{i}" for i in range(3)], [f"b{i}" for i in range(3)], ["c0"]]
    pairs = draw_pairs(by_class, 40, 25, random.Random(0))
    same = [p for p in pairs if p[2] == 1]
    assert len(pairs) == 40 and len(same) == 10
    assert all(a[0] == b[0] and a != b for a, b, _ in same)  # same class, two different images
    assert all(a[0] != b[0] for a, b, s in pairs if s == 0)
    with pytest.raises(ValueError, match="at least 2 classes"):
        draw_pairs([["a0", "a1"]], 4, 50, random.Random(0))


def test_pairs_dataset_is_two_channel_with_true_labels_and_disjoint_validation(tmp_path, images):
    _class_folders(tmp_path / "classes", images)
    job = create_dataset(
        "image-pairs",
        {
            "folder": str(tmp_path / "classes"),
            "train_pairs": 30,
            "val_pairs": 10,
            "val_percent": 34,
            "width": 4,
            "height": 4,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.class_labels == ["different", "same"] and ds.feature_shape("train") == (4, 4, 2)
        assert ds.count("train") == 30 and ds.count("val") == 10
        seen = {}
        for stage in ("train", "val"):
            features, labels = ds.read_all(stage)
            values = features[:, 0, 0, :].astype(int)  # pixel value = 40 * class + index
            np.testing.assert_array_equal(labels, (values[:, 0] // 40 == values[:, 1] // 40).astype(int))
            seen[stage] = set(values.ravel().tolist())
            assert 0 < labels.sum() < len(labels)
        assert not seen["train"] & seen["val"]  # validation pairs reuse no training image
