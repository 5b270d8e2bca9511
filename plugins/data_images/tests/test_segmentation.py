"""image-segmentation on real palette PNG and grayscale label files."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import FormValidationError

PALETTE = [[0, 0, 0], [200, 10, 10], [10, 200, 10]]


def palette_png(path, mask: np.ndarray):
    image = Image.fromarray(mask.astype(np.uint8), mode="P")
    image.putpalette([v for color in PALETTE for v in color] + [0] * (768 - 9))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def make_mask(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mask = np.zeros((h, w), np.uint8)
    y, x = rng.integers(0, h - 3), rng.integers(0, w - 3)
    mask[y : y + 3, x : x + 3] = 1 + seed % 2
    return mask


def test_palette_labels_resized_nearest_with_palette_and_errors(tmp_path, images):
    img_dir, lbl_dir = tmp_path / "images", tmp_path / "labels"
    masks = {}
    for i in range(8):
        images.save(img_dir / f"{i:02d}.jpg", images.rgb(8, 10, i), "JPEG")
        masks[i] = make_mask(8, 10, i)
        palette_png(lbl_dir / f"{i:02d}.png", masks[i])
    images.save(img_dir / "nolabel.png", images.rgb(8, 10, 50))
    images.save(img_dir / "rgblabel.png", images.rgb(8, 10, 51))
    images.save(lbl_dir / "rgblabel.png", images.rgb(8, 10, 52))  # RGB labels are refused
    (tmp_path / "classes.txt").write_text("background\nleft\nright\n")
    job = create_dataset(
        "image-segmentation",
        {
            "image_folder": str(img_dir),
            "label_folder": str(lbl_dir),
            "class_labels_file": str(tmp_path / "classes.txt"),
            "width": 5,
            "height": 4,
            "val_percent": 25,
            "shuffle": False,
        },
        workers=2,
        jobs_dir=tmp_path / "jobs",
        max_errors=1,
    )
    ds = open_dataset(job.path)
    assert ds.label_kind == "mask" and ds.label_dtype == "uint8" and ds.label_shape == (4, 5)
    assert ds.class_labels == ["background", "left", "right"] and ds.color_palette == PALETTE
    assert ds.userdata["unmatched_images"]["count"] == 1
    assert ds.count("train") + ds.count("val") == 8 and ds.count("val") == 2  # 9 pairs, 25 % -> 2 val, 1 bad
    (error,) = ds.errors()
    assert "rgblabel.png" in error["error"] and "palette" in error["error"]
    features, labels = ds.read_all("train")
    assert features.shape == (ds.count("train"), 4, 5, 3) and features.dtype == np.uint8
    expected = {i: np.asarray(Image.fromarray(masks[i]).resize((5, 4), Image.NEAREST)) for i in masks}
    for label in labels:
        assert any(np.array_equal(label, e) for e in expected.values())
    assert set(np.unique(labels)) <= {0, 1, 2}


def test_grayscale_labels_with_separate_validation_folders(tmp_path, images):
    for split, n in (("train", 4), ("val", 2)):
        for i in range(n):
            images.save(tmp_path / split / "img" / f"{i}.png", images.gray(6, 6, i))
            images.save(tmp_path / split / "lbl" / f"{i}.png", make_mask(6, 6, i))
    job = create_dataset(
        "image-segmentation",
        {
            "image_folder": str(tmp_path / "train" / "img"),
            "label_folder": str(tmp_path / "train" / "lbl"),
            "val_image_folder": str(tmp_path / "val" / "img"),
            "val_label_folder": str(tmp_path / "val" / "lbl"),
            "image_type": "grayscale",
            "width": 6,
            "height": 6,
            "encoding": "none",
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    ds = open_dataset(job.path)
    assert ds.count("train") == 4 and ds.count("val") == 2
    assert ds.feature_shape() == (6, 6, 1)
    assert len(ds.color_palette) == 256 and ds.color_palette[1] == [128, 0, 0]  # the default VOC colour map
    assert ds.class_labels == ["0", "1", "2"] and ds.num_classes == 3  # no labels file: named by index
    assert sum(ds.label_histogram("train")) == 4 * 36
    _, labels = ds.read_all("val")
    assert sorted(int(m.max()) for m in labels) == [1, 2]


def test_form_errors_name_the_fields(tmp_path):
    with pytest.raises(FormValidationError) as info:
        create_dataset(
            "image-segmentation",
            {"image_folder": str(tmp_path), "val_image_folder": str(tmp_path)},
            jobs_dir=tmp_path / "jobs",
        )
    assert set(info.value.errors) == {"label_folder", "val_label_folder"}


def test_inference_list_with_mask_images_gives_ground_truth_masks(tmp_path):
    """The plugin's own inference form takes ``<image> <mask image>`` lines, as detection takes KITTI files."""
    from digits_data_images.segmentation import ImageSegmentationIngestion

    mask = np.zeros((10, 20), np.uint8)
    mask[2:6, 4:12] = 2
    Image.fromarray(np.full((10, 20), 90, np.uint8)).save(tmp_path / "a.png")
    palette_png(tmp_path / "masks" / "a.png", mask)
    (tmp_path / "val.txt").write_text("a.png masks/a.png\n")
    plugin = ImageSegmentationIngestion(
        is_inference_db=True,
        image_list=str(tmp_path / "val.txt"),
        show_labels=True,
        image_type="grayscale",
        width=10,
        height=5,
        resize_mode="squash",
    )
    (entry,) = plugin.itemize_entries("test")
    assert str(entry) == str(tmp_path / "a.png")
    image, truth = plugin.encode_entry(entry)
    assert image.shape == (5, 10, 1)
    np.testing.assert_array_equal(truth, mask[::2, ::2])  # resized by nearest neighbour, as training masks are
    (tmp_path / "bad.txt").write_text("a.png\n")
    bad = ImageSegmentationIngestion(
        is_inference_db=True,
        image_list=str(tmp_path / "bad.txt"),
        show_labels=True,
        image_type="grayscale",
        width=10,
        height=5,
    )
    with pytest.raises(ValueError, match=r'line 1: expected "<image path> <mask image>"'):
        bad.itemize_entries("test")
