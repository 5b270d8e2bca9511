"""Pascal VOC: one XML file per image (``Annotations/ID.xml`` ↔ ``ID.jpg``) with ``size`` and
``object`` elements (``name``, ``bndbox`` ``xmin ymin xmax ymax``).

Coordinates: the VOC toolkit writes 1-based pixel indexes, both ends
included, so ``xmin=1, xmax=W`` covers the whole width. They are read as the
box ``(xmin − 1, ymin − 1, xmax, ymax)`` in continuous pixel coordinates
(0 = the left edge of the first pixel), which is what KITTI and COCO boxes
are here; the exporter writes the inverse. Detectron2 reads VOC the same
way. Segmentation in VOC is palette PNGs (``SegmentationClass``), read by
the plain label-folder path of ``image-segmentation``.
"""

from __future__ import annotations

import os

from digits_core.paths import resolve_in_roots

from .model import ImageAnnotations, Parsed, Shape, number
from .xmlsafe import XMLRefused, parse_xml
from .yolo import read_names

#: Class-name files (one name per line, index = class id) looked for next to the label folder.
NAME_FILES = ("labels.txt", "classes.txt")


def find_names_file(label_folder: str) -> str | None:
    """``labels.txt`` or ``classes.txt`` in ``label_folder`` or up to two folders above it, or ``None``."""
    folder = os.path.abspath(label_folder)
    for _ in range(3):
        for name in NAME_FILES:
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
        folder = os.path.dirname(folder)
    return None


def read_voc_folder(image_folder: str, label_folder: str, images: list[str]) -> Parsed:
    """Read ``label_folder/ID.xml`` for each image ``image_folder/ID.*``.

    Images without an XML file are left out (not in ``images`` of the
    result); a file that cannot be parsed is a problem that leaves its image
    out. Class names are those of a ``labels.txt`` / ``classes.txt`` file found in the label
    folder or up to two folders above it (what ``digits dataset export --format voc`` writes),
    then object names in order of first appearance.
    """
    parsed = Parsed()
    names_file = find_names_file(label_folder)
    if names_file:
        parsed.classes = read_names(names_file)
    for path in images:
        ident = os.path.splitext(os.path.relpath(path, image_folder))[0]
        label = os.path.join(label_folder, ident + ".xml")
        if not os.path.lexists(label):
            continue
        real = str(resolve_in_roots(label, where=f"label file {label}"))
        try:
            parsed.images[path] = read_voc_file(real, path, parsed)
        except XMLRefused as exc:
            parsed.problems.append((label, f"{exc} (image left out)"))
        except ValueError as exc:
            parsed.problems.append((label, f"{exc} (image left out)"))
    return parsed


def _text(element, tag: str) -> str | None:
    child = element.find(tag)
    return child.text.strip() if child is not None and child.text is not None else None


def read_voc_file(path: str, image_name: str, parsed: Parsed) -> ImageAnnotations:
    """Read one VOC XML file into the annotations of ``image_name``; class names go to ``parsed``.

    Raises:
        XMLRefused: Not well-formed, or with a DTD.
        ValueError: Not a VOC ``<annotation>``.
    """
    root = parse_xml(path)
    if root.tag != "annotation":
        raise ValueError(f"{path}: the root element is <{root.tag}>, not <annotation>")
    size = None
    size_el = root.find("size")
    if size_el is not None:
        try:
            size = (int(float(_text(size_el, "width") or "")), int(float(_text(size_el, "height") or "")))
        except ValueError:
            raise ValueError(f"{path}: <size> needs numeric <width> and <height>") from None
        if size[0] <= 0 or size[1] <= 0:
            size = None  # VOC files written without the image's size say 0
    result = ImageAnnotations(image_name, size, where=path)
    for number_, obj in enumerate(root.iter("object"), 1):
        where = f"{path} object {number_}"
        name = _text(obj, "name")
        box = obj.find("bndbox")
        if not name or box is None:
            parsed.problems.append((where, "needs a <name> and a <bndbox>"))
            continue
        try:
            xmin, ymin, xmax, ymax = (number(_text(box, tag)) for tag in ("xmin", "ymin", "xmax", "ymax"))
        except (TypeError, ValueError):
            parsed.problems.append((where, "<bndbox> needs numeric <xmin> <ymin> <xmax> <ymax>"))
            continue
        if name not in parsed.classes:
            parsed.classes.append(name)
        result.shapes.append(Shape(name, "box", (xmin - 1, ymin - 1, xmax, ymax), where))
    return result
