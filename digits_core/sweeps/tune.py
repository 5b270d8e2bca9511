"""Hyper-parameter search on Ray Tune: grid, random and ASHA over any searchable option.

:func:`tune` (``digits tune``, ``POST /api/sweeps``) checks a search
(:mod:`digits_core.sweeps.space`), writes the sweep's record and starts Ray
Tune; it returns a :class:`TuneHandle` at once. Every trial is one ordinary
model job (:func:`digits_core.engine.train` in a Ray worker: the same lock,
``worker.log``-free in-process run, metrics, snapshots and resume rules as
any job), all in one job group, each reporting its validation metric to
Tune at the end of every epoch (:mod:`digits_core.sweeps.trials`).

Schedulers:

* ``grid``: every combination of the (discrete) spaces, each to ``max_epochs``;
* ``random``: ``trials`` points drawn from the spaces, each to ``max_epochs``;
* ``asha``: the same random points under Ray Tune's ``ASHAScheduler``
  (``grace_period``, ``reduction_factor``, ``max_t = max_epochs``). A trial
  it cuts at a rung ends **Stopped early** (not Error or Aborted), its
  ``status_note`` naming the rung and the reason, snapshots and metrics kept.

Ray runs on this machine, on 127.0.0.1 only, when no cluster address is
given: a cluster of its own, started once per process for all its sweeps
(never one an earlier ``ray start`` recorded in Ray's temp folder). Sweeps
of one process run side by side. The process running a sweep holds the
sweep folder's lock; a sweep left Running by a dead process reads Aborted
(:func:`reap_sweep_record`). The sweep's record (``sweep.json``), one ``trial-N.json`` per started
trial and Tune's experiment folder live in ``JOBS_DIR/.sweeps/SWEEP_ID/``.
:meth:`TuneHandle.abort` (Ctrl-C in ``digits tune``) asks every running
trial to stop at its next step (status Aborted, snapshots kept), starts no
new one and leaves every finished trial as it is. No TensorFlow or Ray is
imported until a sweep runs.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.early_stopping import direction
from ..engine.mlflow_log import TRACKING_KEY
from ..errors import DigitsError, FormValidationError, JobStateError
from ..groups import normalize_group
from ..jobs import JobStatus, JobStore
from ..jobs.lock import JobLock
from ..submit.records import job_owner
from .record import SWEEP_FILE, SWEEPS_DIR, update_sweep_record, write_sweep_record

# The sweep files' reader lives below both this module and the reports; its names stay importable from here.
from .record import read_sweep as read_sweep
from .record import reap_sweep_record as reap_sweep_record
from .record import sweeps_root as sweeps_root
from .report import sweep_summary
from .space import MAX_TRIALS, check_networks, grid_size, grid_trials, parse_spaces, random_trials

SCHEDULERS = ("grid", "random", "asha")
#: Most trials one sweep runs at the same time (``max_concurrent``); Ray still runs no more than it has CPUs for.
MAX_CONCURRENT = 64
#: Most epochs of a trial (``max_epochs``): the ``epochs`` training option's own bound.
MAX_EPOCHS = 100000
#: Written in a sweep's folder by an abort: trials not started yet do not start.
SWEEP_ABORT_FILE = "abort"
_FORM = "tuning"


@dataclass(frozen=True)
class TuneSettings:
    """How a search runs (everything but the spaces and the training options).

    Attributes:
        scheduler: ``grid``, ``random`` or ``asha``.
        trials: Random points (``random``, ``asha``); the grid's size for ``grid``.
        max_epochs: Epochs of a trial that is not stopped (ASHA's ``max_t``).
        metric: The validation metric reported to Tune and ranked by (``val_accuracy``, ``val_loss`` ...).
        mode: ``min``, ``max`` or ``auto`` (from the metric's name).
        grace_period: ASHA: epochs before a trial may be cut.
        reduction_factor: ASHA: a rung keeps the best 1/reduction_factor of the trials.
        max_concurrent: Trials running at the same time, at most :data:`MAX_CONCURRENT` (``None``: as many as
            Ray has CPUs).
        seed: Seed of the random points (``None``: random).
    """

    scheduler: str = "asha"
    trials: int = 16
    max_epochs: int = 10
    metric: str = "val_accuracy"
    mode: str = "auto"
    grace_period: int = 1
    reduction_factor: float = 3.0
    max_concurrent: int | None = None
    seed: int | None = None

    def checked(self) -> TuneSettings:
        """These settings with ``mode`` resolved; raises :class:`FormValidationError` naming each bad one."""
        errors: dict[str, list[str]] = {}
        if self.scheduler not in SCHEDULERS:
            errors["scheduler"] = [f"choose one of {', '.join(SCHEDULERS)}"]
        bounds = {
            "trials": MAX_TRIALS,
            "max_epochs": MAX_EPOCHS,
            "grace_period": MAX_EPOCHS,
            "max_concurrent": MAX_CONCURRENT,
        }
        for name, high in bounds.items():
            value = getattr(self, name)
            if name == "max_concurrent" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                errors[name] = [f"a whole number from 1 to {high}, not {str(value)[:40]}"]
        if not errors and self.grace_period > self.max_epochs:
            errors["grace_period"] = [f"at most max_epochs ({self.max_epochs})"]
        factor = self.reduction_factor
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 < factor < float("inf"):
            errors["reduction_factor"] = ["a number above 1 (3 keeps the best third at each rung)"]
        if not str(self.metric).startswith("val_"):
            errors["metric"] = [f'"{str(self.metric)[:80]}" is not a validation metric: use a logged val_* name']
        if self.mode not in ("auto", "min", "max"):
            errors["mode"] = ["choose one of auto, min, max"]
        if errors:
            raise FormValidationError(errors, _FORM)
        return TuneSettings(**{**self.__dict__, "mode": direction(self.metric, self.mode)})


def list_sweeps(jobs_dir: Any = None) -> list[dict]:
    """Every sweep's record, newest first."""
    root = sweeps_root(jobs_dir)
    if not root.is_dir():
        return []
    return [
        read_sweep(path.name, jobs_dir)
        for path in sorted(root.iterdir(), reverse=True)
        if (path / SWEEP_FILE).is_file()
    ]


class TuneHandle:
    """A running (or finished) sweep: wait for it, abort it, read its trials.

    Attributes:
        sweep_id: The sweep's id (its folder under ``JOBS_DIR/.sweeps``).
        group: The job group of every trial.
        folder: The sweep's folder.
    """

    def __init__(self, sweep_id: str, group: str, folder: Path, jobs_dir: Any):
        self.sweep_id, self.group, self.folder, self.jobs_dir = sweep_id, group, folder, jobs_dir
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, plan: dict, owner: JobLock) -> TuneHandle:
        """Run the sweep on Ray Tune in a background thread, which releases ``owner`` (the sweep folder's
        lock, taken before its record said Running) once it has recorded how the sweep ended."""

        def run() -> None:
            from .trials import run_sweep  # Ray loads when a sweep runs

            try:
                run_sweep(plan)
                status = "Aborted" if (self.folder / SWEEP_ABORT_FILE).exists() else "Done"
                update_sweep_record(self.folder, status=status, finished=time.time())
            except BaseException as exc:  # noqa: BLE001 - reported by wait() and the sweep's record
                self.error = exc
                update_sweep_record(
                    self.folder, status="Error", error=f"{type(exc).__name__}: {exc}", finished=time.time()
                )
            finally:
                owner.release()

        self._thread = threading.Thread(target=run, name=f"tune-{self.sweep_id}", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        """True while Ray Tune still runs trials."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> dict:
        """Block until the sweep ends (or ``timeout`` seconds); returns :func:`~digits_core.sweeps.report.sweep_summary`.

        Raises:
            DigitsError: The sweep itself failed (a trial's failure only ends that trial in Error).
        """
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            if isinstance(self.error, DigitsError):
                raise self.error
            raise DigitsError(f"The sweep {self.sweep_id} failed: {type(self.error).__name__}: {self.error}")
        return sweep_summary(self.sweep_id, self.jobs_dir)

    def abort(self) -> None:
        """Stop the sweep: no new trial starts; every running trial stops at its next step (Aborted)."""
        abort_sweep(self.sweep_id, self.jobs_dir)


def abort_sweep(sweep_id: str, jobs_dir: Any = None) -> list[str]:
    """Stop a sweep (see :meth:`TuneHandle.abort`); returns the ids of the trial jobs asked to stop."""
    from ..engine.trainer import request_abort  # the engine loads when a sweep is aborted

    record = read_sweep(sweep_id, jobs_dir)
    folder = sweeps_root(jobs_dir) / sweep_id
    (folder / SWEEP_ABORT_FILE).write_text(str(time.time()), encoding="utf-8")
    store, asked = JobStore(jobs_dir), []
    for job_id in record["trials_started"].values():
        try:
            job = store.get(job_id)
        except Exception:  # noqa: BLE001 - a deleted trial has nothing to stop
            continue
        if not job.status.is_finished:
            request_abort(job, jobs_dir)
            asked.append(job.id)
    if record.get("status") in (None, "Running"):
        update_sweep_record(folder, abort_requested=time.time())
    return asked


def resume_sweep(sweep_id: str, jobs_dir: Any = None) -> TuneHandle:
    """Run an aborted sweep's unfinished trials: Aborted (or failed) ones continue from their last snapshot
    in the same job, those never started start now; finished trials are left as they are.

    ASHA's rungs start over with the resumed trials (the finished ones are not compared again).

    Raises:
        JobStateError: A trial still runs, or every trial finished (nothing to resume).
    """
    record = read_sweep(sweep_id, jobs_dir)
    store = JobStore(jobs_dir)
    run = []
    for index in range(len(record["trials"])):
        job_id = record["trials_started"].get(index)
        try:
            status = store.get(job_id).status if job_id else None
        except DigitsError:
            status = None
        if status is not None and not status.is_finished:
            raise JobStateError(f"Sweep {sweep_id} still runs trial {index + 1} ({job_id}): abort it first.")
        if status in (None, JobStatus.ABORTED, JobStatus.ERROR):
            run.append(index)
    if not run:
        raise JobStateError(f"Sweep {sweep_id}: every trial finished; nothing to resume.")
    folder = sweeps_root(jobs_dir) / sweep_id
    owner = JobLock(folder).acquire()  # JobLockedError: another live process runs this sweep
    if record.get("status") == "Running":
        owner.release()
        raise JobStateError(f"Sweep {sweep_id} still runs: abort it first.")
    (folder / SWEEP_ABORT_FILE).unlink(missing_ok=True)
    plan = {key: value for key, value in record.items() if key not in ("trials_started", "status", "error")}
    plan.update(run_trials=run, tune_name=f"tune-resume-{int(time.time())}")
    update_sweep_record(folder, status="Running", resumed=time.time())
    return TuneHandle(sweep_id, record["group"], folder, jobs_dir).start(plan, owner)


def _new_sweep_id(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:40] or "sweep"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{int(time.time() * 1000) % 10000:04d}"


def plan_sweep(
    dataset: Any,
    network: str | None,
    name: str | None,
    search: Iterable[str] | Mapping[str, Any],
    settings: TuneSettings,
    options: Mapping[str, Any],
    *,
    group: str | None = None,
    jobs_dir: Any = None,
) -> dict:
    """Check everything and compute the trials (no job, no folder yet).

    Raises:
        FormValidationError: Every bad space (keyed by its option), setting or training option.
    """
    from ..datasets import open_dataset  # datasets and the engine load when a sweep is planned
    from ..engine.options import TrainingOptions  # likewise
    from ..engine.tasks import task_for_label_kind  # likewise

    settings = settings.checked()
    spaces = parse_spaces(search)
    reserved = sorted(set(spaces) & {"epochs", "validation_interval"})
    if reserved:
        raise FormValidationError({reserved[0]: ["set by the tuner (max_epochs, one validation per epoch)"]}, _FORM)
    clash = sorted(set(spaces) & set(options))
    if clash:
        raise FormValidationError({clash[0]: ["given both as an option and as a search space"]}, _FORM)
    reader = open_dataset(str(dataset), jobs_dir=jobs_dir)
    task = options.get("task") or getattr(task_for_label_kind(reader.label_kind), "name", None)
    check_networks(spaces, task)
    if settings.scheduler == "grid":
        trials = grid_trials(spaces)
    else:
        trials = random_trials(spaces, settings.trials, settings.seed)
    base = {**dict(options), "epochs": settings.max_epochs, "validation_interval": 1}
    checked = {k: v for k, v in base.items() if k != TRACKING_KEY}  # the tracking URI rides beside the options
    for values in trials:
        TrainingOptions.from_kwargs(**{**checked, **{k: v for k, v in values.items() if k != "network"}})
    label = (name or "").strip() or f"{network or 'model'}-tune"
    return {
        "name": label,
        "group": normalize_group(group) or normalize_group(label) or "sweep",
        "dataset": reader.id,
        "network": network,
        "settings": settings.__dict__,
        "options": base,
        "spaces": {option: space.to_dict() for option, space in spaces.items()},
        "search": [f"{option}={space.describe()}" for option, space in spaces.items()],
        "grid_size": grid_size(spaces),
        "trials": trials,
    }


def tune(
    dataset: Any,
    network: str | None = None,
    name: str | None = None,
    *,
    search: Iterable[str] | Mapping[str, Any],
    scheduler: str = "asha",
    trials: int = 16,
    max_epochs: int = 10,
    metric: str = "val_accuracy",
    mode: str = "auto",
    grace_period: int = 1,
    reduction_factor: float = 3.0,
    max_concurrent: int | None = None,
    search_seed: int | None = None,
    group: str | None = None,
    jobs_dir: Any = None,
    ray_address: str | None = None,
    **options: Any,
) -> TuneHandle:
    """Start a hyper-parameter search; returns its :class:`TuneHandle` at once (``handle.wait()`` blocks).

    Args:
        dataset: A dataset job id (or unique prefix).
        network: The network of every trial (a ``network`` space overrides it; ``None``: the task's).
        name: The sweep's name: the start of every trial's job name and the default group.
        search: Spaces, as ``OPTION=EXPR`` strings or ``{option: expr}`` (see :mod:`digits_core.sweeps.space`).
        scheduler, trials, max_epochs, metric, mode, grace_period, reduction_factor, max_concurrent:
            See :class:`TuneSettings`.
        search_seed: Seed of the random points (:attr:`TuneSettings.seed`; ``seed`` is the training option).
        group: The job group of every trial (default: ``name``).
        jobs_dir: Jobs folder.
        ray_address: A Ray cluster (``HOST:PORT``); ``None``: ``$DIGITS_RAY_ADDRESS``, else Ray on this machine
            (127.0.0.1 only).
        **options: Training options every trial shares.

    Raises:
        FormValidationError: A bad space, setting or option (nothing is created).
    """
    import os

    from ..config import resolve_jobs_dir

    settings = TuneSettings(
        scheduler, trials, max_epochs, metric, mode, grace_period, reduction_factor, max_concurrent, search_seed
    )
    plan = plan_sweep(dataset, network, name, search, settings, options, group=group, jobs_dir=jobs_dir)
    root = resolve_jobs_dir(jobs_dir)
    sweep_id = _new_sweep_id(plan["name"])
    folder = root / SWEEPS_DIR / sweep_id
    folder.mkdir(parents=True)
    owner = JobLock(folder).acquire()  # held while the record says Running: a dead process's sweep reads Aborted
    plan.update(
        id=sweep_id,
        folder=str(folder),
        jobs_dir=str(root),
        ray_address=ray_address or os.environ.get("DIGITS_RAY_ADDRESS") or None,
        owned_by=job_owner.get(),  # the signed-in user who started it: its trials, made on Ray workers, are theirs
    )
    try:
        write_sweep_record(folder, {**plan, "status": "Running", "created": time.time()})  # type: ignore[typeddict-item]
        return TuneHandle(sweep_id, plan["group"], folder, jobs_dir).start(plan, owner)
    except BaseException:
        owner.release()
        raise
