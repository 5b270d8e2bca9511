"""Annotation formats: each fixture (one ground truth, see annotation_fixtures.py) builds a real dataset
through ``create_dataset`` and reads back the same boxes and masks as its COCO twin; malformed files are
named in the errors report and never publish a half dataset."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import DigitsError
from digits_data_images.annotations import rle


def load_fixtures():
    """``annotation_fixtures.py`` next to this file (tests run with ``--import-mode=importlib``)."""
    spec = importlib.util.spec_from_file_location(
        "annotation_fixtures", Path(__file__).with_name("annotation_fixtures.py")
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


fx = load_fixtures()


def build(tmp_path, plugin: str, form: dict, tag: str, max_errors=100):
    job = create_dataset(
        plugin,
        {"val_percent": 0, "shuffle": False, **form},
        workers=1,
        jobs_dir=tmp_path / f"jobs-{tag}",
        max_errors=max_errors,
    )
    return open_dataset(job.path)


def detection(tmp_path, fmt_files: dict, tag: str, **form):
    return build(
        tmp_path, "object-detection", {"train_image_folder": str(tmp_path / "images"), **fmt_files, **form}, tag
    )


def segmentation(tmp_path, fmt_files: dict, tag: str, **form):
    form = {"image_folder": str(tmp_path / "images"), "width": fx.W, "height": fx.H, **fmt_files, **form}
    return build(tmp_path, "image-segmentation", form, tag)


@pytest.fixture
def root(tmp_path):
    fx.write_images(tmp_path / "images")
    return tmp_path


DETECTION = {
    "voc": lambda r: {"train_label_folder": str(fx.voc(r / "voc"))},
    "yolo": lambda r: {"train_label_folder": str(fx.yolo(r / "yolo" / "labels"))},
    "cvat": lambda r: {"train_annotations": str(fx.cvat(r / "cvat.xml"))},
    "labelstudio": lambda r: {"train_annotations": str(fx.labelstudio(r / "ls.json"))},
}


@pytest.mark.parametrize("fmt", sorted(DETECTION))
def test_detection_formats_give_the_boxes_of_their_coco_twin(root, fmt):
    twin = detection(root, {"train_annotations": str(fx.coco(root / "coco.json"))}, "coco")
    ds = detection(root, DETECTION[fmt](root), fmt)
    assert ds.userdata["label_format_detected"]["format"] == fmt  # auto, with its reason kept
    assert ds.class_labels == twin.class_labels == ["dontcare", "cat", "dog"]
    assert ds.errors() == [] and ds.count("train") == twin.count("train") == 3
    _, expected = twin.read_all("train")
    _, labels = ds.read_all("train")
    assert labels.shape == expected.shape
    assert np.abs(labels - expected).max() <= 0.5
    truth = [[fx.CLASSES.index(c) + 1, *box] for c, box in fx.BOXES["a.png"]]
    assert np.abs(expected[0] - np.array(truth)).max() < 1e-4  # and the twin is the ground truth


SEGMENTATION_POLYGONS = {
    "yolo": lambda r: {"label_folder": str(fx.yolo(r / "yolo" / "labels", polygons=True))},
    "cvat": lambda r: {"annotations": str(fx.cvat(r / "cvat.xml", what="polygons"))},
    "labelstudio": lambda r: {"annotations": str(fx.labelstudio(r / "ls.json", what="polygons"))},
}
SEGMENTATION_MASKS = {
    "voc": lambda r: {"label_folder": str(fx.voc_masks(r / "SegmentationClass"))},
    "cvat": lambda r: {"annotations": str(fx.cvat(r / "cvat.xml", what="masks"))},
    "labelstudio": lambda r: {"annotations": str(fx.labelstudio(r / "ls.json", what="masks"))},
}


def _masks(ds) -> np.ndarray:
    _, labels = ds.read_all("train")
    return np.asarray(labels).reshape(3, fx.H, fx.W)


@pytest.mark.parametrize("fmt", sorted(SEGMENTATION_POLYGONS))
def test_polygon_formats_give_the_masks_of_their_coco_twin(root, fmt):
    twin = segmentation(root, {"annotations": str(fx.coco(root / "coco.json", boxes=False, polygons=True))}, "coco")
    ds = segmentation(root, SEGMENTATION_POLYGONS[fmt](root), fmt)
    assert ds.userdata["label_format_detected"]["format"] == fmt
    assert ds.class_labels == twin.class_labels == ["background", "cat", "dog"] and ds.errors() == []
    expected = _masks(twin)
    assert set(np.unique(expected)) == {0, 1, 2}
    assert np.array_equal(_masks(ds), expected)  # IoU 1.0 for every class


@pytest.mark.parametrize("fmt", sorted(SEGMENTATION_MASKS))
def test_mask_formats_give_the_masks_of_their_coco_rle_twin(root, fmt):
    twin = segmentation(root, {"annotations": str(fx.coco(root / "coco.json", boxes=False, rle=True))}, "coco")
    truth = np.stack(list(fx.masks().values()))
    assert np.array_equal(_masks(twin), truth)  # pycocotools wrote the RLE: our decoder reads it exactly
    ds = segmentation(root, SEGMENTATION_MASKS[fmt](root), fmt)
    assert ds.userdata.get("label_format_detected", {}).get("format") == fmt and ds.errors() == []
    assert np.array_equal(_masks(ds), truth)


def test_coco_rle_decoder_matches_pycocotools():
    from pycocotools import mask as cocomask

    region = np.random.default_rng(3).random((17, 23)) < 0.4
    encoded = cocomask.encode(np.asfortranarray(region.astype(np.uint8)))
    counts = rle.coco_counts(encoded["counts"].decode("ascii"))
    assert np.array_equal(rle.decode_coco(17, 23, counts), cocomask.decode(encoded).astype(bool))
    assert rle.encode_coco(region) == counts


def test_problems_are_named_counted_and_the_rest_is_kept(root):
    import json

    path = fx.coco(root / "coco.json")
    data = json.loads(path.read_text())
    data["images"].append({"id": 9, "file_name": "gone.png", "width": fx.W, "height": fx.H})
    extra = [
        {"id": 101, "image_id": 77, "category_id": 1, "bbox": [1, 1, 5, 5]},  # missing image id
        {"id": 102, "image_id": 1, "category_id": 5, "bbox": [1, 1, 5, 5]},  # unknown class
        {"id": 103, "image_id": 1, "category_id": 1, "bbox": [1, 1, 0, 5]},  # degenerate
        {"id": 104, "image_id": 1, "category_id": 1, "bbox": [50, 1, 5, 5]},  # out of image
        {"id": 105, "image_id": 9, "category_id": 1, "bbox": [1, 1, 5, 5]},  # its image file is missing
    ]
    data["annotations"] += extra
    path.write_text(json.dumps(data))
    ds = detection(root, {"train_annotations": str(path)}, "bad")
    errors = {e["error"] for e in ds.errors()}
    for want in (
        "coco.json annotation 101: missing image: image_id 77 is not in images",
        "coco.json annotation 102: unknown class: category_id 5",
        "coco.json annotation 103: degenerate box",
        "coco.json annotation 104: out of image",
        "coco.json image 9: missing image: gone.png is not in",
    ):
        assert any(str(root / want) in e for e in errors), (want, errors)
    assert len(errors) == 5 and all("coco.json" in e for e in errors)
    assert ds.count("train") == 3
    _, labels = ds.read_all("train")
    assert int((labels[:, :, 0] >= 0).sum()) == 3  # the good boxes, nothing else


def test_malformed_files_are_named_with_their_line(root):
    voc = fx.voc(root / "voc")
    (voc / "b.xml").write_text("<annotation><size><width>40</width>\n<height>30</height></size>\n<object>")
    ds = detection(root, {"train_label_folder": str(voc)}, "voc")
    (error,) = ds.errors()
    assert "b.xml" in error["error"] and "line 3" in error["error"] and "not well-formed" in error["error"]
    assert ds.count("train") == 2

    yolo = fx.yolo(root / "yolo" / "labels")
    (yolo / "a.txt").write_text("0 0.5 0.5 0.2\n")
    ds = detection(root, {"train_label_folder": str(yolo)}, "yolo")
    (error,) = ds.errors()
    assert "a.txt" in error["error"] and "line 1: 4 values" in error["error"] and ds.count("train") == 2

    polygons = fx.coco(root / "poly.json", boxes=False, polygons=True)
    text = polygons.read_text().replace('"segmentation": [[0, 0, 10, 0, 0, 12]]', '"segmentation": [[0, 0, 10, 0]]')
    polygons.write_text(text)
    ds = segmentation(root, {"annotations": str(polygons)}, "poly")
    (error,) = ds.errors()
    assert "poly.json annotation 3: polygon has 2 points" in error["error"]

    masks = fx.coco(root / "rle.json", boxes=False, rle=True)
    import json

    data = json.loads(masks.read_text())
    data["annotations"][0]["segmentation"] = {"size": [fx.H, fx.W], "counts": [fx.H * fx.W, 5]}
    masks.write_text(json.dumps(data))
    ds = segmentation(root, {"annotations": str(masks)}, "rle")
    (error,) = ds.errors()
    assert "rle.json annotation 1: RLE covers 1205 pixels" in error["error"]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("cvat.xml", "<annotations>\n<image name='a.png'>\n</annotations>", r"cvat.xml line 3: not well-formed"),
        (
            "cvat.xml",
            '<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY x "xx">]>\n<annotations/>',
            r"cvat.xml line 2: declares a DTD",
        ),
        ("ls.json", '[{"data": {"image": "a.png"},\n "annotations": [', r"ls.json line 2: not valid JSON"),
        ("deep.json", "[" * 100000 + "]" * 100000, r"deep.json: not a readable JSON file \(RecursionError\)"),
    ],
)
def test_a_broken_annotation_file_fails_the_job_and_publishes_nothing(root, name, text, message):
    (root / name).write_text(text)
    with pytest.raises(DigitsError, match=message):
        detection(root, {"train_annotations": str(root / name)}, "broken")
    (job,) = (root / "jobs-broken").iterdir()
    assert not (job / "dataset").exists()


def test_auto_detection_and_a_chosen_format(root):
    from digits_data_images.annotations import detect

    assert detect.detect_folder(str(fx.yolo(root / "yolo" / "labels")), "boxes")[0] == "yolo"
    assert detect.detect_folder(str(fx.voc(root / "voc")), "boxes")[0] == "voc"
    assert detect.detect_file(str(fx.labelstudio(root / "ls.json")))[0] == "labelstudio"
    ds = detection(root, {"train_label_folder": str(root / "voc"), "label_format": "voc"}, "chosen")
    assert "label_format_detected" not in ds.userdata and ds.count("train") == 3


def test_chosen_classes_make_the_others_dontcare_not_errors(root):
    path = fx.coco(root / "coco.json")
    ds = detection(root, {"train_annotations": str(path), "custom_classes": "dontcare,cat"}, "subset")
    assert ds.class_labels == ["dontcare", "cat"] and ds.errors() == []
    assert ds.userdata["other_classes"] == {"count": 2, "examples": ["dog"]}
    _, labels = ds.read_all("train")
    assert labels[0, :, 0].tolist() == [1, 0] and labels[1, 0, 0] == 0  # a.png: cat, dog; b.png: dog
    (root / "names.txt").write_text("background\ncat\n")
    polygons = fx.coco(root / "poly.json", boxes=False, polygons=True)
    seg = segmentation(root, {"annotations": str(polygons), "class_labels_file": str(root / "names.txt")}, "s")
    assert seg.errors() == [] and seg.userdata["other_classes"]["count"] == 2
    assert set(np.unique(_masks(seg))) == {0, 1}
