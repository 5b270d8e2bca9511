"""What every annotation reader returns: :class:`Shape`, :class:`ImageAnnotations`, :class:`Parsed`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Shape kinds: a box ``(x1, y1, x2, y2)``; polygons ``((x, y, x, y, ...), ...)``; a COCO RLE
#: ``(height, width, counts)`` (column-major run lengths, starting with background); a Label
#: Studio brush ``(height, width, bytes)``.
SHAPE_KINDS = ("box", "polygon", "rle", "brush")


@dataclass(frozen=True)
class Shape:
    """One annotation as the file gives it.

    Attributes:
        label: The class name as written in the file.
        kind: One of :data:`SHAPE_KINDS`.
        data: The geometry (see :data:`SHAPE_KINDS`), in the source image's pixels, or in
            fractions of its width and height when ``normalised`` (YOLO).
        where: File and line or record, for messages.
        crowd: A COCO ``iscrowd`` region.
        normalised: Coordinates are fractions of the image size (scaled once the image is read).
    """

    label: str
    kind: str
    data: tuple
    where: str
    crowd: bool = False
    normalised: bool = False

    def box(self) -> tuple[float, float, float, float] | None:
        """The shape's bounding box ``(x1, y1, x2, y2)`` (``None`` for masks: use the file's box)."""
        if self.kind == "box":
            return tuple(float(v) for v in self.data)  # type: ignore[return-value]
        if self.kind == "polygon":
            xs = [v for poly in self.data for v in poly[0::2]]
            ys = [v for poly in self.data for v in poly[1::2]]
            return (min(xs), min(ys), max(xs), max(ys))
        return None


@dataclass
class ImageAnnotations:
    """The annotations of one image.

    Attributes:
        name: The image's file name as the annotation file writes it (relative path or URL).
        size: ``(width, height)`` the file declares, or ``None``.
        shapes: The annotations, in file order (later ones paint over earlier ones in masks).
        where: The file (and record) the image comes from.
    """

    name: str
    size: tuple[int, int] | None
    shapes: list[Shape] = field(default_factory=list)
    where: str = ""


@dataclass
class Parsed:
    """One annotation file (or folder of label files) read.

    Attributes:
        classes: Class names in the file's order (index = the format's class id where it has one).
        images: Annotations by image name.
        problems: ``(where, reason)`` for every annotation or file left out.
    """

    classes: list[str] = field(default_factory=list)
    images: dict[str, ImageAnnotations] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)


def finite(*values: float) -> bool:
    """True when every value is a finite number."""
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def number(value) -> float:
    """``value`` as a finite float.

    Raises:
        ValueError: Not a number, or not finite.
    """
    if isinstance(value, bool):
        raise ValueError("not a number")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError("not a finite number")
    return result


def polygon_problem(flat: list[float]) -> str | None:
    """Why a flat ``[x, y, x, y, ...]`` list is not a polygon (``None`` when it is one)."""
    if len(flat) % 2:
        return f"polygon has an odd number of coordinates ({len(flat)})"
    if len(flat) < 6:
        return f"polygon has {len(flat) // 2} points (needs at least 3)"
    return None
