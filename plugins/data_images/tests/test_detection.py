"""object-detection: KITTI/COCO parsing, class mapping, boxes moved with their image, the synthetic set."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
from PIL import Image

from digits_core import resize_geometry, transform_boxes
from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import FormValidationError
from digits_data_images import synth_detection
from digits_data_images.detection_labels import KITTI_CLASSES, class_lookup, parse_class_mapping, parse_kitti, read_coco
from digits_data_images.resize import resize_image

LINE = "{} 0.00 0 0.00 {} {} {} {} 0.00 0.00 0.00 0.00 0.00 0.00 0.00\n"


def test_class_mapping_defaults_custom_and_unknown(tmp_path):
    assert parse_class_mapping("")[:2] == ["dontcare", "car"] and len(parse_class_mapping(None)) == len(KITTI_CLASSES)
    names = parse_class_mapping("dontcare, pedestrian")
    assert names == ["dontcare", "pedestrian"]
    with pytest.raises(ValueError, match="twice"):
        parse_class_mapping("a,b,A")
    label = tmp_path / "x.txt"
    label.write_text(
        LINE.format("Pedestrian", 1, 2, 30, 40)
        + LINE.format("Car", 5, 5, 9, 9)
        + "\n"
        + "DontCare -1 -1 -10 0 0 10 10 -1 -1 -1 -1000 -1000 -1000 -10 0.5\n"
    )
    boxes = parse_kitti(str(label), class_lookup(names))
    assert boxes.dtype == np.float32 and boxes.tolist() == [[1, 1, 2, 30, 40], [0, 5, 5, 9, 9], [0, 0, 0, 10, 10]]


@pytest.mark.parametrize(
    "text, message",
    [
        ("car 0 0 0 1 2 3\n", "line 1: expected 15 columns"),
        (LINE.format("car", 1, 2, 3, 4) + LINE.format("car", "a", 2, 3, 4), "line 2: bbox columns 5-8 must be numbers"),
        (LINE.format("car", 10, 2, 3, 4), "line 1: bbox right/bottom"),
    ],
)
def test_bad_kitti_lines_are_named_by_file_and_line(tmp_path, text, message):
    label = tmp_path / "007.txt"
    label.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        parse_kitti(str(label), class_lookup(["dontcare", "car"]))
    assert "007.txt" in str(info.value)


def test_coco_categories_crowd_and_bad_annotation(tmp_path):
    data = {
        "images": [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "b.png"}],
        "categories": [{"id": 7, "name": "cat"}, {"id": 3, "name": "dog"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 7, "bbox": [1, 2, 10, 20]},
            {"id": 2, "image_id": 1, "category_id": 3, "bbox": [0, 0, 5, 5], "iscrowd": 1},
        ],
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(data))
    names, boxes = read_coco(str(path), None)
    assert names == ["dontcare", "dog", "cat"]  # categories by id
    assert boxes == {"a.png": [[2, 1.0, 2.0, 11.0, 22.0], [0, 0.0, 0.0, 5.0, 5.0]], "b.png": []}
    data["annotations"].append({"id": 99, "image_id": 5, "category_id": 7, "bbox": [0, 0, 1, 1]})
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="ann.json annotation 99: image_id 5"):
        read_coco(str(path), None)


@pytest.mark.parametrize("mode", ["squash", "crop", "fill", "half_crop"])
def test_boxes_follow_their_pixels_through_every_resize_mode(mode):
    rng = np.random.default_rng(zlib.crc32(mode.encode()))  # not hash(): it changes between processes
    for _ in range(25):
        sh, sw = (int(v) for v in rng.integers(30, 160, 2))
        h, w = (int(v) for v in rng.integers(30, 100, 2))
        x1, y1 = int(rng.integers(0, sw - 12)), int(rng.integers(0, sh - 12))
        x2, y2 = int(rng.integers(x1 + 10, sw + 1)), int(rng.integers(y1 + 10, sh + 1))
        img = np.zeros((sh, sw, 1), np.uint8)
        img[y1:y2, x1:x2] = 1
        out = resize_image(img, h, w, mode, is_label=True)[:, :, 0]
        boxes = transform_boxes(np.array([[1, x1, y1, x2, y2]], np.float32), resize_geometry(sh, sw, h, w, mode))
        ys, xs = np.nonzero(out)
        if len(xs) == 0 or len(boxes) == 0:
            assert len(xs) == 0 or (xs.max() - xs.min() < 2 or ys.max() - ys.min() < 2)
            continue
        got = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        assert np.abs(got - boxes[0, 1:]).max() <= 0.5 + 1e-4  # half a pixel, plus float32 rounding


def test_min_box_size_makes_dontcare_and_cropped_boxes_drop():
    geometry = resize_geometry(100, 200, 50, 50, "crop")  # scale 0.5, crop 25 px each side
    boxes = transform_boxes(
        np.array([[1, 0, 0, 20, 20], [1, 60, 10, 100, 90], [2, 90, 50, 96, 56]], np.float32), geometry, min_size=4
    )
    assert boxes.tolist() == [[1, 5, 5, 25, 45], [0, 20, 25, 23, 28]]


def _kitti_set(root, count=6, size=(40, 60)):
    for i in range(count):
        img = np.full((*size, 3), 30 * i, np.uint8)
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "labels").mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(root / "images" / f"{i:03d}.png")
        lines = "".join(LINE.format("pedestrian", 2 * k, 4, 2 * k + 20, 30) for k in range(i % 3))
        (root / "labels" / f"{i:03d}.txt").write_text(lines)  # i % 3 == 0: no objects


def test_kitti_dataset_with_empty_images_bad_line_and_resize(tmp_path):
    _kitti_set(tmp_path / "train")
    (tmp_path / "train" / "labels" / "005.txt").write_text("pedestrian 1 2\n")
    job = create_dataset(
        "object-detection",
        {
            "train_image_folder": str(tmp_path / "train" / "images"),
            "train_label_folder": str(tmp_path / "train" / "labels"),
            "custom_classes": "dontcare,pedestrian",
            "width": 30,
            "height": 20,
            "val_percent": 0,
            "shuffle": False,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
        max_errors=1,
    )
    ds = open_dataset(job.path)
    assert ds.label_kind == "boxes" and ds.label_shape == (None, 5) and ds.class_labels == ["dontcare", "pedestrian"]
    (error,) = ds.errors()
    assert "005.txt line 1: expected 15 columns" in error["error"]
    features, labels = ds.read_all("train")
    assert features.shape == (5, 20, 30, 3) and labels.shape == (5, 2, 5)  # padded to the largest count
    counts = [int((lab[:, 0] >= 0).sum()) for lab in labels]
    assert counts == [0, 1, 2, 0, 1]
    # 60x40 -> 30x20 squash: every coordinate halves
    assert labels[2, 1].tolist() == [1, 1, 2, 11, 15] and labels[0].tolist() == [[-1] * 5] * 2


def test_coco_dataset_with_validation_file(tmp_path):
    synth_detection.generate(str(tmp_path / "synth"), images=6, val_images=3, size=48, seed=4)
    s = tmp_path / "synth"
    job = create_dataset(
        "object-detection",
        {
            "label_format": "coco",
            "train_image_folder": str(s / "train" / "images"),
            "train_annotations": str(s / "annotations" / "train.json"),
            "val_image_folder": str(s / "val" / "images"),
            "val_annotations": str(s / "annotations" / "val.json"),
            "width": 48,
            "height": 48,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    ds = open_dataset(job.path)
    assert ds.class_labels == ["dontcare", *synth_detection.DIGIT_NAMES]
    assert ds.count("train") == 6 and ds.count("val") == 3
    _, labels = ds.read_all("val")
    coco = json.loads((s / "annotations" / "val.json").read_text())
    assert int((labels[:, :, 0] > 0).sum()) == len(coco["annotations"])


def test_form_needs_labels_of_the_chosen_format(tmp_path):
    with pytest.raises(FormValidationError, match="training annotations"):
        create_dataset(
            "object-detection",
            {"label_format": "coco", "train_image_folder": str(tmp_path)},
            jobs_dir=tmp_path / "jobs",
        )


def test_synthetic_set_is_seeded_with_boxes_on_the_ink(tmp_path):
    counts = synth_detection.generate(str(tmp_path / "a"), images=4, val_images=2, size=64, seed=7)
    synth_detection.generate(str(tmp_path / "b"), images=4, val_images=2, size=64, seed=7)
    assert counts == {"train": 4, "val": 2}
    for i in range(4):
        name = f"train/labels/{i:06d}.txt"
        text = (tmp_path / "a" / name).read_text()
        assert text == (tmp_path / "b" / name).read_text()
        lines = text.splitlines()
        assert 1 <= len(lines) <= 6 and all(len(line.split()) == 15 for line in lines)
        for line in lines:
            x1, y1, x2, y2 = (float(v) for v in line.split()[4:8])
            assert line.split()[0] in synth_detection.DIGIT_NAMES and 0 <= x1 < x2 <= 64 and 0 <= y1 < y2 <= 64
    assert (tmp_path / "a" / "classes.txt").read_text().strip() == synth_detection.CLASS_MAPPING


def test_inference_list_with_kitti_label_files_gives_ground_truth_boxes(tmp_path):
    """The plugin's own inference form takes what the generic path box takes: a list of images and label files."""
    from digits_data_images.detection import ObjectDetectionIngestion

    Image.fromarray(np.zeros((40, 80, 3), np.uint8)).save(tmp_path / "000001.png")
    (tmp_path / "000001.txt").write_text("Car 0.0 0 0.0 8 4 40 20 0 0 0 0 0 0 0\n")
    (tmp_path / "val.txt").write_text("000001.png 000001.txt\n")
    plugin = ObjectDetectionIngestion(
        is_inference_db=True,
        image_list=str(tmp_path / "val.txt"),
        show_labels=True,
        width=40,
        height=20,
        resize_mode="squash",
        custom_classes="",
    )
    (entry,) = plugin.itemize_entries("test")
    assert str(entry) == str(tmp_path / "000001.png")
    image, boxes = plugin.encode_entry(entry)
    assert image.shape == (40, 80, 3)  # at its own size: the core resizes it
    car = class_lookup(parse_class_mapping(""))["car"]
    np.testing.assert_allclose(boxes, [[car, 4, 2, 20, 10]])  # in the 40x20 network input's pixels


def test_empty_size_keeps_the_source_size_when_all_images_share_one(tmp_path, caplog):
    import logging

    from digits_data_images.detection import DetectionForm

    assert "the source width when all images share one size" in DetectionForm.width.kwargs["description"]
    _kitti_set(tmp_path / "train", size=(40, 60))
    form = {
        "train_image_folder": str(tmp_path / "train" / "images"),
        "train_label_folder": str(tmp_path / "train" / "labels"),
        "custom_classes": "dontcare,pedestrian",
        "val_percent": 0,
        "shuffle": False,
    }
    with caplog.at_level(logging.INFO, logger="digits_data_images"):
        job = create_dataset("object-detection", form, workers=1, jobs_dir=tmp_path / "jobs")
    assert "all 6 images are 60x40: kept at that size" in caplog.text
    ds = open_dataset(job.path)
    features, labels = ds.read_all("train")
    assert features.shape == (6, 40, 60, 3)  # not upsampled to 256x256
    assert labels[2, 1].tolist() == [1, 2, 4, 22, 30]  # boxes untouched
    assert (ds.userdata["width"], ds.userdata["height"], ds.userdata["image_size"]) == (60, 40, "source")
    Image.fromarray(np.zeros((50, 50, 3), np.uint8)).save(tmp_path / "train" / "images" / "006.png")
    (tmp_path / "train" / "labels" / "006.txt").write_text("")
    job = create_dataset("object-detection", form, workers=1, jobs_dir=tmp_path / "jobs")
    ds = open_dataset(job.path)
    assert ds.read_all("train")[0].shape == (7, 256, 256, 3)  # sizes differ: the default
    assert (ds.userdata["width"], ds.userdata["height"], ds.userdata["image_size"]) == (256, 256, "default")


def test_a_test_split_is_held_out_by_percent_or_given_as_folders(tmp_path):
    """Issue 42: ``test_percent`` holds images out of training after the validation share (which stays the
    share a dataset without a test split gets); a test folder becomes the test stage as it is; shares that
    leave no training images are refused naming the field."""
    synth_detection.generate(str(tmp_path / "synth"), images=20, val_images=4, size=40, seed=5)
    s = tmp_path / "synth"
    base = {
        "label_format": "kitti",
        "train_image_folder": str(s / "train" / "images"),
        "train_label_folder": str(s / "train" / "labels"),
        "width": 40,
        "height": 40,
        "val_percent": 10,
    }

    def stages(form):
        ds = open_dataset(create_dataset("object-detection", form, workers=1, jobs_dir=tmp_path / "jobs").path)
        return {
            s: {f.tobytes() for f in ds.read_all(s)[0]} if s in ds.stages else set() for s in ("train", "val", "test")
        }

    plain = stages(base)
    held = stages({**base, "test_percent": 25})
    assert [len(held[k]) for k in ("train", "val", "test")] == [13, 2, 5]
    assert held["val"] == plain["val"] and not held["test"] & (held["train"] | held["val"])
    assert held["train"] | held["test"] == plain["train"] and not plain["test"]
    folder = stages(
        {**base, "test_image_folder": str(s / "val" / "images"), "test_label_folder": str(s / "val" / "labels")}
    )
    assert [len(folder[k]) for k in ("train", "val", "test")] == [18, 2, 4]
    with pytest.raises(FormValidationError, match="test_percent"):
        stages({**base, "val_percent": 60, "test_percent": 50})
    with pytest.raises(FormValidationError, match="test label folder"):
        stages({**base, "test_image_folder": str(s / "val" / "images")})
