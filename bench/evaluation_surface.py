"""Benchmark: HD95 and normalised surface Dice of a 256³ pair (issue 42's bound: at most 5 s on 2 cores).

Two overlapping spheres (radius 0.30 and 0.31 of the side, offset by a few voxels; anisotropic spacing
1.0 × 0.8 × 0.8 mm) go through :func:`digits_core.evaluation.segmentation.binary_metrics`: Dice, IoU, the
surfaces, HD95, ASSD and NSD at 1 mm. Prints one JSON line with the seconds (best of ``--repeat``), the
figures and whether the bound holds.

Usage::

    .venv/bin/python bench/evaluation_surface.py             # 256³, about 10 s in all
    .venv/bin/python bench/evaluation_surface.py --size 128  # smaller
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from digits_core.evaluation.segmentation import binary_metrics

BOUND_S = 5.0


def spheres(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A reference sphere and a slightly larger, shifted prediction in an ``n``³ volume."""
    z, y, x = np.ogrid[:n, :n, :n]
    c = n / 2
    ref = (z - c) ** 2 + (y - c) ** 2 + (x - c) ** 2 < (0.30 * n) ** 2
    pred = (z - c - 3) ** 2 + (y - c) ** 2 + (x - c + 2) ** 2 < (0.31 * n) ** 2
    return pred, ref


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pred, ref = spheres(args.size)
    best, figures = float("inf"), {}
    for _ in range(args.repeat):
        start = time.perf_counter()
        figures = binary_metrics(pred, ref, (1.0, 0.8, 0.8), 1.0)
        best = min(best, time.perf_counter() - start)
    row = {
        "size": args.size,
        "seconds": round(best, 3),
        "bound_s": BOUND_S,
        "within_bound": best <= BOUND_S,
        **{k: round(float(figures[k]), 4) for k in ("Dice", "HD95", "ASSD", "NSD")},
    }
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
