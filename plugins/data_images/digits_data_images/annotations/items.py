"""From annotation files to dataset entries: read a stage's source, name the classes, check every shape.

Entries (what ``itemize_entries`` returns; picklable tuples):

* ``("ann", image_path, rows, (declared_size, normalised))`` — detection: ``rows`` are
  ``(class_id, x1, y1, x2, y2)`` in source pixels (fractions when ``normalised``);
* ``("ann", image_path, shapes, (declared_size, None))`` — segmentation: ``shapes`` are
  ``(class_id, kind, data, normalised)``, painted in order by :func:`.raster.paint`;
* ``("skip", where, reason, None)`` — an annotation or file left out. Encoding it
  fails with ``where: reason``, so the core's errors report lists it (stage,
  file and line or record, reason) and the job's ``max_errors`` budget counts it
  like any skipped image.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

from .. import listing
from .coco import read_coco
from .cvat import read_cvat
from .labelstudio import read_labelstudio
from .model import Parsed
from .voc import read_voc_folder
from .yolo import read_yolo_folder

#: Label Studio prefixes uploaded files with 8 hex digits and a dash.
_UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-")

#: The name class 0 has in each task (a file's class of that name is merged into it).
BACKGROUND = {"boxes": ("dontcare",), "masks": ("background", "_background_")}


def read_source(fmt: str, image_folder: str, labels: str, want: str) -> tuple[Parsed, list[str]]:
    """Read one stage's annotations; returns ``(parsed keyed by image path, images without annotations)``.

    Args:
        fmt: ``coco``, ``voc``, ``yolo``, ``cvat`` or ``labelstudio``.
        image_folder: The stage's image folder (the only place images are read from).
        labels: The annotation file (COCO, CVAT, Label Studio) or label folder (VOC, YOLO).
        want: ``"boxes"`` or ``"masks"``.

    Raises:
        ValueError: A whole annotation file cannot be read (names the file and line).
    """
    images = listing.list_images(image_folder)
    if fmt == "voc":
        parsed = read_voc_folder(image_folder, labels, images)
    elif fmt == "yolo":
        parsed = read_yolo_folder(image_folder, labels, images, want)
    else:
        reader = {"coco": read_coco, "cvat": read_cvat, "labelstudio": read_labelstudio}[fmt]
        parsed = reader(labels, want)
        parsed.images = _match(parsed, image_folder, images)
    unmatched = [path for path in images if path not in parsed.images]
    return parsed, unmatched


def _match(parsed: Parsed, image_folder: str, images: list[str]) -> dict:
    """Re-key ``parsed.images`` by the image files they name; names without a file become problems."""
    by_rel = {os.path.normpath(os.path.relpath(p, image_folder)): p for p in images}
    by_base: dict[str, str | None] = {}
    for path in images:
        base = os.path.basename(path)
        by_base[base] = None if base in by_base else path  # None: two files share it
    found = {}
    for name, image in parsed.images.items():
        text = unquote(urlparse(name).path) if "://" in name or name.startswith("/data/") else name
        base = os.path.basename(text.replace("\\", "/"))
        path = by_rel.get(os.path.normpath(text)) if not os.path.isabs(text) else None
        path = path or by_base.get(base) or by_base.get(_UPLOAD_PREFIX.sub("", base))
        if path is None:
            parsed.problems.append(
                (
                    image.where,
                    f"missing image: {base} is not in {image_folder} ({len(image.shapes)} annotations left out)",
                )
            )
        else:
            image.name = path
            found[path] = image
    return found


def class_names(want: str, sources: list[Parsed], fixed: list[str] | None) -> list[str]:
    """The dataset's classes: ``fixed`` (the form's), else class 0 then the files' classes in order."""
    if fixed:
        return list(fixed)
    names = [BACKGROUND[want][0]]
    seen = {n.lower() for n in names} | set(BACKGROUND[want])
    for parsed in sources:
        for name in parsed.classes:
            if name.lower() not in seen:
                seen.add(name.lower())
                names.append(name)
    return names


def stage_entries(parsed: Parsed, names: list[str], want: str, others: list[str] | None = None) -> list[tuple]:
    """The entries of one stage (images in path order, then the problems as ``skip`` entries).

    Args:
        others: When the user chose the classes (a list to collect into): a shape of another class is
            no error but a deliberate choice, collected here by name; detection keeps it as a
            ``dontcare`` region (as DIGITS maps unknown KITTI types), segmentation leaves it unpainted.
            ``None``: such a shape is an unknown class, a ``skip`` entry.
    """
    lookup = {n.lower(): i for i, n in enumerate(names)}
    for alias in BACKGROUND[want]:
        lookup.setdefault(alias, 0)
    entries: list[tuple] = []
    skips = [("skip", where, reason, None) for where, reason in parsed.problems]
    for path in sorted(parsed.images):
        image = parsed.images[path]
        rows = []
        for shape in image.shapes:
            cls = 0 if want == "boxes" and shape.crowd else lookup.get(shape.label.lower())
            if cls is None and others is not None:
                others.append(shape.label)
                if want != "boxes":
                    continue
                cls = 0
            if cls is None:
                skips.append(("skip", shape.where, f'unknown class: "{shape.label}" is not one of {names}', None))
                continue
            problem = _geometry_problem(shape, image.size)
            if problem:
                skips.append(("skip", shape.where, problem, None))
            elif want == "boxes":
                rows.append((cls, *shape.box()))  # type: ignore[misc]
            else:
                rows.append((cls, shape.kind, shape.data, shape.normalised))
        normalised = any(s.normalised for s in image.shapes) if want == "boxes" else None
        entries.append(("ann", path, tuple(rows), (image.size, normalised)))
    return entries + skips


def _geometry_problem(shape, size) -> str | None:
    box = shape.box()
    if box is None:
        return None  # masks: their sizes were checked when read
    x1, y1, x2, y2 = box
    if not all(v == v and abs(v) != float("inf") for v in box) or x2 <= x1 or y2 <= y1:
        return f"degenerate box: ({x1:g}, {y1:g}, {x2:g}, {y2:g}) has no area"
    bounds = (1.0, 1.0) if shape.normalised else size
    if bounds is not None and (x2 <= 0 or y2 <= 0 or x1 >= bounds[0] or y1 >= bounds[1]):
        return f"out of image: ({x1:g}, {y1:g}, {x2:g}, {y2:g}) is outside the {bounds[0]:g}x{bounds[1]:g} image"
    return None
