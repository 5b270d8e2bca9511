"""Label Studio JSON export: a list of tasks, each with ``data`` (the image's URL or path) and
``annotations`` (older exports: ``completions``) whose ``result`` items are
``rectanglelabels`` (``x y width height`` in percent of ``original_width`` /
``original_height``), ``polygonlabels`` (``points`` in percent) or
``brushlabels`` (``rle``: see :mod:`.rle`).

The image is matched by the last part of its URL (Label Studio's upload
prefix ``abcd1234-`` is dropped when only the rest matches a file); no URL
or path in the file is opened. The first annotation of a task is read (later
ones are other annotators' versions). The JSON export holds no label list:
class names are the labels used, sorted.
"""

from __future__ import annotations

from .coco import load_json
from .model import ImageAnnotations, Parsed, Shape, number, polygon_problem
from .rle import brush_length

KINDS = {"rectanglelabels": "box", "polygonlabels": "polygon", "brushlabels": "brush"}


def is_labelstudio(data) -> bool:
    """True for a list of tasks with ``data`` (or one such task)."""
    tasks = data if isinstance(data, list) else [data]
    return bool(tasks) and all(isinstance(t, dict) and isinstance(t.get("data"), dict) for t in tasks[:5])


def image_name(data: dict) -> str | None:
    """The image reference of a task's ``data`` (``image``, else its first string value)."""
    value = data.get("image")
    if not isinstance(value, str):
        value = next((v for v in data.values() if isinstance(v, str)), None)
    return value


def read_labelstudio(path: str, want: str) -> Parsed:
    """Read a Label Studio JSON export.

    Raises:
        ValueError: Not JSON, or not a Label Studio export (names the file and line).
    """
    data = load_json(path)
    if not is_labelstudio(data):
        raise ValueError(f'{path}: not a Label Studio JSON export (need a list of tasks with "data")')
    parsed = Parsed()
    labels: set[str] = set()
    for number_, task in enumerate(data if isinstance(data, list) else [data]):
        where_task = f"{path} task {task.get('id', f'#{number_}')}"
        name = image_name(task["data"])
        if not name:
            parsed.problems.append((where_task, "no image in data"))
            continue
        annotations = task.get("annotations") or task.get("completions") or []
        results = annotations[0].get("result", []) if annotations and isinstance(annotations[0], dict) else []
        image = parsed.images[name] = ImageAnnotations(name, None, where=where_task)
        for k, item in enumerate(results if isinstance(results, list) else [], 1):
            where = f"{where_task} result {item.get('id', k) if isinstance(item, dict) else k}"
            shape, problem = _shape(item, where, want, image)
            if problem:
                parsed.problems.append((where, problem))
            elif shape is not None:
                labels.add(shape.label)
                image.shapes.append(shape)
    parsed.classes = sorted(labels)
    return parsed


def _shape(item, where: str, want: str, image: ImageAnnotations) -> tuple[Shape | None, str | None]:
    if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
        return None, 'needs a "value" object'
    kind = KINDS.get(str(item.get("type")))
    if kind is None:
        return None, None  # choices, text areas, relations: not shapes, nothing lost
    value = item["value"]
    names = value.get(item["type"]) or value.get("labels")
    if not isinstance(names, list) or not names:
        return None, f'needs a label in "{item["type"]}"'
    try:
        width, height = int(item["original_width"]), int(item["original_height"])
    except (KeyError, TypeError, ValueError):
        return None, 'needs "original_width" and "original_height"'
    if image.size is None:
        image.size = (width, height)
    elif image.size != (width, height):
        return None, f"original size {width}x{height} differs from the task's other results"
    label = str(names[0])
    try:
        if kind == "box":
            if number(value.get("rotation", 0) or 0) != 0:
                return None, "a rotated rectangle (not supported)"
            sides = (("x", width), ("y", height), ("width", width), ("height", height))
            x, y, w, h = (round(number(value[k]) * side / 100, 6) for k, side in sides)
            if want == "masks":
                return None, "a rectangle, not a polygon or brush (segmentation needs areas)"
            return Shape(label, "box", (x, y, x + w, y + h), where), None
        if kind == "polygon":
            flat = [round(number(p[i]) * (width, height)[i] / 100, 6) for p in value["points"] for i in (0, 1)]
            problem = polygon_problem(flat)
            return (None, problem) if problem else (Shape(label, "polygon", (tuple(flat),), where), None)
        rle = bytes(int(v) for v in value["rle"])
    except (KeyError, TypeError, ValueError, IndexError):
        return None, "coordinates must be numbers (and rle a list of bytes)"
    if want == "boxes":
        return None, "a brush mask has no box (detection needs rectangles or polygons)"
    try:
        declared = brush_length(rle)
    except ValueError as exc:
        return None, str(exc)
    if declared != width * height * 4:
        return None, f"brush RLE holds {declared} values, the {width}x{height} image needs {width * height * 4}"
    return Shape(label, "brush", (height, width, rle), where), None
