"""Dataset jobs: validate a dataset request, save its job and queue it (the web page and ``POST /api/datasets``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..jobs import Job
from ..paths import check_form_paths

if TYPE_CHECKING:
    from .models import Queue


def queue_dataset_job(
    plugin_id: str,
    form_data: dict,
    name: str | None = None,
    workers: int | str | None = None,
    max_errors: Any = None,
    group: str | None = None,
    *,
    queue: Queue,
    jobs_dir: str | os.PathLike,
    data_roots: Sequence[str],
) -> Job:
    """Validate, save and queue a dataset job.

    Validation and the job folder come from
    :func:`digits_core.datasets.create_dataset_job` (the job options are checked
    as :mod:`digits_core.datasets.options` declares them: an empty name means
    the plugin id, as on the command line); the scheduler's worker runs
    :func:`digits_core.datasets.run_dataset_job` on it, reading the data under
    ``data_roots`` as the request was checked against them.

    Raises:
        FormValidationError: The plugin form rejected ``form_data``.
        PluginNotFoundError: No such data plugin.
        DatasetOptionsError: A bad job option (name, group, workers, max_errors).
        DiskFullError: The jobs folder's disk is full; nothing of the job is left.
    """
    from ..datasets import create_dataset_job  # the dataset builder loads only when a dataset is queued

    check_form_paths(form_data, f'dataset form of plugin "{plugin_id}"')
    job = create_dataset_job(
        plugin_id,
        form_data,
        name=name,
        jobs_dir=jobs_dir,
        workers=workers,  # type: ignore[arg-type]  # text from a form: the dataset options parse it
        max_errors=max_errors,
        group=group,
    )
    with job.removed_if_disk_full():  # a full disk: no job left Initialized, a 507 that says where
        # The worker reads the data under the same roots (paths inside list files, symlinks in folders).
        job.update(data_roots=list(data_roots))
        queue.submit(job)
    return job
