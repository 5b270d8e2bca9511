"""Reading KITTI label files (object detection): one object per line, type and bbox used.

Shared by the ``object-detection`` data plugin (through ``digits_core.read_kitti_labels``)
and inference ground truth. No TensorFlow here.
"""

from __future__ import annotations

import numpy as np


def read_kitti_labels(path: str, lookup: dict[str, int]) -> np.ndarray:
    """Read one KITTI label file into float32 ``N×5`` boxes (class, left, top, right, bottom).

    Lines have 15 space-separated columns (a 16th, ``score``, is accepted):
    type, truncated, occluded, alpha, bbox left top right bottom, 3-D
    dimensions, location, rotation_y. Types are looked up lower-cased in
    ``lookup``; unknown types map to class 0 (``dontcare``).

    Raises:
        ValueError: A bad line, naming the file and line number (1-based).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read label file ({getattr(exc, 'strerror', None) or exc})") from None
    boxes = []
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) not in (15, 16):
            raise ValueError(f"{path} line {number}: expected 15 columns (KITTI), found {len(fields)}")
        try:
            left, top, right, bottom = (float(v) for v in fields[4:8])
        except ValueError:
            raise ValueError(f"{path} line {number}: bbox columns 5-8 must be numbers") from None
        if not all(np.isfinite(v) for v in (left, top, right, bottom)):
            raise ValueError(f"{path} line {number}: bbox is not finite")
        if right < left or bottom < top:
            raise ValueError(f"{path} line {number}: bbox right/bottom ({right}, {bottom}) is before "
                             f"left/top ({left}, {top})")
        boxes.append((lookup.get(fields[0].lower(), 0), left, top, right, bottom))
    return np.asarray(boxes, np.float32).reshape(-1, 5)
