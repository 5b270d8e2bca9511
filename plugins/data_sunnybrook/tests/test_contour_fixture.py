"""A contour file written by hand in the published Sunnybrook format, not by our generator.

``data/IM-0001-0048-icontour-manual.txt`` has what the challenge's files
have and our writer never produces: CRLF line ends, two decimals that do not
sit on pixel centres (``.40``, ``.49``, ``.50`` rounding up), and blank
trailing lines. Its polygon is a rectangle traced with extra vertices along
the edges, so the expected mask is known without any rasterizer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from digits_data_sunnybrook.contours import contour_mask, read_contour
from digits_data_sunnybrook.layout import CONTOUR_RE

FIXTURE = Path(__file__).resolve().parent / "data" / "IM-0001-0048-icontour-manual.txt"


def test_fixture_really_has_the_published_quirks():
    raw = FIXTURE.read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") == 12  # CRLF only (kept as is by .gitattributes)
    assert raw.endswith(b"\r\n\r\n\r\n") and b".49" in raw and b".50" in raw
    assert CONTOUR_RE.match(FIXTURE.name).groups() == ("0048", "i")


def test_hand_written_contour_parses_exactly():
    expected = [
        (100.40, 80.60),
        (112.25, 80.60),
        (127.75, 80.60),
        (140.50, 80.60),
        (140.50, 95.00),
        (140.50, 120.49),
        (126.00, 120.49),
        (113.50, 120.49),
        (100.40, 120.49),
        (100.40, 101.38),
    ]
    np.testing.assert_array_equal(read_contour(FIXTURE), np.array(expected))


def test_hand_written_contour_rasterizes_to_the_known_rectangle():
    # Vertices round to the nearest pixel centre (floor(v + 0.5)): x 100.40 -> 100, 140.50 -> 141;
    # y 80.60 -> 81, 120.49 -> 120. Edges belong to the mask, so rows 81..120 and columns 100..141.
    expected = np.zeros((256, 256), np.uint8)
    expected[81:121, 100:142] = 1
    mask = contour_mask(FIXTURE, (256, 256))
    assert mask.dtype == np.uint8 and mask.shape == (256, 256)
    np.testing.assert_array_equal(mask, expected)
