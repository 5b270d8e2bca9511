"""YOLO / Ultralytics: ``labels/ID.txt`` per image ``images/ID.jpg``, one object per line.

Detection lines are ``class cx cy w h``, segmentation lines ``class x1 y1 x2 y2 ...``
(at least 3 points), every coordinate a fraction of the image's width or
height. Class names come from ``data.yaml`` (``names``: a list, or a mapping
id → name) found in the label folder or up to two folders above it, else from
``classes.txt`` / ``obj.names`` (one per line) there; without one the
classes are named by their ids. As in Ultralytics, an image without a label
file is an image without objects.

A line that cannot be parsed (a wrong number of values, not numbers) leaves
its image out, named by file and line; a class id without a name is an
unknown class and leaves out that object only.
"""

from __future__ import annotations

import os

from digits_core.paths import resolve_in_roots

from .model import ImageAnnotations, Parsed, Shape, number, polygon_problem

NAME_FILES = ("data.yaml", "dataset.yaml", "classes.txt", "obj.names")


def find_names_file(label_folder: str) -> str | None:
    """The class-names file for ``label_folder`` (see the module docstring), or ``None``."""
    folder = os.path.abspath(label_folder)
    for _ in range(3):
        for name in NAME_FILES:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
        folder = os.path.dirname(folder)
    return None


def read_names(path: str) -> list[str]:
    """Class names from ``data.yaml`` or a one-name-per-line file.

    Raises:
        ValueError: Unreadable, or a YAML file without ``names`` (names the file).
    """
    real = str(resolve_in_roots(path, where=f"class names file {path}"))
    try:
        with open(real, encoding="utf-8") as handle:
            text = handle.read(16 * 2**20)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read ({type(exc).__name__})") from None
    if not path.endswith(".yaml"):
        return [line.strip() for line in text.splitlines() if line.strip()]
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise ValueError(f"{path}{f' line {line + 1}' if line is not None else ''}: not valid YAML") from None
    names = data.get("names") if isinstance(data, dict) else None
    if isinstance(names, dict):
        try:
            by_id = {int(k): str(v) for k, v in names.items()}
        except (TypeError, ValueError):
            raise ValueError(f"{path}: names must map class ids to names") from None
        return [by_id.get(i, str(i)) for i in range(max(by_id) + 1)] if by_id else []
    if isinstance(names, list):
        return [str(n) for n in names]
    raise ValueError(f'{path}: needs "names" (a list, or a mapping of class ids to names)')


def read_yolo_folder(image_folder: str, label_folder: str, images: list[str], want: str) -> Parsed:
    """Read ``label_folder/ID.txt`` for each image ``image_folder/ID.*``.

    Args:
        want: ``"boxes"`` (polygons become their bounding boxes) or ``"masks"`` (boxes are refused).
    """
    parsed = Parsed()
    names_file = find_names_file(label_folder)
    parsed.classes = read_names(names_file) if names_file else []
    named = bool(names_file)
    for path in images:
        ident = os.path.splitext(os.path.relpath(path, image_folder))[0]
        label = os.path.join(label_folder, ident + ".txt")
        image = ImageAnnotations(path, None, where=label)
        if os.path.lexists(label):
            real = str(resolve_in_roots(label, where=f"label file {label}"))
            try:
                _read_file(real, label, image, parsed, want, named)
            except ValueError as exc:
                parsed.problems.append((label, f"{exc} (image left out)"))
                continue
        parsed.images[path] = image
    return parsed


def _read_file(path: str, shown: str, image: ImageAnnotations, parsed: Parsed, want: str, named: bool) -> None:
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read(64 * 2**20).splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read ({type(exc).__name__})") from None
    shapes = []
    for number_, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        where = f"{shown} line {number_}"
        if len(fields) != 5 and (len(fields) < 7 or len(fields) % 2 == 0):
            raise ValueError(
                f"line {number_}: {len(fields)} values; expected 5 (class cx cy w h) "
                "or a class and at least 3 x y points"
            )
        try:
            cls = int(fields[0])
            values = [number(v) for v in fields[1:]]
        except ValueError:
            raise ValueError(f"line {number_}: the class must be an integer and the coordinates numbers") from None
        if cls < 0 or (named and cls >= len(parsed.classes)):
            parsed.problems.append((where, f"unknown class: id {cls} has no name in the class names file"))
            continue
        if not named:
            while len(parsed.classes) <= cls:
                parsed.classes.append(str(len(parsed.classes)))
        label = parsed.classes[cls]
        if len(fields) == 5:
            if want == "masks":
                parsed.problems.append((where, "a box, not a polygon (segmentation needs polygons)"))
                continue
            cx, cy, w, h = values
            shapes.append(Shape(label, "box", (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), where, normalised=True))
            continue
        problem = polygon_problem(values)
        if problem:
            parsed.problems.append((where, problem))
            continue
        shapes.append(Shape(label, "polygon", (tuple(values),), where, normalised=True))
    image.shapes.extend(shapes)
