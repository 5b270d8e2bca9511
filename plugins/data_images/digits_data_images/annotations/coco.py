"""COCO JSON: ``images`` (``id``, ``file_name``, ``width``, ``height``), ``annotations``
(``image_id``, ``category_id``, ``bbox`` ``[x, y, w, h]`` in pixels, ``segmentation`` as
polygons or RLE, ``iscrowd``) and ``categories`` (``id``, ``name``).

Class names are the categories ordered by id. An annotation that cannot be
used (no such image or category, a bad box, a polygon of fewer than 3 points,
an RLE of another size than its image) is a problem named by file and
annotation id; the rest of the file is read.
"""

from __future__ import annotations

import json
import os

from .model import ImageAnnotations, Parsed, Shape, number, polygon_problem
from .rle import coco_counts

#: Largest annotation JSON read (bytes): a bound on what a hostile file can make us hold.
MAX_JSON_BYTES = 1024 * 2**20


def load_json(path: str):
    """Read a JSON file.

    Raises:
        ValueError: Unreadable, larger than :data:`MAX_JSON_BYTES`, or not JSON (names the file and line).
    """
    try:
        if os.path.getsize(path) > MAX_JSON_BYTES:
            raise ValueError(f"{path}: larger than {MAX_JSON_BYTES // 2**20} MiB")
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({type(exc).__name__})") from None


def is_coco(data) -> bool:
    """True for a JSON object with ``images`` and ``annotations`` lists."""
    return isinstance(data, dict) and isinstance(data.get("images"), list) and isinstance(data.get("annotations"), list)


def read_coco(path: str, want: str) -> Parsed:
    """Read a COCO annotation file.

    Args:
        path: The JSON file.
        want: ``"boxes"`` (each annotation's ``bbox``) or ``"masks"`` (its ``segmentation``).

    Raises:
        ValueError: Not a COCO file at all (names the file).
    """
    data = load_json(path)
    if not is_coco(data):
        raise ValueError(f'{path}: not COCO annotations (need "images" and "annotations" lists)')
    parsed = Parsed()
    categories: dict[int, str] = {}
    for number_, cat in enumerate(data.get("categories") or []):
        try:
            categories[int(cat["id"])] = str(cat["name"])
        except (KeyError, TypeError, ValueError):
            parsed.problems.append((f"{path} category #{number_}", 'needs an "id" and a "name"'))
    parsed.classes = [categories[k] for k in sorted(categories)]
    by_id: dict[int, ImageAnnotations] = {}
    for number_, image in enumerate(data["images"]):
        try:
            ident, name = int(image["id"]), str(image["file_name"])
            size = (int(image["width"]), int(image["height"])) if "width" in image and "height" in image else None
        except (KeyError, TypeError, ValueError):
            parsed.problems.append((f"{path} image #{number_}", 'needs an "id" and a "file_name"'))
            continue
        by_id[ident] = parsed.images[name] = ImageAnnotations(name, size, where=f"{path} image {ident}")
    for number_, ann in enumerate(data["annotations"]):
        ident = ann.get("id", f"#{number_}") if isinstance(ann, dict) else f"#{number_}"
        where = f"{path} annotation {ident}"
        if not isinstance(ann, dict):
            parsed.problems.append((where, "not a JSON object"))
            continue
        try:
            image_id, category = int(ann["image_id"]), int(ann["category_id"])
        except (KeyError, TypeError, ValueError):
            parsed.problems.append((where, 'needs an "image_id" and a "category_id"'))
            continue
        image = by_id.get(image_id)
        if image is None:
            parsed.problems.append((where, f"missing image: image_id {image_id} is not in images"))
            continue
        if category not in categories:
            parsed.problems.append((where, f"unknown class: category_id {category} is not in categories"))
            continue
        shape, problem = _shape(ann, categories[category], where, want, image.size)
        if problem:
            parsed.problems.append((where, problem))
        else:
            image.shapes.append(shape)  # type: ignore[arg-type]
    return parsed


def _shape(ann: dict, label: str, where: str, want: str, size) -> tuple[Shape | None, str | None]:
    crowd = bool(ann.get("iscrowd"))
    if want == "boxes":
        try:
            x, y, w, h = (number(v) for v in ann["bbox"])
        except (KeyError, TypeError, ValueError):
            return None, 'needs a 4-number "bbox" [x, y, width, height]'
        return Shape(label, "box", (x, y, x + w, y + h), where, crowd=crowd), None
    seg = ann.get("segmentation")
    if isinstance(seg, list):
        if not seg:
            return None, "empty segmentation"
        polys = []
        for poly in seg:
            try:
                flat = [number(v) for v in poly]
            except (TypeError, ValueError):
                return None, "a polygon holds something other than numbers"
            problem = polygon_problem(flat)
            if problem:
                return None, problem
            polys.append(tuple(flat))
        return Shape(label, "polygon", tuple(polys), where, crowd=crowd), None
    if isinstance(seg, dict):
        try:
            h, w = (int(v) for v in seg["size"])
            counts = coco_counts(seg["counts"])
        except (KeyError, TypeError, ValueError) as exc:
            return None, f"bad RLE ({exc})" if isinstance(exc, ValueError) else 'RLE needs "size" and "counts"'
        if size is not None and (w, h) != tuple(size):
            return None, f"RLE size {w}x{h} is not the image's {size[0]}x{size[1]}"
        if sum(counts) != h * w:
            return None, f"RLE covers {sum(counts)} pixels, its size {w}x{h} has {h * w}"
        return Shape(label, "rle", (h, w, tuple(counts)), where, crowd=crowd), None
    return None, "no segmentation (polygons or RLE)"
