"""The dataset's layout (feature shape/dtype, label kind/dtype/shape), decided by agreement.

Every record of a dataset shares one layout. It is not taken from the first
record: :func:`agree_on_layout` picks the layout most records of the first
chunk that encoded share (ties go to the one seen first), so one bad entry
at the start no longer makes every good one "differ". Records with another
layout are skipped and reported in the errors report.

:func:`~digits_core.interfaces.records.channels_first_problem` (the record format's, re-exported here) is
the check behind "this looks like a channels-first (C×H×W) feature" — used when the layout is decided, and by
``digits plugin check``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ..errors import DatasetError
from ..interfaces import records as rec
from ..interfaces.labels import LABEL_KINDS
from ..interfaces.records import MAX_CHANNELS_LAST as MAX_CHANNELS_LAST
from ..interfaces.records import channels_first_problem as channels_first_problem


def describe_layout(layout: tuple) -> str:
    """Human-readable layout: ``feature uint8 (28, 28, 1), label class int64 ()``."""
    fdtype, fshape, kind, ldtype, lshape = layout
    return f"feature {fdtype} {tuple(fshape)}, label {LABEL_KINDS[kind]} {ldtype} {tuple(lshape)}"


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
