"""CVAT for images 1.1 XML: ``<annotations>`` with ``<image name width height>`` elements holding
``<box label xtl ytl xbr ybr>``, ``<polygon label points="x1,y1;x2,y2;...">`` and
``<mask label rle left top width height>`` (run lengths over the mask's own
rectangle, row by row, starting with a run of 0s).

Class names come from ``meta`` (``<labels><label><name>``), in order; without
them, the labels used, in order of first appearance. Rotated boxes, polylines
and points are not areas: each is a problem that leaves that shape out.
"""

from __future__ import annotations

from .model import ImageAnnotations, Parsed, Shape, number, polygon_problem
from .xmlsafe import parse_xml


def is_cvat(root) -> bool:
    """True for a CVAT for images XML root."""
    return (
        root.tag == "annotations"
        and root.find("image") is not None
        or (root.tag == "annotations" and (root.findtext("version") or "").strip().startswith("1."))
    )


def read_cvat(path: str, want: str) -> Parsed:
    """Read a CVAT for images 1.1 XML file.

    Raises:
        ValueError: Not well-formed, with a DTD, or not CVAT for images (names the file and line).
    """
    root = parse_xml(path)
    if root.tag != "annotations":
        raise ValueError(f"{path}: the root element is <{root.tag}>, not CVAT's <annotations>")
    parsed = Parsed()
    for label in root.iterfind("meta//labels/label"):
        name = (label.findtext("name") or "").strip()
        if name and name not in parsed.classes:
            parsed.classes.append(name)
    declared = bool(parsed.classes)
    for number_, image in enumerate(root.iter("image")):
        name = image.get("name")
        where_image = f"{path} image {image.get('id', f'#{number_}')}"
        try:
            size = (int(image.get("width", "")), int(image.get("height", "")))
        except ValueError:
            size = None
        if not name:
            parsed.problems.append((where_image, 'needs a "name"'))
            continue
        result = parsed.images[name] = ImageAnnotations(name, size, where=where_image)
        for k, element in enumerate(image, 1):
            where = f"{where_image} {element.tag} {k}"
            label = element.get("label") or ""
            if element.tag not in ("box", "polygon", "mask"):
                if element.tag in ("polyline", "points", "skeleton", "ellipse", "cuboid", "tag"):
                    parsed.problems.append((where, f"a {element.tag} is not a box, polygon or mask"))
                continue
            if not label:
                parsed.problems.append((where, 'needs a "label"'))
                continue
            if declared and label not in parsed.classes:
                parsed.problems.append((where, f'unknown class: "{label}" is not in the file\'s labels'))
                continue
            shape, problem = _shape(element, label, where, want, size)
            if problem:
                parsed.problems.append((where, problem))
                continue
            if label not in parsed.classes:
                parsed.classes.append(label)
            result.shapes.append(shape)  # type: ignore[arg-type]
    return parsed


def _shape(element, label: str, where: str, want: str, size) -> tuple[Shape | None, str | None]:
    tag = element.tag
    try:
        if tag == "box":
            if float(element.get("rotation", 0) or 0) != 0:
                return None, "a rotated box (not supported)"
            box = tuple(number(element.get(a)) for a in ("xtl", "ytl", "xbr", "ybr"))
            if want == "masks":
                return None, "a box, not a polygon or mask (segmentation needs areas)"
            return Shape(label, "box", box, where), None
        if tag == "polygon":
            flat = [number(v) for pair in (element.get("points") or "").split(";") if pair for v in pair.split(",")]
            problem = polygon_problem(flat)
            return (None, problem) if problem else (Shape(label, "polygon", (tuple(flat),), where), None)
        left, top, width, height = (int(element.get(a, "")) for a in ("left", "top", "width", "height"))
        counts = [int(v) for v in (element.get("rle") or "").split(",") if v.strip()]
    except (TypeError, ValueError):
        return None, "coordinates must be numbers"
    if width <= 0 or height <= 0 or any(c < 0 for c in counts):
        return None, "mask needs a positive width and height and non-negative run lengths"
    if sum(counts) != width * height:
        return None, f"mask RLE covers {sum(counts)} pixels, its {width}x{height} rectangle has {width * height}"
    if size is not None and (left < 0 or top < 0 or left + width > size[0] or top + height > size[1]):
        return None, "out of image: the mask's rectangle leaves the image"
    if want == "boxes":
        return Shape(label, "box", (left, top, left + width, top + height), where), None
    return Shape(label, "cvatmask", (left, top, width, height, tuple(counts)), where), None
