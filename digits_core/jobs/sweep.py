"""A sweep's group record, ``sweep.json``, written through the job store's rules.

A hyper-parameter search (:mod:`digits_core.tuning`) keeps one
:class:`~digits_core.jobs.record.SweepRecord` in its folder under
``JOBS_DIR/.sweeps/``. The tuning driver records the sweep's status while the
web page or ``digits sweep promote`` names its result, possibly at the same
moment from another process: every change re-reads the file and rewrites it
atomically under the folder's record lock
(:func:`~digits_core.jobs.lock.record_lock`), so neither loses the other's keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import JobNotFoundError
from .checks import check_record_types
from .lock import record_lock
from .readers import UnreadableRecordError, read_json_object
from .record import SweepRecord, write_json_atomic

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

SWEEP_FILE = "sweep.json"


def read_sweep_record(folder: str | os.PathLike) -> SweepRecord:
    """Parse ``sweep.json`` of a sweep folder.

    The file is read as possibly hostile input (:mod:`digits_core.jobs.readers`).

    Raises:
        JobNotFoundError: The file is missing or unreadable (the message names it; unreadable:
            an :class:`~digits_core.jobs.readers.UnreadableRecordError` saying why).
    """
    path = Path(folder) / SWEEP_FILE
    try:
        record: SweepRecord = read_json_object(path)  # type: ignore[assignment]  # types checked below
    except OSError as exc:
        raise JobNotFoundError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    check_record_types(record, SweepRecord, path, UnreadableRecordError)
    return record


def write_sweep_record(folder: str | os.PathLike, record: SweepRecord) -> None:
    """Write a whole ``sweep.json`` (a new sweep), atomically and under the record lock."""
    with record_lock(folder):
        write_json_atomic(Path(folder) / SWEEP_FILE, record)


def update_sweep_record(folder: str | os.PathLike, /, **fields: Unpack[SweepRecord]) -> SweepRecord:
    """Set these ``sweep.json`` keys, keeping the others (also those another process wrote meanwhile).

    Returns the record as it now is on disk.
    """
    with record_lock(folder):
        record = read_sweep_record(folder)
        record.update(fields)
        write_json_atomic(Path(folder) / SWEEP_FILE, record)
    return record
