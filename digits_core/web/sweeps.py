"""Queue the training jobs of a New Model request: one job, or one per sweep combination, in one group.

The web form and ``POST /api/models`` both call :func:`create_model_jobs`;
it expands the options with :func:`digits_core.sweep.expand_sweep` (the
expansion the CLI and other executors use) and queues each point through
:func:`digits_core.web.models_views.create_model_job`, so every job of a
sweep is validated, saved and scheduled exactly as a single job is.
"""

from __future__ import annotations

from ..errors import FormValidationError
from ..groups import normalize_group
from ..jobs import Job
from ..sweep import expand_sweep, sweep_group


def create_model_jobs(
    name: str,
    dataset: str,
    network: str | None,
    options: dict,
    custom_code: str | None = None,
    group: str | None = None,
) -> list[Job]:
    """Validate and queue one training job, or every job of a sweep.

    All points are checked before the first job is created, so a bad value
    queues nothing. The jobs of a sweep are named ``"NAME lr=… batch=…"``
    and all join ``group`` (default: ``name``); ``job.json`` key ``sweep``
    holds each job's swept values.

    Args:
        name: The model's name (of a sweep: the start of every job name).
        dataset, network, custom_code: As for :func:`~digits_core.web.models_views.create_model_job`.
        options: Training options; ``learning_rate`` / ``batch_size`` may hold several values
            (lists or comma-separated text).
        group: The job group (optional for a single job).

    Returns:
        The queued jobs, in sweep order.

    Raises:
        FormValidationError: A bad name, group, option, dataset or network (nothing is queued).
    """
    from .models_views import check_options, create_model_job

    if not (name or "").strip():
        raise FormValidationError({"model_name": ["Give the model a name."]}, "new model")
    group_name = normalize_group(group)
    points = expand_sweep(options, name.strip())
    if len(points) == 1:
        return [create_model_job(name, dataset, network, dict(points[0].options), custom_code, group=group_name)]
    check_options(dict(options))  # every point, before any job exists
    group_name = sweep_group(name, group_name)
    return [
        create_model_job(
            point.name, dataset, network, dict(point.options), custom_code, group=group_name, sweep=point.values
        )
        for point in points
    ]
