"""``digits dataset export --format coco|yolo|voc``: export, then import through the image plugins,
gives back the same images, boxes and masks (and the class names)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from digits_core.cli import main
from digits_core.datasets import create_dataset, open_dataset
from digits_core.datasets.annotation_export import export_dataset
from digits_core.errors import DatasetError


def _fixtures():
    spec = importlib.util.spec_from_file_location(
        "annotation_fixtures", Path(__file__).with_name("annotation_fixtures.py")
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


fx = _fixtures()


def build(tmp_path, plugin, form, tag):
    job = create_dataset(plugin, {"shuffle": False, **form}, workers=1, jobs_dir=tmp_path / f"jobs-{tag}", max_errors=0)
    return open_dataset(job.path)


def export(ds, fmt, out) -> None:
    assert main(["dataset", "export", str(ds.job_path), "--format", fmt, str(out)]) == 0


def same(a, b, atol=0.0):
    assert a.class_labels == b.class_labels and a.stages == b.stages
    for stage in a.stages:
        fa, la = a.read_all(stage)
        fb, lb = b.read_all(stage)
        assert np.array_equal(fa, fb), stage
        assert la.shape == lb.shape and np.allclose(la, lb, atol=atol, rtol=0), stage


@pytest.fixture
def original(tmp_path):
    """A detection dataset with a crowd (dontcare) box and fractional coordinates, split train/val."""
    fx.write_images(tmp_path / "images")
    path = fx.coco(tmp_path / "coco.json")
    data = json.loads(path.read_text())
    data["annotations"][0]["iscrowd"] = 1
    path.write_text(json.dumps(data))
    form = {"train_image_folder": str(tmp_path / "images"), "train_annotations": str(path), "val_percent": 34}
    ds = build(tmp_path, "object-detection", form, "original")
    assert ds.count("val") == 1 and ds.count("train") == 2
    _, labels = ds.read_all("train")
    assert (labels[:, :, 0] == 0).any()  # the dontcare box travels too
    return ds


FOLDERS = {
    "coco": lambda out, s: {f"{p}_annotations": str(out / "annotations" / f"{s[p]}.json") for p in s},
    "yolo": lambda out, s: {f"{p}_label_folder": str(out / "labels" / s[p]) for p in s},
    "voc": lambda out, s: {f"{p}_label_folder": str(out / "Annotations" / s[p]) for p in s},
}


@pytest.mark.parametrize("fmt", ["coco", "yolo", "voc"])
def test_detection_export_then_import_round_trips(tmp_path, original, fmt):
    out = tmp_path / f"out-{fmt}"
    export(original, fmt, out)
    stages = {"train": "train", "val": "val"}
    form = {"train_image_folder": str(out / "images" / "train"), "val_image_folder": str(out / "images" / "val")}
    again = build(tmp_path, "object-detection", {**form, **FOLDERS[fmt](out, stages)}, f"again-{fmt}")
    assert again.userdata["label_format_detected"]["format"] == fmt
    same(original, again, atol=1e-4 if fmt == "yolo" else 0.0)  # YOLO: fractions of the image size


@pytest.mark.parametrize("fmt", ["coco", "voc"])
def test_segmentation_export_then_import_round_trips(tmp_path, fmt):
    fx.write_images(tmp_path / "images")
    path = fx.coco(tmp_path / "coco.json", boxes=False, rle=True)
    form = {"image_folder": str(tmp_path / "images"), "annotations": str(path), "width": fx.W, "height": fx.H}
    original = build(tmp_path, "image-segmentation", {**form, "val_percent": 34}, "original")
    out = tmp_path / f"out-{fmt}"
    export(original, fmt, out)
    form = {"image_folder": str(out / "images" / "train"), "val_image_folder": str(out / "images" / "val")}
    form.update(width=fx.W, height=fx.H)
    if fmt == "coco":
        form.update(
            annotations=str(out / "annotations" / "train.json"), val_annotations=str(out / "annotations" / "val.json")
        )
    else:
        form.update(
            label_folder=str(out / "SegmentationClass" / "train"),
            val_label_folder=str(out / "SegmentationClass" / "val"),
            class_labels_file=str(out / "labels.txt"),
        )
    again = build(tmp_path, "image-segmentation", form, f"again-{fmt}")
    same(original, again)


def test_export_refuses_what_it_cannot_write(tmp_path, original, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["dataset", "export", str(original.job_path), "--format", "coco", str(tmp_path / "full")]) == 1
    assert "full already exists and is not an empty folder" in capsys.readouterr().err
    fx.write_images(tmp_path / "seg-images")
    path = fx.coco(tmp_path / "seg.json", boxes=False, polygons=True)
    form = {"image_folder": str(tmp_path / "seg-images"), "annotations": str(path), "width": fx.W, "height": fx.H}
    seg = build(tmp_path, "image-segmentation", form, "seg")
    with pytest.raises(DatasetError, match="YOLO segmentation polygons cannot hold a mask exactly"):
        export_dataset(seg, "yolo", tmp_path / "seg-yolo")
    assert not (tmp_path / "seg-yolo").exists()
