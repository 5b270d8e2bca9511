"""A synthetic Sunnybrook Cardiac Data set in the exact real layout, with real DICOM files.

Run::

    python -m digits_data_sunnybrook.synth OUT_DIR [--cases 15] [--size 256] [--seed 0] [--slices 8]

It writes::

    OUT_DIR/challenge_training/<CASE>/IM-<SSSS>-<NNNN>.dcm
    OUT_DIR/Sunnybrook Cardiac MR Database ContoursPart3/TrainingDataContours/
        <PADDED CASE>/contours-manual/IRCCI-expert/IM-0001-<NNNN>-{i,o}contour-manual.txt

* Cases are the 15 real training case ids with their real series numbers
  (:mod:`digits_data_sunnybrook.layout`); beyond 15, extra ids ``SC-N-5x``
  with series numbers absent from the shipped table are made up, so they
  exercise the automatic series detection.
* Each case has ``--slices`` short-axis slices x 20 cine phases; image number
  = ``slice * 20 + phase + 1``. Contours (``i`` endocardium and ``o``
  epicardium, the latter a decoy for the default contour type) exist at two
  phases per slice: end-diastole (phase 0) and end-systole (phase 6-9 per
  case); the other phases are uncontoured images.
* Decoys in each case folder: a long-axis series (series + 1, one slice of
  20 phases, different SeriesInstanceUID and orientation) whose image
  numbers overlap the contoured ones, and a 3-image localizer (series + 2).
* DICOM: MR Image Storage, explicit VR little endian with file meta,
  16-bit unsigned stored in 12 bits (``BitsStored`` 12, ``HighBit`` 11),
  ``MONOCHROME2``, plausible patient/study/series/geometry/cardiac tags,
  deterministic UIDs for a given seed.
* Pixels: body ellipse, darker myocardial ring (between the ``o`` and ``i``
  polygons), a bright right-ventricle decoy, and a bright left-ventricle
  blood pool drawn from exactly the polygon written to the ``icontour`` file
  (so the label mask equals ``rasterize_polygon(read_contour(file))``), then
  a per-case gain, a smooth bias field and Gaussian noise.
* ``--hard-fraction F`` makes that share of the patients hard, of the kinds of
  :mod:`digits_data_sunnybrook.synth_hard` (black-blood contrast, low SNR, ...);
  the other patients are drawn exactly as without it.

A 64x64 version is small enough to learn on a CPU in under a minute.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .contours import format_contour, parse_contour_text, rasterize_polygon
from .layout import PHASES_PER_SLICE, contour_filename, image_number, load_series_table, pad_case
from .synth_dicom import base_dataset, write_series
from .synth_dicom import uid as _uid
from .synth_hard import HARD_KINDS, add_hard_arguments, hard_cases, make_hard, parse_hard_arguments

IMAGES_DIR = "challenge_training"
CONTOURS_DIR = "Sunnybrook Cardiac MR Database ContoursPart3"
TRAINING_CONTOURS = "TrainingDataContours"
MAX_VALUE = 4095  # 12 bits stored


@dataclass
class SynthResult:
    """What :func:`generate` wrote.

    Attributes:
        root: The output folder.
        image_folder: ``root/challenge_training``.
        contour_folder: ``root/Sunnybrook Cardiac MR Database ContoursPart3``.
        cases: Case id -> image series string.
        contoured: Case id -> sorted contoured image numbers.
        files: Number of DICOM files written.
        seconds: Time taken.
        hard: Case id -> hard kind, for the hard patients (``hard_fraction``).
    """

    root: Path
    image_folder: Path
    contour_folder: Path
    cases: dict[str, str] = field(default_factory=dict)
    contoured: dict[str, list[int]] = field(default_factory=dict)
    files: int = 0
    seconds: float = 0.0
    hard: dict[str, str] = field(default_factory=dict)


def case_ids(count: int) -> list[tuple[str, str]]:
    """Return ``count`` ``(case, series)`` pairs: the real training cases first, then made-up ones."""
    table = list(load_series_table().items())
    pairs = table[:count]
    for k in range(max(0, count - len(table))):
        pairs.append((f"SC-N-{50 + k}", f"{1100 + 10 * k:04d}"))
    return pairs


def _polygon(cx: float, cy: float, radius: float, harmonics, n: int = 40) -> np.ndarray:
    theta = np.linspace(0.0, 2.0 * math.pi, n, endpoint=False)
    r = np.full_like(theta, radius)
    for order, (amp, phase) in enumerate(harmonics, start=1):
        r = r * (1.0 + amp * np.cos(order * theta - phase))
    return np.stack([cx + r * np.cos(theta), cy + r * np.sin(theta)], axis=1)


def _written(points: np.ndarray) -> tuple[str, np.ndarray]:
    """The contour file text and exactly the vertices a reader parses back from it."""
    text = format_contour(points)
    return text, parse_contour_text(text)


_GRIDS: dict = {}


def _grid(shape) -> tuple[np.ndarray, np.ndarray]:
    """Cached (rows, columns) coordinate arrays."""
    if shape not in _GRIDS:
        yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float64)
        _GRIDS[shape] = (yy, xx)
    return _GRIDS[shape]


def _ellipse_mask(shape, cx, cy, rx, ry, angle=0.0) -> np.ndarray:
    yy, xx = _grid(tuple(shape))
    c, s = math.cos(angle), math.sin(angle)
    u = (xx - cx) * c + (yy - cy) * s
    v = -(xx - cx) * s + (yy - cy) * c
    return (u / rx) ** 2 + (v / ry) ** 2 <= 1.0


class _Case:
    """Random but fixed anatomy of one synthetic case."""

    def __init__(self, rng: np.random.Generator, size: int, slices: int):
        self.size = size
        self.kind: str | None = None  # a hard patient's kind (synth_hard), None for a routine one
        self.slices = slices
        s = float(size)
        self.center = (s / 2 + rng.uniform(-0.03, 0.03) * s, s / 2 + rng.uniform(-0.03, 0.03) * s)
        self.body = (rng.uniform(0.40, 0.45) * s, rng.uniform(0.32, 0.38) * s, rng.uniform(-0.2, 0.2))
        self.lv = (s / 2 + rng.uniform(0.02, 0.08) * s, s / 2 + rng.uniform(-0.06, 0.02) * s)
        self.r_ed = rng.uniform(0.085, 0.11) * s
        self.es_ratio = rng.uniform(0.62, 0.75)
        self.es_phase = int(rng.integers(6, 10))
        self.wall = rng.uniform(0.035, 0.05) * s
        self.harmonics = [
            (rng.uniform(0.0, 0.06), rng.uniform(0, 2 * math.pi)),
            (rng.uniform(0.0, 0.08), rng.uniform(0, 2 * math.pi)),
        ]
        self.rv_angle = rng.uniform(math.pi * 0.85, math.pi * 1.15)  # RV on the image left of the LV
        self.gain = rng.uniform(0.7, 1.35)
        self.bias = rng.uniform(-0.25, 0.25, size=3)
        self.noise = rng.uniform(15, 30)
        self.levels = {"body": rng.uniform(380, 460), "myo": rng.uniform(150, 220), "blood": rng.uniform(900, 1050)}
        # the right ventricle's shape, place and brightness relative to the LV; hard kinds change them
        self.rv_axes, self.rv_gap, self.rv_level, self.rv_wall = (0.8, 1.5), 0.55, 0.95, False
        self.bias_floor: float | None = None

    def radius(self, slice_index: int, phase: int) -> float:
        """LV radius: smaller towards the apex, contracting from ED (phase 0) to ES."""
        apex = 1.0 - 0.45 * (slice_index / max(1, self.slices - 1)) ** 1.5
        # contraction: 0 at ED, 1 at ES, back to 0 at the end of the cycle
        if phase <= self.es_phase:
            c = 0.5 - 0.5 * math.cos(math.pi * phase / self.es_phase)
        else:
            c = 0.5 + 0.5 * math.cos(math.pi * (phase - self.es_phase) / (PHASES_PER_SLICE - self.es_phase))
        return self.r_ed * apex * (1.0 - (1.0 - self.es_ratio) * c)

    def contours(self, slice_index: int, phase: int, written: bool = True):
        """(i text, i vertices, o text, o vertices) for one image.

        With ``written`` the vertices are exactly those parsed back from the
        text (what the label mask is made from); otherwise no text is made.
        """
        r = self.radius(slice_index, phase)
        endo = _polygon(self.lv[0], self.lv[1], r, self.harmonics)
        epi = _polygon(self.lv[0], self.lv[1], r + self.wall * (1.0 + 0.3 * (1 - r / self.r_ed)), self.harmonics[:1])
        if not written:
            return None, endo, None, epi
        i_text, i_pts = _written(endo)
        o_text, o_pts = _written(epi)
        return i_text, i_pts, o_text, o_pts

    def image(self, rng: np.random.Generator, slice_index: int, phase: int, i_pts, o_pts) -> np.ndarray:
        """The 12-bit image of one slice and phase."""
        shape = (self.size, self.size)
        img = np.zeros(shape, dtype=np.float64)
        img[_ellipse_mask(shape, self.center[0], self.center[1], *self.body)] = self.levels["body"]
        # right-ventricle decoy: bright crescent-like ellipse beside the LV
        r = self.radius(slice_index, phase)
        dist = r + self.wall + self.rv_gap * r + 0.02 * self.size
        rvx = self.lv[0] + dist * math.cos(self.rv_angle)
        rvy = self.lv[1] + dist * math.sin(self.rv_angle)
        axes = (self.rv_axes[0] * r + 1.0, self.rv_axes[1] * r + 1.0)
        if self.rv_wall:
            wall = (axes[0] + self.wall, axes[1] + self.wall)
            img[_ellipse_mask(shape, rvx, rvy, *wall, self.rv_angle)] = self.levels["myo"]
        img[_ellipse_mask(shape, rvx, rvy, *axes, self.rv_angle)] = self.levels["blood"] * self.rv_level
        img[rasterize_polygon(o_pts, shape).astype(bool)] = self.levels["myo"]
        img[rasterize_polygon(i_pts, shape).astype(bool)] = self.levels["blood"]
        # per-case gain, smooth bias field, noise
        yy, xx = _grid(shape)
        yy, xx = yy / float(self.size) - 0.5, xx / float(self.size) - 0.5
        bias = 1.0 + self.bias[0] * xx + self.bias[1] * yy + self.bias[2] * (xx * xx + yy * yy)
        if self.bias_floor is not None:
            bias = np.maximum(bias, self.bias_floor)
        img = img * self.gain * bias + rng.normal(0.0, self.noise, shape)
        return np.clip(np.rint(img), 0, MAX_VALUE).astype(np.uint16)


def _orthonormal(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A plausible oblique short-axis orientation: row and column direction cosines."""
    a = np.array([0.75, -0.55, -0.35]) + rng.uniform(-0.05, 0.05, 3)
    a /= np.linalg.norm(a)
    b = np.array([0.35, 0.75, -0.55]) + rng.uniform(-0.05, 0.05, 3)
    b -= a * np.dot(a, b)
    b /= np.linalg.norm(b)
    return a, b


def generate(
    out_dir,
    cases: int = 15,
    size: int = 256,
    seed: int = 0,
    slices: int = 8,
    hard_fraction: float = 0.0,
    hard_kinds=HARD_KINDS,
) -> SynthResult:
    """Write a synthetic Sunnybrook data set (see the module docstring).

    Args:
        out_dir: Output folder (created; existing files are overwritten).
        cases: Number of cases (the first 15 are the real training case ids).
        size: Image width and height in pixels (>= 32).
        seed: Random seed; the same seed gives identical files.
        slices: Short-axis slices per case (>= 1).
        hard_fraction: Share of hard patients (:mod:`digits_data_sunnybrook.synth_hard`); 0 gives none.
        hard_kinds: The kinds dealt to them in turn (default: all of ``HARD_KINDS``).

    Returns:
        A :class:`SynthResult` describing what was written.

    Raises:
        ValueError: A size, count or fraction out of range, or an unknown hard kind.
    """
    if cases < 1:
        raise ValueError("cases must be at least 1")
    if size < 32:
        raise ValueError("size must be at least 32")
    if slices < 1:
        raise ValueError("slices must be at least 1")
    hard = hard_cases(seed, cases, hard_fraction, hard_kinds)
    start = time.perf_counter()
    root = Path(out_dir)
    image_root = root / IMAGES_DIR
    contour_root = root / CONTOURS_DIR
    result = SynthResult(root=root, image_folder=image_root, contour_folder=contour_root)
    for index, (case, series) in enumerate(case_ids(cases)):
        rng = np.random.default_rng([seed, index])
        anatomy = _Case(rng, size, slices)
        if index in hard:
            make_hard(anatomy, hard[index], seed, index)
            result.hard[case] = hard[index]
        case_dir = image_root / case
        case_dir.mkdir(parents=True, exist_ok=True)
        expert = contour_root / TRAINING_CONTOURS / pad_case(case) / "contours-manual" / "IRCCI-expert"
        expert.mkdir(parents=True, exist_ok=True)
        study_uid = _uid(seed, case, "study")
        ds = base_dataset(case, study_uid, size, seed)
        orientation = _orthonormal(rng)
        origin = np.array([-160.0, -140.0, 40.0]) + rng.uniform(-10, 10, 3)
        contoured_phases = (0, anatomy.es_phase)
        numbers = []

        def main_images():
            for s in range(slices):
                for phase in range(PHASES_PER_SLICE):
                    number = image_number(s, phase)
                    i_text, i_pts, o_text, o_pts = anatomy.contours(s, phase, written=phase in contoured_phases)
                    if phase in contoured_phases:
                        (expert / contour_filename(number, "i")).write_text(i_text, encoding="utf-8", newline="\n")
                        (expert / contour_filename(number, "o")).write_text(o_text, encoding="utf-8", newline="\n")
                        numbers.append(number)
                    yield s, phase, number, anatomy.image(rng, s, phase, i_pts, o_pts)

        result.files += write_series(
            ds,
            case_dir,
            series,
            "FIESTA CINE SAX",
            _uid(seed, case, series),
            orientation,
            origin,
            10.0,
            main_images(),
            seed,
        )

        # decoy 1: long-axis cine, same image numbers 1..20, other series UID and orientation
        decoy = f"{int(series) + 1:04d}"
        la_orientation = (orientation[0], np.cross(orientation[0], orientation[1]))

        def long_axis():
            for phase in range(PHASES_PER_SLICE):
                _, i_pts, _, o_pts = anatomy.contours(0, phase, written=False)
                pixels = anatomy.image(rng, 0, phase, i_pts, o_pts)
                yield 0, phase, image_number(0, phase), np.ascontiguousarray(pixels.T)

        result.files += write_series(
            ds,
            case_dir,
            decoy,
            "FIESTA CINE 2CH",
            _uid(seed, case, decoy),
            la_orientation,
            origin,
            0.0,
            long_axis(),
            seed,
        )

        # decoy 2: a 3-image localizer
        loc = f"{int(series) + 2:04d}"

        def localizer():
            for k in range(3):
                noise = rng.normal(300, 40, (size, size)).clip(0, MAX_VALUE).astype(np.uint16)
                yield k, 0, k + 1, noise

        result.files += write_series(
            ds,
            case_dir,
            loc,
            "3-PLANE LOC",
            _uid(seed, case, loc),
            (np.array([1.0, 0, 0]), np.array([0, 1.0, 0])),
            origin,
            20.0,
            localizer(),
            seed,
        )
        result.cases[case] = series
        result.contoured[case] = sorted(numbers)
    result.seconds = time.perf_counter() - start
    return result


def main(argv=None) -> int:
    """Command-line entry point (``python -m digits_data_sunnybrook.synth``)."""
    parser = argparse.ArgumentParser(
        prog="python -m digits_data_sunnybrook.synth",
        description="Write a synthetic Sunnybrook Cardiac Data set (real layout, real DICOM files).",
    )
    parser.add_argument("out_dir", help="output folder")
    parser.add_argument("--cases", type=int, default=15, help="number of cases (default 15: the real training ids)")
    parser.add_argument("--size", type=int, default=256, help="image width and height (default 256)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--slices", type=int, default=8, help="short-axis slices per case (default 8)")
    add_hard_arguments(parser)
    args = parser.parse_args(argv)
    for name, minimum in (("cases", 1), ("size", 32), ("slices", 1)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name} must be at least {minimum}")
    kinds = parse_hard_arguments(parser, args)
    result = generate(
        args.out_dir, args.cases, args.size, args.seed, args.slices, hard_fraction=args.hard_fraction, hard_kinds=kinds
    )
    contours = sum(len(v) for v in result.contoured.values())
    print(
        f"Wrote {result.files} DICOM files for {len(result.cases)} cases and {contours} i-contours in {result.seconds:.1f} s"
    )
    if result.hard:
        print(f"  hard patients:  {', '.join(f'{c} ({k})' for c, k in result.hard.items())}")
    print(f"  image folder:   {result.image_folder}")
    print(f"  contour folder: {result.contour_folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
