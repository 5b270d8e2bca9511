"""Reading KITTI label files (object detection): one object per line, type and bbox used.

Shared by the ``object-detection`` data plugin (through ``digits_core.read_kitti_labels``)
and inference ground truth. No TensorFlow here.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..paths import open_in_roots

#: Most objects one label file may hold (a bigger file is refused as it is read; training keeps 64 per image).
MAX_OBJECTS_PER_IMAGE = 2000


def read_kitti_labels(path: str, lookup: dict[str, int]) -> np.ndarray:
    """Read one KITTI label file into float32 ``N×5`` boxes (class, left, top, right, bottom).

    Lines have 15 space-separated columns (a 16th, ``score``, is accepted):
    type, truncated, occluded, alpha, bbox left top right bottom, 3-D
    dimensions, location, rotation_y. Types are looked up lower-cased in
    ``lookup``; unknown types map to class 0 (``dontcare``).

    The file is opened through :func:`digits_core.paths.open_in_roots`: on
    the web server a label file (or a symlink) outside the data roots is
    refused, not read.

    Raises:
        ValueError: A bad line, naming the file and line number (1-based),
            more than :data:`MAX_OBJECTS_PER_IMAGE` objects, or a path outside the data roots.
    """
    try:
        with open_in_roots(path, "r", encoding="utf-8", where=f"label file {path}") as handle:
            return _parse_lines(path, handle, lookup)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read label file ({getattr(exc, 'strerror', None) or exc})") from None


def _parse_lines(path: str, lines: Iterable[str], lookup: dict[str, int]) -> np.ndarray:
    boxes: list[tuple] = []
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(boxes) >= MAX_OBJECTS_PER_IMAGE:
            raise ValueError(f"{path}: more than {MAX_OBJECTS_PER_IMAGE} objects in one label file")
        if len(fields) not in (15, 16):
            raise ValueError(f"{path} line {number}: expected 15 columns (KITTI), found {len(fields)}")
        try:
            left, top, right, bottom = (float(v) for v in fields[4:8])
        except ValueError:
            raise ValueError(f"{path} line {number}: bbox columns 5-8 must be numbers") from None
        if not all(np.isfinite(v) for v in (left, top, right, bottom)):
            raise ValueError(f"{path} line {number}: bbox is not finite")
        if right < left or bottom < top:
            raise ValueError(
                f"{path} line {number}: bbox right/bottom ({right}, {bottom}) is before left/top ({left}, {top})"
            )
        boxes.append((lookup.get(fields[0].lower(), 0), left, top, right, bottom))
    return np.asarray(boxes, np.float32).reshape(-1, 5)
