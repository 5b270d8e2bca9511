"""Reading detection labels: KITTI text files, COCO JSON, and DIGITS's class mapping.

KITTI: one ``IDENTIFIER.txt`` per ``IDENTIFIER.png|jpg``, one object per
line, 15 space-separated columns (type, truncated, occluded, alpha, bbox
left top right bottom, 3 dimensions, 3 location values, rotation_y; a 16th
``score`` column is accepted). Only type and bbox are used, as in DIGITS.

COCO: one JSON file per stage with ``images`` (``id``, ``file_name``),
``annotations`` (``image_id``, ``category_id``, ``bbox`` ``[x, y, w, h]``,
``iscrowd``) and ``categories`` (``id``, ``name``). Crowd regions become
``dontcare``.

Class mapping (DIGITS): type names are matched case-insensitively; unknown
types map to class 0, ``dontcare``.
"""

from __future__ import annotations

import json
import os

import numpy as np

from digits_core import read_kitti_labels as parse_kitti  # noqa: F401 - re-exported: the plugin's KITTI reader
from digits_core.paths import resolve_in_roots

#: DIGITS's default KITTI class mapping (index = class id).
KITTI_CLASSES = (
    "dontcare",
    "car",
    "van",
    "truck",
    "bus",
    "pickup",
    "vehicle-with-trailer",
    "special-vehicle",
    "person",
    "person-fa",
    "person?",
    "people",
    "cyclist",
    "tram",
    "person_sitting",
)


def parse_class_mapping(text: str | None) -> list[str]:
    """``"dontcare,pedestrian"`` → ``["dontcare", "pedestrian"]``; empty → :data:`KITTI_CLASSES`.

    Raises:
        ValueError: An empty or repeated name.
    """
    if not text or not str(text).strip():
        return list(KITTI_CLASSES)
    names = [n.strip() for n in str(text).split(",")]
    if any(not n for n in names):
        raise ValueError(f'custom classes "{text}" has an empty name; separate names with single commas')
    lowered = [n.lower() for n in names]
    dup = sorted({n for n in lowered if lowered.count(n) > 1})
    if dup:
        raise ValueError(f"custom classes name {', '.join(dup)} twice")
    return names


def class_lookup(names: list[str]) -> dict[str, int]:
    """Lower-case type name → class id."""
    return {n.lower(): i for i, n in enumerate(names)}


def read_coco(path: str, names: list[str] | None) -> tuple[list[str], dict[str, list]]:
    """Read a COCO annotation file.

    Args:
        path: The JSON file.
        names: A class mapping to match category names against (unknown → 0);
            ``None`` makes one: ``dontcare`` then the categories by id.

    Returns:
        ``(class names, {file_name: [[class, x1, y1, x2, y2], ...]})`` with
        every image listed (images without annotations get ``[]``).

    Raises:
        ValueError: Not COCO JSON, or a bad annotation (names the file and annotation id).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({type(exc).__name__})") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("images"), list)
        or not isinstance(data.get("annotations", []), list)
    ):
        raise ValueError(f'{path}: not COCO annotations (need "images" and "annotations" lists)')
    categories = data.get("categories") or []
    try:
        cat_names = {int(c["id"]): str(c["name"]) for c in categories}
    except (KeyError, TypeError, ValueError):
        raise ValueError(f'{path}: every category needs an "id" and a "name"') from None
    if names is None:
        names = ["dontcare"] + [cat_names[k] for k in sorted(cat_names) if cat_names[k].lower() != "dontcare"]
    lookup = class_lookup(names)
    files: dict[int, str] = {}
    for number, image in enumerate(data["images"]):
        try:
            files[int(image["id"])] = str(image["file_name"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f'{path}: image #{number} needs an "id" and a "file_name"') from None
    boxes: dict[str, list] = {name: [] for name in files.values()}
    for number, ann in enumerate(data.get("annotations", [])):
        ident = ann.get("id", f"#{number}") if isinstance(ann, dict) else f"#{number}"
        try:
            image_id = int(ann["image_id"])
            x, y, w, h = (float(v) for v in ann["bbox"])
            category = int(ann["category_id"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f'{path} annotation {ident}: needs "image_id", "category_id" and a 4-number '
                '"bbox" [x, y, width, height]'
            ) from None
        if image_id not in files:
            raise ValueError(f"{path} annotation {ident}: image_id {image_id} is not in images")
        if not all(np.isfinite(v) for v in (x, y, w, h)) or w < 0 or h < 0:
            raise ValueError(f"{path} annotation {ident}: bbox needs finite x, y and width, height >= 0")
        cls = 0 if ann.get("iscrowd") else lookup.get(cat_names.get(category, "").lower(), 0)
        boxes[files[image_id]].append([cls, x, y, x + w, y + h])
    return names, boxes


def pair_kitti(image_folder: str, label_folder: str, images: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Pair ``IDENTIFIER.png|jpg`` with ``label_folder/IDENTIFIER.txt``; return ``(pairs, images without labels)``.

    On the web server a label file that leads outside the data roots (a
    symlink) is an error (:func:`digits_core.paths.resolve_in_roots`), whether
    or not anything exists where it points; the pair keeps the resolved path.
    """
    pairs, missing = [], []
    for path in images:
        ident = os.path.splitext(os.path.relpath(path, image_folder))[0]
        label = os.path.join(label_folder, ident + ".txt")
        if not os.path.lexists(label):
            missing.append(path)
            continue
        real = str(resolve_in_roots(label, where=f"label file {label}"))
        (pairs.append((path, real)) if os.path.isfile(real) else missing.append(path))
    return pairs, missing
