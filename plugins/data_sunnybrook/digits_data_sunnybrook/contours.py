"""Sunnybrook contour files and their rasterization to masks (Pillow, no OpenCV).

File format: one vertex per line, ``x y`` as floats, ``x`` = column and
``y`` = row, origin at the top-left pixel; the polygon is implicitly closed
(the last vertex joins the first). Blank lines are ignored.

**Pixel convention** (used by the synthetic generator to draw the left
ventricle, by the ingestion to make labels, and by the tests to compare
masks: always through :func:`rasterize_polygon`):

* Pixel ``(row r, column c)`` has its *centre* at ``x = c, y = r``; pixel
  centres sit on integer coordinates (as in OpenCV, which DIGITS used).
* Vertices are rounded to the nearest integer (``floor(v + 0.5)``; DIGITS
  truncated with ``astype(int)``, shifting masks up to one pixel up-left).
* The mask is Pillow's ``ImageDraw.polygon`` of the rounded vertices with
  ``fill=1, outline=1``: every pixel whose centre is inside the rounded
  polygon, plus the pixels its edges pass through (edges belong to the mask,
  as with ``cv2.fillPoly``). Vertices outside the image are clipped by the
  drawing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np

from digits_core.errors import DigitsError


class ContourError(DigitsError):
    """A contour file is missing, malformed or degenerate; the message names the file."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.reason))


def parse_contour_text(text: str, name: str = "<contour>") -> np.ndarray:
    """Parse contour text into an ``N x 2`` float64 array of ``(x, y)`` vertices.

    Args:
        text: The file's content.
        name: Names the source in error messages.

    Raises:
        ContourError: A line is not two numbers, or fewer than 3 vertices.
    """
    points = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise ContourError(name, f"line {number}: expected 'x y', found {line.strip()[:60]!r}")
        try:
            x, y = float(fields[0]), float(fields[1])
        except ValueError:
            raise ContourError(name, f"line {number}: expected two numbers, found {line.strip()[:60]!r}") from None
        if not (np.isfinite(x) and np.isfinite(y)):
            raise ContourError(name, f"line {number}: coordinates must be finite, found {line.strip()[:60]!r}")
        points.append((x, y))
    if len(points) < 3:
        raise ContourError(name, f"a contour needs at least 3 vertices, found {len(points)}")
    return np.asarray(points, dtype=np.float64)


def read_contour(path: str | os.PathLike) -> np.ndarray:
    """Read a contour file into an ``N x 2`` array of ``(x, y)`` = (column, row) vertices.

    Raises:
        ContourError: The file cannot be read or is malformed.
    """
    try:
        with open(path, encoding="utf-8", errors="strict") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ContourError(path, f"cannot read the contour file ({type(exc).__name__}: {exc})") from exc
    return parse_contour_text(text, str(path))


def format_contour(points: Iterable[Sequence[float]]) -> str:
    """Return contour file text for ``(x, y)`` vertices (2 decimals, as the real files)."""
    return "".join(f"{float(x):.2f} {float(y):.2f}\n" for x, y in points)


def write_contour(path: str | os.PathLike, points: Iterable[Sequence[float]]) -> None:
    """Write ``(x, y)`` vertices as a contour file (``x y`` per line)."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(format_contour(points))


def round_vertices(points) -> list[tuple[int, int]]:
    """Round ``(x, y)`` vertices to integer pixel centres (``floor(v + 0.5)``)."""
    arr = np.floor(np.asarray(points, dtype=np.float64) + 0.5).astype(np.int64)
    return [(int(x), int(y)) for x, y in arr]


def rasterize_polygon(points, shape: tuple[int, int]) -> np.ndarray:
    """Rasterize a closed polygon to an ``H x W`` uint8 mask (1 inside, 0 outside).

    Follows the module's pixel convention exactly: the one function every
    mask comparison goes through.

    Args:
        points: ``N x 2`` ``(x, y)`` = (column, row) vertices, N >= 3.
        shape: ``(height, width)`` of the mask.
    """
    from PIL import Image, ImageDraw

    height, width = int(shape[0]), int(shape[1])
    image = Image.new("L", (width, height), 0)
    ImageDraw.Draw(image).polygon(round_vertices(points), fill=1, outline=1)
    return np.asarray(image, dtype=np.uint8).copy()


def contour_mask(path: str | os.PathLike, shape: tuple[int, int]) -> np.ndarray:
    """Read a contour file and rasterize it to an ``H x W`` uint8 mask.

    Raises:
        ContourError: The file is malformed, or no vertex lies inside the image
            (a contour meant for another image size).
    """
    points = read_contour(path)
    height, width = shape
    inside = (
        (points[:, 0] > -0.5) & (points[:, 0] < width - 0.5) & (points[:, 1] > -0.5) & (points[:, 1] < height - 0.5)
    )
    if not inside.any():
        raise ContourError(path, f"no vertex lies inside the {height}x{width} image: wrong image or image size?")
    return rasterize_polygon(points, shape)


__all__ = [
    "ContourError",
    "parse_contour_text",
    "read_contour",
    "format_contour",
    "write_contour",
    "round_vertices",
    "rasterize_polygon",
    "contour_mask",
]
