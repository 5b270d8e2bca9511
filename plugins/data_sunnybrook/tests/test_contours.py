"""Contour parsing and the Pillow rasterization convention."""

from __future__ import annotations

import numpy as np
import pytest

from digits_core.errors import DigitsError
from digits_data_sunnybrook.contours import (
    ContourError,
    contour_mask,
    format_contour,
    parse_contour_text,
    rasterize_polygon,
    read_contour,
    round_vertices,
)


def even_odd_inside(points, shape):
    """Independent point-in-polygon test of pixel centres (x = column, y = row), even-odd rule."""
    pts = np.asarray(points, dtype=np.float64)
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float64)
    inside = np.zeros(shape, dtype=bool)
    x0, y0 = pts[:, 0], pts[:, 1]
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    for a, b, c, d in zip(x0, y0, x1, y1):
        crosses = (b > yy) != (d > yy)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_at = a + (yy - b) * (c - a) / (d - b)
        inside ^= crosses & (xx < x_at)
    return inside


def distance_to_edges(points, shape):
    pts = np.asarray(points, dtype=np.float64)
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float64)
    best = np.full(shape, np.inf)
    for (a, b), (c, d) in zip(pts, np.roll(pts, -1, axis=0)):
        dx, dy = c - a, d - b
        t = np.clip(((xx - a) * dx + (yy - b) * dy) / max(dx * dx + dy * dy, 1e-12), 0, 1)
        best = np.minimum(best, np.hypot(xx - (a + t * dx), yy - (b + t * dy)))
    return best


def test_parse_real_format():
    text = "120.50 98.25\n121.00 99.00\n\n119.75 100.50\n"
    pts = parse_contour_text(text)
    assert pts.shape == (3, 2)
    assert pts[0].tolist() == [120.5, 98.25]  # x = column, y = row


@pytest.mark.parametrize(
    "text, message",
    [
        ("1 2\n3\n4 5\n", "line 2: expected 'x y'"),
        ("1 2\n3 a\n4 5\n", "line 2: expected two numbers"),
        ("1 2\n3 4\n", "at least 3 vertices"),
        ("", "at least 3 vertices"),
        ("1 2\nnan 3\n4 5\n", "finite"),
    ],
)
def test_malformed_contours_name_the_file_and_line(text, message, tmp_path):
    path = tmp_path / "IM-0001-0001-icontour-manual.txt"
    path.write_text(text)
    with pytest.raises(ContourError, match=message) as info:
        read_contour(path)
    assert isinstance(info.value, DigitsError) and str(info.value).startswith(str(path))


def test_unreadable_and_off_image_contours(tmp_path):
    with pytest.raises(ContourError, match="cannot read"):
        read_contour(tmp_path / "missing.txt")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ContourError):
        read_contour(binary)
    far = tmp_path / "far.txt"
    far.write_text(format_contour([(300, 300), (310, 300), (305, 310)]))
    with pytest.raises(ContourError, match="no vertex lies inside the 64x64 image"):
        contour_mask(far, (64, 64))


def test_square_convention_edges_included():
    mask = rasterize_polygon([(1, 1), (4, 1), (4, 4), (1, 4)], (8, 8))
    assert mask.dtype == np.uint8 and mask.shape == (8, 8)
    expected = np.zeros((8, 8), np.uint8)
    expected[1:5, 1:5] = 1  # rows 1-4 (y), columns 1-4 (x), edges included
    np.testing.assert_array_equal(mask, expected)


def test_x_is_column_and_y_is_row():
    mask = rasterize_polygon([(10, 2), (12, 2), (12, 3), (10, 3)], (6, 16))
    rows, cols = np.nonzero(mask)
    assert set(rows) == {2, 3} and set(cols) == {10, 11, 12}


def test_vertices_round_to_nearest_pixel_centre():
    assert round_vertices([(1.49, 2.5), (-0.5, 3.51)]) == [(1, 3), (0, 4)]
    a = rasterize_polygon([(1.4, 1.4), (4.4, 1.4), (4.4, 4.4), (1.4, 4.4)], (8, 8))
    b = rasterize_polygon([(1, 1), (4, 4 - 3), (4, 4), (1, 4)], (8, 8))
    np.testing.assert_array_equal(a, b)


def test_rasterization_agrees_with_an_independent_point_in_polygon_test():
    rng = np.random.default_rng(3)
    theta = np.sort(rng.uniform(0, 2 * np.pi, 30))
    radius = 12 + rng.uniform(-3, 3, 30)
    pts = np.stack([32 + radius * np.cos(theta), 30 + radius * np.sin(theta)], axis=1)
    mask = rasterize_polygon(pts, (64, 64)).astype(bool)
    rounded = np.asarray(round_vertices(pts), dtype=np.float64)
    reference = even_odd_inside(rounded, (64, 64))
    far = distance_to_edges(rounded, (64, 64)) > 1.0
    # away from the edges the two agree exactly; edge pixels belong to the mask
    np.testing.assert_array_equal(mask[far], reference[far])
    assert mask[reference].all()
    assert abs(int(mask.sum()) - int(reference.sum())) < 0.25 * reference.sum()


def test_polygon_closes_implicitly_and_clips():
    open_triangle = rasterize_polygon([(0, 0), (7, 0), (0, 7)], (8, 8))
    closed_triangle = rasterize_polygon([(0, 0), (7, 0), (0, 7), (0, 0)], (8, 8))
    np.testing.assert_array_equal(open_triangle, closed_triangle)
    assert open_triangle[7, 0] == 1 and open_triangle[0, 7] == 1 and open_triangle[7, 7] == 0
    clipped = rasterize_polygon([(-5, -5), (3, -5), (3, 3), (-5, 3)], (8, 8))
    assert clipped[:4, :4].all() and clipped.sum() == 16
