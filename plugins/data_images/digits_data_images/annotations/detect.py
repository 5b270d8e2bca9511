"""Telling an annotation format from the files: ``auto`` in the dataset forms.

Each answer comes with the reason, which the dataset log shows (and the
dataset's userdata keeps as ``label_format_detected``).
"""

from __future__ import annotations

import os

from .coco import is_coco, load_json
from .labelstudio import is_labelstudio
from .xmlsafe import XMLRefused, parse_xml

#: Label files looked at in a folder before deciding.
SAMPLE = 20


def detect_file(path: str) -> tuple[str, str]:
    """``(format, reason)`` for one annotation file (COCO, CVAT or Label Studio).

    Raises:
        ValueError: The file is none of them (names the file and what was found).
    """
    name = os.path.basename(path)
    if path.lower().endswith(".xml"):
        try:
            root = parse_xml(path)
        except XMLRefused as exc:
            raise ValueError(str(exc)) from None
        if root.tag == "annotations":
            return "cvat", f"{name} is XML with an <annotations> root (CVAT for images)"
        raise ValueError(f"{path}: XML with a <{root.tag}> root is not CVAT for images (<annotations>)")
    data = load_json(path)
    if is_coco(data):
        return "coco", f'{name} is a JSON object with "images" and "annotations" lists (COCO)'
    if is_labelstudio(data):
        return "labelstudio", f'{name} is a JSON list of tasks with "data" (Label Studio)'
    raise ValueError(
        f'{path}: neither COCO (an object with "images" and "annotations") nor Label Studio (a list of tasks); '
        "choose the label format"
    )


def detect_folder(folder: str, want: str) -> tuple[str, str]:
    """``(format, reason)`` for a folder of label files.

    Args:
        folder: The label folder.
        want: ``"boxes"`` (KITTI, VOC XML or YOLO files) or ``"masks"`` (YOLO-seg files or
            label images, which are VOC's segmentation format).

    Raises:
        ValueError: No label files in the folder (names it).
    """
    xml, txt, png = [], [], []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for file in sorted(files):
            lower = file.lower()
            bucket = (
                xml
                if lower.endswith(".xml")
                else txt
                if lower.endswith(".txt")
                else png
                if lower.endswith(".png")
                else None
            )
            if bucket is not None and len(bucket) < SAMPLE and not file.startswith("."):
                bucket.append(os.path.join(root, file))
        if len(xml) + len(txt) + len(png) >= SAMPLE:
            break
    if want == "masks":
        if png and len(png) >= len(txt):
            return "voc", f"{folder} holds .png label images (class-index masks, as VOC's SegmentationClass)"
        if txt:
            return "yolo", f"{folder} holds .txt label files (YOLO segmentation: class x1 y1 x2 y2 ...)"
        raise ValueError(f"{folder}: no .png label images or .txt YOLO files to tell the label format from")
    if xml and len(xml) >= len(txt):
        return "voc", f"{folder} holds .xml label files (Pascal VOC)"
    if txt:
        return _txt_format(folder, txt)
    raise ValueError(f"{folder}: no .txt or .xml label files to tell the label format from; choose the format")


def _txt_format(folder: str, files: list[str]) -> tuple[str, str]:
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                line = next((line for line in handle if line.strip()), None)
        except OSError:
            continue
        if line is None:
            continue
        first = line.split()[0]
        try:
            int(first)
        except ValueError:
            return "kitti", f"{os.path.basename(path)} starts with a type name ({len(line.split())} columns: KITTI)"
        return "yolo", f"{os.path.basename(path)} starts with a class number (YOLO: class cx cy w h)"
    return "kitti", f"every .txt label file in {folder} is empty: KITTI assumed"
