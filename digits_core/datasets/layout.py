"""The dataset's layout (feature shape/dtype, label kind/dtype/shape), decided by agreement.

Every record of a dataset shares one layout. It is not taken from the first
record: :func:`agree_on_layout` picks the layout most records of the first
chunk that encoded share (ties go to the one seen first), so one bad entry
at the start no longer makes every good one "differ". Records with another
layout are skipped and reported in the errors report.

:func:`channels_first_problem` is the check behind "this looks like a
channels-first (C×H×W) feature" — used when the layout is decided, and by
``digits plugin check``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ..errors import DatasetError
from . import records as rec
from .labels import LABEL_KINDS

#: A feature with more channels than this and at most this many rows looks channels-first.
MAX_CHANNELS_LAST = 4


def describe_layout(layout: tuple) -> str:
    """Human-readable layout: ``feature uint8 (28, 28, 1), label class int64 ()``."""
    fdtype, fshape, kind, ldtype, lshape = layout
    return f"feature {fdtype} {tuple(fshape)}, label {LABEL_KINDS[kind]} {ldtype} {tuple(lshape)}"


def channels_first_problem(shape: Sequence[int], plugin_id: str | None = None) -> str | None:
    """Return an error message if a feature ``shape`` looks channels-first, else ``None``.

    DIGITS 6 plugins returned ``C×H×W`` arrays (e.g. ``image[np.newaxis, ...]``
    → 1×32×32); DIGITS Core stores ``H×W×C``, so such a feature would become
    a 1-pixel-high image with 32 channels. A shape with ``C > 4`` and
    ``H <= 4`` is taken for that mistake.

    Args:
        shape: The feature's shape as returned by ``encode_entry``.
        plugin_id: Named in the message when given.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3 or not (shape[2] > MAX_CHANNELS_LAST and shape[0] <= MAX_CHANNELS_LAST):
        return None
    who = f'Plugin "{plugin_id}"' if plugin_id else "The plugin"
    hwc = (shape[1], shape[2], shape[0])
    return (
        f"{who} returns features of shape {shape}, which looks channels-first (C×H×W, the DIGITS 6 "
        f"habit); DIGITS Core stores H×W×C. Transpose the array in encode_entry, e.g. "
        f"feature.transpose(1, 2, 0) → {hwc}."
    )


def check_channels_last(shape: Sequence[int], plugin_id: str | None = None) -> None:
    """Raise :class:`DatasetError` if ``shape`` looks channels-first (see :func:`channels_first_problem`)."""
    problem = channels_first_problem(shape, plugin_id)
    if problem:
        raise DatasetError(problem)


def agree_on_layout(metas: Iterable[rec.RecordMeta]) -> tuple | None:
    """Return the layout most of ``metas`` share (the first seen on a tie), or ``None`` if there are none."""
    votes = Counter(meta.layout for meta in metas)
    if not votes:
        return None
    return max(votes, key=votes.__getitem__)  # max keeps the first of equal counts; Counter keeps insertion order


def layout_mismatch(layout: tuple, expected: tuple) -> str:
    """The error recorded for a record whose layout differs from the dataset's."""
    message = f"record layout ({describe_layout(layout)}) differs from the dataset's ({describe_layout(expected)})"
    problem = channels_first_problem(layout[1])
    return f"{message}. {problem}" if problem else message
