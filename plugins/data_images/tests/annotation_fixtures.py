"""One ground truth written in every annotation format (for test_annotation_formats.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

W, H = 40, 30
CLASSES = ["cat", "dog"]
#: image name → [(class, box x1 y1 x2 y2 in pixels)]
BOXES = {
    "a.png": [("cat", (2.0, 3.0, 20.0, 15.0)), ("dog", (10.5, 12.25, 39.0, 29.0))],
    "b.png": [("dog", (0.0, 0.0, 8.0, 6.0))],
    "c.png": [],
}
#: image name → [(class, polygon [x, y, ...] with integer vertices)]
POLYGONS = {
    "a.png": [("cat", [2, 2, 20, 4, 12, 18]), ("dog", [18, 10, 36, 10, 36, 26, 22, 26])],
    "b.png": [("dog", [0, 0, 10, 0, 0, 12])],
    "c.png": [],
}


def masks() -> dict[str, np.ndarray]:
    """Class-index masks (0 background, 1 cat, 2 dog): blobs no polygon can draw."""
    rng = np.random.default_rng(7)
    result = {}
    for name in BOXES:
        mask = np.zeros((H, W), np.uint8)
        if name != "c.png":
            mask[3:12, 4:30] = 1
            mask[rng.random((H, W)) < 0.1] = 2
            mask[20:, 30:] = 2
        result[name] = mask
    return result


def write_images(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(BOXES):
        arr = np.random.default_rng(i).integers(0, 256, (H, W, 3), dtype=np.uint8)
        Image.fromarray(arr).save(folder / name)
    return folder


def _cat_id(name: str) -> int:
    return CLASSES.index(name) + 1


def coco(path: Path, *, boxes=True, polygons=False, rle=False) -> Path:
    """COCO JSON: boxes, polygons, or compressed RLE (written by pycocotools.mask)."""
    images = [{"id": i + 1, "file_name": n, "width": W, "height": H} for i, n in enumerate(BOXES)]
    anns = []
    for i, name in enumerate(BOXES):
        if boxes:
            for cls, (x1, y1, x2, y2) in BOXES[name]:
                bbox = [x1, y1, x2 - x1, y2 - y1]
                anns.append({"image_id": i + 1, "category_id": _cat_id(cls), "bbox": bbox, "iscrowd": 0})
        if polygons:
            for cls, poly in POLYGONS[name]:
                anns.append({"image_id": i + 1, "category_id": _cat_id(cls), "segmentation": [poly], "iscrowd": 0})
        if rle:
            from pycocotools import mask as cocomask

            for k, cls in enumerate(CLASSES, 1):
                region = masks()[name] == k
                if region.any():
                    encoded = cocomask.encode(np.asfortranarray(region.astype(np.uint8)))
                    seg = {"size": encoded["size"], "counts": encoded["counts"].decode("ascii")}
                    anns.append({"image_id": i + 1, "category_id": k, "segmentation": seg, "iscrowd": 1})
    for k, ann in enumerate(anns, 1):
        ann["id"] = k
    cats = [{"id": k, "name": n} for k, n in enumerate(CLASSES, 1)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
    return path


def voc(folder: Path) -> Path:
    """Pascal VOC XML, 1-based inclusive pixel indexes: xmin = x1 + 1, xmax = x2."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, objects in BOXES.items():
        body = "".join(
            f"<object><name>{cls}</name><difficult>0</difficult><bndbox><xmin>{x1 + 1}</xmin><ymin>{y1 + 1}</ymin>"
            f"<xmax>{x2}</xmax><ymax>{y2}</ymax></bndbox></object>"
            for cls, (x1, y1, x2, y2) in objects
        )
        (folder / name.replace(".png", ".xml")).write_text(
            f"<annotation><filename>{name}</filename><size><width>{W}</width><height>{H}</height>"
            f"<depth>3</depth></size>{body}</annotation>"
        )
    return folder


def voc_masks(folder: Path) -> Path:
    """VOC SegmentationClass: palette PNGs."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, mask in masks().items():
        image = Image.fromarray(mask, mode="P")
        image.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * (256 * 3 - 9))
        image.save(folder / name)
    return folder


def yolo(folder: Path, *, polygons=False) -> Path:
    """Ultralytics: labels/*.txt (normalised) and data.yaml (names) next to the label folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder.parent / "data.yaml").write_text("path: .\ntrain: images\nnames:\n  0: cat\n  1: dog\n")
    for name in BOXES:
        lines = []
        if polygons:
            for cls, poly in POLYGONS[name]:
                xy = " ".join(f"{v / (W if i % 2 == 0 else H):.10f}" for i, v in enumerate(poly))
                lines.append(f"{CLASSES.index(cls)} {xy}")
        else:
            for cls, (x1, y1, x2, y2) in BOXES[name]:
                cx, cy, w, h = (x1 + x2) / 2 / W, (y1 + y2) / 2 / H, (x2 - x1) / W, (y2 - y1) / H
                lines.append(f"{CLASSES.index(cls)} {cx:.10f} {cy:.10f} {w:.10f} {h:.10f}")
        if name != "c.png":  # no label file: an image without objects (Ultralytics)
            (folder / name.replace(".png", ".txt")).write_text("\n".join(lines) + "\n")
    return folder


def _cvat_mask(region: np.ndarray) -> str:
    ys, xs = np.nonzero(region)
    top, left, bottom, right = ys.min(), xs.min(), ys.max() + 1, xs.max() + 1
    flat = region[top:bottom, left:right].reshape(-1)
    runs, value, count = [], False, 0
    for v in flat:
        if bool(v) == value:
            count += 1
        else:
            runs.append(count)
            value, count = bool(v), 1
    runs.append(count)
    rle = ", ".join(str(r) for r in runs)
    return f'rle="{rle}" left="{left}" top="{top}" width="{right - left}" height="{bottom - top}"'


def cvat(path: Path, *, what="boxes") -> Path:
    """CVAT for images 1.1: boxes, polygons or masks."""
    labels = "".join(f"<label><name>{c}</name></label>" for c in CLASSES)
    parts = []
    for i, name in enumerate(BOXES):
        shapes = []
        if what == "boxes":
            for cls, (x1, y1, x2, y2) in BOXES[name]:
                shapes.append(f'<box label="{cls}" xtl="{x1}" ytl="{y1}" xbr="{x2}" ybr="{y2}" occluded="0"/>')
        elif what == "polygons":
            for cls, poly in POLYGONS[name]:
                points = ";".join(f"{poly[k]:.2f},{poly[k + 1]:.2f}" for k in range(0, len(poly), 2))
                shapes.append(f'<polygon label="{cls}" points="{points}" occluded="0"/>')
        else:
            for k, cls in enumerate(CLASSES, 1):
                region = masks()[name] == k
                if region.any():
                    shapes.append(f'<mask label="{cls}" {_cvat_mask(region)} occluded="0"/>')
        parts.append(f'<image id="{i}" name="{name}" width="{W}" height="{H}">{"".join(shapes)}</image>')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "<?xml version='1.0' encoding='utf-8'?>\n<annotations><version>1.1</version>"
        f"<meta><task><labels>{labels}</labels></task></meta>{''.join(parts)}</annotations>"
    )
    return path


def brush_rle(region: np.ndarray) -> list[int]:
    """Label Studio brush RLE of a bool mask (RGBA values, runs of one value; see annotations.rle)."""
    flat = np.zeros((H, W, 4), np.uint8)
    flat[region] = 255
    values = flat.reshape(-1)
    bits = [format(values.size, "032b"), format(7, "05b")] + [format(15, "04b")] * 4
    start = 0
    while start < values.size:
        end = start + 1
        while end < values.size and values[end] == values[start] and end - start < 65536:
            end += 1
        bits.append("1" + "00" + format(end - start - 1, "016b") + format(int(values[start]), "08b"))
        start = end
    stream = "".join(bits)
    stream += "0" * (-len(stream) % 8)
    return [int(stream[i : i + 8], 2) for i in range(0, len(stream), 8)]


def labelstudio(path: Path, *, what="boxes") -> Path:
    """Label Studio JSON export: rectangles, polygons or brushes (percent coordinates)."""
    tasks = []
    for i, name in enumerate(BOXES):
        result = []
        base = {"original_width": W, "original_height": H, "image_rotation": 0}
        if what == "boxes":
            for cls, (x1, y1, x2, y2) in BOXES[name]:
                value = {"x": x1 * 100 / W, "y": y1 * 100 / H, "width": (x2 - x1) * 100 / W}
                value.update(height=(y2 - y1) * 100 / H, rotation=0, rectanglelabels=[cls])
                result.append({**base, "type": "rectanglelabels", "value": value})
        elif what == "polygons":
            for cls, poly in POLYGONS[name]:
                points = [[poly[k] * 100 / W, poly[k + 1] * 100 / H] for k in range(0, len(poly), 2)]
                result.append({**base, "type": "polygonlabels", "value": {"points": points, "polygonlabels": [cls]}})
        else:
            for k, cls in enumerate(CLASSES, 1):
                region = masks()[name] == k
                if region.any():
                    value = {"format": "rle", "rle": brush_rle(region), "brushlabels": [cls]}
                    result.append({**base, "type": "brushlabels", "value": value})
        tasks.append(
            {"id": i + 1, "data": {"image": f"/data/upload/1/0a1b2c3{i}-{name}"}, "annotations": [{"result": result}]}
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tasks))
    return path
