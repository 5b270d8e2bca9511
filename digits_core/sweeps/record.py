"""A sweep's group record, ``sweep.json``, written through the job store's rules.

A hyper-parameter search (:mod:`digits_core.sweeps.tune`) keeps one
:class:`~digits_core.jobs.record.SweepRecord` in its folder under
``JOBS_DIR/.sweeps/``. The tuning driver records the sweep's status while the
web page or ``digits sweep promote`` names its result, possibly at the same
moment from another process: every change re-reads the file and rewrites it
atomically under the folder's record lock
(:func:`~digits_core.jobs.lock.record_lock`), so neither loses the other's keys.

The sweep files are read here, below both the tuning driver and the sweep
reports (:func:`read_sweep`: the record and its started trials;
:func:`reap_sweep_record`: a Running sweep whose process died reads Aborted).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import resolve_jobs_dir
from ..errors import JobNotFoundError
from ..jobs.checks import check_record_types
from ..jobs.lock import LOCK_FILE, is_job_alive, record_lock
from ..jobs.readers import UnreadableRecordError, read_json_object
from ..jobs.record import SweepRecord, write_json_atomic

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

SWEEP_FILE = "sweep.json"
#: The folder of the sweeps under a jobs folder (skipped by job listings: it starts with a dot).
SWEEPS_DIR = ".sweeps"

#: What the sweep pages and a resume read from every ``sweep.json`` (a record without one is unreadable).
REQUIRED_KEYS = ("id", "name", "group", "dataset", "network", "settings", "search", "trials")
REQUIRED_SETTINGS = ("metric", "mode", "max_epochs", "scheduler")


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
    missing = [key for key in REQUIRED_KEYS if record.get(key) is None]
    settings = record.get("settings") or {}
    missing += [f"settings.{key}" for key in REQUIRED_SETTINGS if settings.get(key) is None]
    if missing:
        raise UnreadableRecordError(path, f"it lacks {', '.join(missing)}")
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


def sweeps_root(jobs_dir: Any = None) -> Path:
    """``JOBS_DIR/.sweeps``: one folder per sweep (skipped by job listings: it starts with a dot)."""
    return resolve_jobs_dir(jobs_dir) / SWEEPS_DIR


def read_sweep(sweep_id: str, jobs_dir: Any = None) -> dict:
    """A sweep's record with its started trials (``trials_started``: index -> job id).

    Raises:
        JobNotFoundError: No such sweep (the id must be a plain folder name).
    """
    folder = sweeps_root(jobs_dir) / str(sweep_id)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(sweep_id)) or not (folder / SWEEP_FILE).is_file():
        raise JobNotFoundError(f'No sweep "{sweep_id}" in {sweeps_root(jobs_dir)}')
    record: dict[str, Any] = dict(reap_sweep_record(folder))  # Running with no live process: Aborted
    started = {}
    for path in folder.glob("trial-*.json"):
        try:
            trial = read_json_object(path)  # bounded in size and depth like every record
            started[int(trial["index"])] = str(trial["job_id"])
        except (OSError, ValueError, KeyError, TypeError, UnreadableRecordError):
            continue  # a damaged trial file: that trial reads as not started
    record["trials_started"] = dict(sorted(started.items()))
    return record


def reap_sweep_record(folder: Path) -> SweepRecord:
    """``sweep.json``, first marked Aborted when it says Running and no live process runs the sweep.

    The process that runs a sweep holds the sweep folder's owner lock
    (:class:`~digits_core.jobs.lock.JobLock`, as a job's runner does) from before
    its record says Running until it has written how the sweep ended. Running
    with no live holder is a sweep whose process died (a server killed with
    ``kill -9``, a reboot): it is marked Aborted here, naming that process, and
    resumes like a job (:func:`digits_core.sweeps.tune.resume_sweep`).

    Raises:
        JobNotFoundError: The file is missing or unreadable (the message names it).
    """
    record = read_sweep_record(folder)
    if record.get("status") != "Running" or is_job_alive(folder):
        return record
    with record_lock(folder):
        record = read_sweep_record(folder)
        if record.get("status") == "Running" and not is_job_alive(folder):
            record.update({"status": "Aborted", "finished": time.time(), "error": _died_note(folder)})
            write_json_atomic(folder / SWEEP_FILE, record)
    return record


def _died_note(folder: Path) -> str:
    try:
        owner = read_json_object(folder / LOCK_FILE)
        who = f"pid {int(owner['pid'])} on {str(owner['host'])[:100]}"
    except (OSError, ValueError, KeyError, TypeError, UnreadableRecordError):
        who = "its process"
    return f"The process that ran this sweep ({who}) ended without finishing it; resume the sweep to run the rest."


def sweep_of_job(job_id: str, group: str | None, jobs_dir: Any = None) -> str | None:
    """The id of the sweep whose trial ``job_id`` is (its group's sweeps are searched), else ``None``."""
    root = sweeps_root(jobs_dir)
    if not group or not root.is_dir():
        return None
    for folder in sorted(root.iterdir()):
        try:
            if read_json_object(folder / SWEEP_FILE).get("group") != group:
                continue
        except (OSError, UnreadableRecordError):
            continue
        for path in folder.glob("trial-*.json"):
            try:
                if read_json_object(path).get("job_id") == job_id:
                    return folder.name
            except (OSError, UnreadableRecordError):
                continue
    return None


def sweep_groups(jobs_dir: Any = None) -> dict[str, str]:
    """Each sweep's trial group and the sweep's id (the newest sweep of a group), for pages that list groups."""
    root = sweeps_root(jobs_dir)
    found: dict[str, str] = {}
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            group = read_json_object(folder / SWEEP_FILE).get("group")
        except (OSError, UnreadableRecordError):
            continue
        if isinstance(group, str):
            found[group] = folder.name
    return found
