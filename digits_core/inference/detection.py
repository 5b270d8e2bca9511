"""Detector outputs as boxes in the input image's coordinates.

The network sees the input resized (and possibly cropped or padded) to the
dataset's size with the dataset's resize mode; its decoded output (``[K,
6]`` rows ``(class, score, x1, y1, x2, y2)``, see
:func:`digits_core.inference.model.detection_rows`) is in those pixels.
:func:`to_detections` undoes the resize with the exact coordinate map the
dataset used for its labels (:func:`digits_core.boxes.geometry.resize_geometry`)
and returns ``[{"class", "class_id", "score", "box": [x1, y1, x2, y2]}]``,
best first, above a score threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..boxes.geometry import invert_boxes, resize_geometry

#: Detections below this score are not reported (the view's ``score_threshold`` overrides it).
DEFAULT_SCORE_THRESHOLD = 0.3


def source_size(item: Any) -> tuple[int, int] | None:
    """``(height, width)`` of an inference input before resizing (``None`` if unknown)."""
    if getattr(item, "array", None) is not None:
        height, width = np.asarray(item.array).shape[:2]
        return int(height), int(width)
    path = getattr(item, "path", None)
    if path is None:
        return None
    from PIL import Image

    try:
        with Image.open(path) as image:
            return int(image.size[1]), int(image.size[0])
    except OSError:
        return None


def to_detections(
    rows: np.ndarray,
    net_hw: tuple[int, int],
    src_hw: tuple[int, int] | None,
    resize_mode: str,
    class_labels: list | None,
    threshold: float = DEFAULT_SCORE_THRESHOLD,
) -> list[dict]:
    """Decoded rows → detections in the source image's pixels.

    Args:
        rows: ``[K, 6]`` ``(class, score, x1, y1, x2, y2)`` in network-input pixels.
        net_hw: The network input's ``(H, W)``.
        src_hw: The input image's ``(H, W)`` (``None``: report network pixels).
        resize_mode: The dataset's resize mode.
        class_labels: Class names (index = class id).
        threshold: Lowest score reported.
    """
    rows = np.asarray(rows, np.float64).reshape(-1, 6)
    rows = rows[rows[:, 1] >= threshold]
    rows = rows[np.argsort(-rows[:, 1], kind="stable")]
    boxes = rows[:, 2:]
    if src_hw is not None:
        geometry = resize_geometry(src_hw[0], src_hw[1], net_hw[0], net_hw[1], resize_mode or "squash")
        boxes = invert_boxes(boxes, geometry, src_hw[0], src_hw[1])
    names = list(class_labels or [])
    out = []
    for (cls, score, *_), box in zip(rows, boxes):
        c = int(cls)
        out.append(
            {
                "class": str(names[c]) if c < len(names) else str(c),
                "class_id": c,
                "score": round(float(score), 4),
                "box": [round(float(v), 2) for v in box],
            }
        )
    return out


def ground_truth_boxes(model: Any, item: Any, label: Any, where: str) -> np.ndarray:
    """An input's known boxes in network-input pixels (what the view compares detections with).

    Args:
        model: The :class:`~digits_core.inference.model.InferenceModel`.
        item: The input (its image gives the source size).
        label: A KITTI label file (path, relative to the list file's folder) or an
            ``N×5`` array ``(class, x1, y1, x2, y2)`` in the input image's pixels.
        where: Names the label in error messages.

    Raises:
        InferenceError: Missing or malformed label file.
    """
    from ..boxes.geometry import transform_boxes
    from ..boxes.kitti import read_kitti_labels
    from ..errors import InferenceError
    from ..paths import resolve_in_roots

    if isinstance(label, np.ndarray):
        boxes = label.astype(np.float32).reshape(-1, 5)
    else:
        try:
            path = resolve_in_roots(str(label), base=getattr(item, "base", None), where=f"{where}: the label file")
        except ValueError as exc:
            raise InferenceError(str(exc)) from None
        if not path.is_file():
            raise InferenceError(f"{where}: label file {path} does not exist.")
        lookup = {str(n).lower(): i for i, n in enumerate(model.class_labels or [])}
        try:
            boxes = read_kitti_labels(str(path), lookup)
        except ValueError as exc:
            raise InferenceError(f"{where}: {exc}") from None
    src = source_size(item)
    h, w = model.feature_shape[:2]
    if src is None:
        return boxes
    return transform_boxes(boxes, resize_geometry(src[0], src[1], h, w, model.dataset.resize_mode or "squash"))
