"""The sweep training runner: every point of a grid sweep trained one after the other in this process.

``digits train`` with several values of an option and the Python API call
:func:`train_sweep`; the points come from :func:`digits_core.sweeps.grid.expand_sweep`. The engine is imported when a sweep trains, not
on import (``digits train --help`` stays light).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import DigitsError, FormValidationError
from .grid import SweepPoint, expand_sweep, sweep_group

if TYPE_CHECKING:
    from ..jobs import Job


def train_sweep(
    dataset: Any,
    network: Any = None,
    name: str | None = None,
    *,
    group: str | None = None,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
    on_job: Callable[[Job], None] | None = None,
    stop_on_abort: bool = True,
    **options: Any,
) -> list[Job]:
    """Train every point of a sweep, one after the other, in this process.

    All points are checked before the first job is created (a bad value
    creates nothing). A point whose training fails (status Error) does not stop
    the others; an aborted point (Ctrl-C, ``digits model abort``) stops the
    sweep when ``stop_on_abort`` is set, and the points not started are not
    created.

    Args:
        dataset, network, jobs_dir, progress, on_job: As for :func:`digits_core.engine.train`
            (``progress`` events get ``sweep_index`` and ``sweep_size`` added).
        name: The sweep's name (job names are ``"NAME lr=… batch=…"``; default: the network and dataset).
        group: The group of every job (default: ``name``).
        stop_on_abort: Do not start the remaining points after one was aborted.
        **options: Training options; ``learning_rate`` and ``batch_size`` may hold several values.

    Returns:
        The model :class:`~digits_core.Job` of every point that ran, in order (status Done,
        Error or Aborted).

    Raises:
        FormValidationError: A value is invalid (nothing is created).
    """
    from ..engine.options import TrainingOptions  # the engine loads when a sweep trains
    from ..engine.trainer import train  # likewise

    label = name or f"{network if isinstance(network, str) else 'model'}-sweep"
    points = expand_sweep(options, label)
    for point in points:
        TrainingOptions.from_kwargs(**point.options)
    group_name = sweep_group(label, group)
    jobs: list[Job] = []
    for point in points:
        created: list[Job] = []

        def keep(job: Job, _created: list[Job] = created) -> None:
            _created.append(job)
            if on_job is not None:
                on_job(job)

        def report(event: dict, _point: SweepPoint = point) -> None:
            if progress is not None:
                progress({**event, "sweep_index": _point.index, "sweep_size": len(points)})

        try:
            job = train(
                dataset,
                network,
                point.name,
                jobs_dir=jobs_dir,
                progress=report,
                on_job=keep,
                group=group_name,
                sweep=point.values or None,
                **point.options,
            )
        except FormValidationError:
            if not created:
                raise
            job = created[0].reload()
        except DigitsError:
            if not created:
                raise
            job = created[0].reload()  # ended in Error; the next point still runs
        jobs.append(job)
        if stop_on_abort and job.status.value == "Aborted":
            break
    return jobs
