"""Hard minority patients of the synthetic Sunnybrook set: a heterogeneous pool, as a real PACS's is.

Most studies of a real pool are routine; a minority come from another protocol or are hard to read.
:func:`digits_data_sunnybrook.synth.generate` with ``hard_fraction`` makes ``round(hard_fraction * cases)``
patients hard, chosen by the seed, each with one kind of :data:`HARD_KINDS` (taken in turn, so every kind
is present once there are as many hard patients as kinds). Every image of a hard patient is hard in the
same way, and its contours (the labels) are drawn as for any patient:

* ``dark-blood``: a black-blood sequence (double inversion recovery): the blood pools dark, the
  myocardium bright, the inverse of the routine cine contrast;
* ``low-snr``: a poor acquisition (wrong coil, small voxels): lower signal and several times the noise;
* ``round-rv``: a dilated right ventricle (pressure overload): as round and as bright as the left
  ventricle, with a wall of its own, so only its place tells it from the left ventricle;
* ``bias``: a surface coil's steep intensity fall-off across the image;
* ``small``: a small (paediatric) heart, about half the routine radius.

The hard patients and their appearance come from random generators of their own, so a patient that is
not hard is drawn exactly as without ``hard_fraction`` (same anatomy, same noise, same bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: The kinds of hard patients, in the order they are dealt to the hard patients.
HARD_KINDS = ("dark-blood", "low-snr", "round-rv", "bias", "small")

_PICK_STREAM = 0x4A4D  # seeds the choice of the hard patients
_LOOK_STREAM = 0x4A4E  # seeds each hard patient's appearance


def check_hard(fraction: float, kinds: Sequence[str]) -> tuple[str, ...]:
    """The kinds as a tuple when ``fraction`` and ``kinds`` are valid.

    Raises:
        ValueError: ``fraction`` outside [0, 1], no kinds, or an unknown kind (the known ones listed).
    """
    if not 0.0 <= float(fraction) <= 1.0:
        raise ValueError(f"hard_fraction must be between 0 and 1, not {fraction}")
    kinds = tuple(kinds)
    unknown = [k for k in kinds if k not in HARD_KINDS]
    if unknown or not kinds:
        raise ValueError(f"unknown hard kind {unknown[0] if unknown else '(none)'!r}; use {', '.join(HARD_KINDS)}")
    return kinds


def hard_cases(seed: int, cases: int, fraction: float, kinds: Sequence[str] = HARD_KINDS) -> dict[int, str]:
    """Which patients (by index) are hard, and how: ``round(fraction * cases)`` of them, kinds dealt in turn.

    Args:
        seed: The generator's seed.
        cases: Number of patients.
        fraction: Share of hard patients (0 gives none).
        kinds: Kinds to deal, each from :data:`HARD_KINDS`.
    """
    kinds = check_hard(fraction, kinds)
    count = int(round(float(fraction) * cases))
    if count == 0:
        return {}
    chosen = np.random.default_rng([seed, _PICK_STREAM]).permutation(cases)[:count]
    return {int(index): kinds[k % len(kinds)] for k, index in enumerate(chosen)}


def make_hard(case: Any, kind: str, seed: int, index: int) -> None:
    """Change the appearance of ``case`` (a ``synth._Case``) to ``kind``; its anatomy's draws stay as they were."""
    rng = np.random.default_rng([seed, index, _LOOK_STREAM])
    case.kind = kind
    if kind == "dark-blood":
        case.levels = {
            "body": rng.uniform(330, 420),
            "myo": rng.uniform(650, 800),
            "blood": rng.uniform(60, 120),
        }
    elif kind == "low-snr":
        case.gain *= rng.uniform(0.4, 0.55)
        case.noise = rng.uniform(90, 130)
    elif kind == "round-rv":
        case.rv_axes = (1.0, 1.0)
        case.rv_gap = rng.uniform(1.15, 1.3)
        case.rv_level = 1.0
        case.rv_wall = True
    elif kind == "bias":
        sign = rng.choice([-1.0, 1.0], size=2)
        case.bias = np.array([sign[0] * rng.uniform(1.2, 1.5), sign[1] * rng.uniform(1.2, 1.5), 0.0])
        case.bias_floor = 0.15
    elif kind == "small":
        case.r_ed *= rng.uniform(0.5, 0.6)
        case.wall *= 0.8
    else:  # pragma: no cover - check_hard refuses it first
        raise ValueError(f"unknown hard kind {kind!r}")


def add_hard_arguments(parser: Any, fraction: float = 0.0, kinds: Sequence[str] = HARD_KINDS) -> None:
    """Add ``--hard-fraction`` and ``--hard-kinds`` (defaults ``fraction``, ``kinds``) to an ``argparse`` parser."""
    parser.add_argument(
        "--hard-fraction",
        type=float,
        default=fraction,
        help=f"share of hard patients, of the kinds below (default {fraction:g}{': none' if not fraction else ''})",
    )
    parser.add_argument(
        "--hard-kinds",
        default=",".join(kinds),
        help=f"comma-separated kinds of hard patients, dealt in turn (default {','.join(kinds)}; known: "
        f"{', '.join(HARD_KINDS)})",
    )


def parse_hard_arguments(parser: Any, args: Any) -> tuple[str, ...]:
    """The kinds of ``args.hard_kinds``; a bad fraction or kind is a usage error (exit status 2) naming it."""
    try:
        return check_hard(args.hard_fraction, [k.strip() for k in args.hard_kinds.split(",") if k.strip()])
    except ValueError as exc:
        parser.error(str(exc).replace("hard_fraction", "--hard-fraction"))
        raise  # parser.error exits; this keeps type checkers content
