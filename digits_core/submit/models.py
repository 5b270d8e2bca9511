"""Model jobs: validate a training request, save its job and queue it; one job or every point of a sweep.

The New Model form, ``POST /api/models`` and every other door that queues training
call :func:`create_model_jobs`: it expands the options with
:func:`digits_core.sweeps.grid.expand_sweep` (the expansion the CLI and the executors
use) and queues each point through :func:`create_model_job`, so every job of a
sweep is validated, saved and scheduled exactly as a single job is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import DigitsError, FormValidationError
from ..groups import normalize_group
from ..jobs import Job, JobStatus
from ..jobs.checks import MAX_JOB_NAME_LENGTH
from ..sweeps import expand_sweep, sweep_group
from .options import check_options, check_request_options
from .records import create_model_record

if TYPE_CHECKING:
    from pathlib import Path

    from ..jobs import JobStore
    from ..jobs.record import JobFields

#: File a custom network's code is saved to in its model job folder.
CUSTOM_NETWORK_FILE = "custom_network.py"


class Queue(Protocol):
    """What the submission layer needs of a scheduler: somewhere to put a saved job."""

    def submit(self, job: Job) -> Any: ...


def dataset_task(ds: Job) -> str | None:
    """The training task a Done dataset calls for (from its label kind), or ``None`` when unknown."""
    from ..engine.tasks import TASKS  # the task table, only when a dataset is looked at

    kind = (((ds.data.get("dataset") or {}).get("label")) or {}).get("kind")
    return next((name for name, task in TASKS.items() if task.label_kind == kind), None) if kind else None


def dataset_kind(ds: Job) -> str | None:
    """What networks a Done dataset takes: ``"volume"`` for a 3-D one (``"layout": "DHWC"``), else its task.

    The kind :func:`digits_core.engine.networks.networks_for_kind` offers networks for (files only, no TensorFlow).
    """
    from ..engine.networks import VOLUME_KIND  # the network registry's metadata
    from ..jobs.readers import read_json_object

    try:
        if read_json_object(ds.path / "dataset" / "dataset.json").get("layout") == "DHWC":
            return VOLUME_KIND
    except (OSError, DigitsError):
        pass  # not published as a folder dataset: its label kind says the task
    return dataset_task(ds)


def _input_size_errors(spec: Any, options: dict, ds: Job) -> dict[str, list[str]]:
    """The engine's minimum-input rule (:func:`~digits_core.engine.networks.check_network_input`) on the dataset's
    stored image size (``dataset.json``), before any job exists; a dataset of varying sizes is left to the job."""
    from ..engine.networks import check_network_input  # the engine's rule on metadata (no TensorFlow), per request
    from ..jobs.readers import read_json_object  # (as dataset_kind)

    try:
        shape = (read_json_object(ds.path / "dataset" / "dataset.json").get("feature") or {}).get("shape")
    except (OSError, DigitsError, AttributeError):
        return {}
    if not (isinstance(shape, list) and len(shape) in (2, 3) and all(isinstance(v, int) for v in shape)):
        return {}
    given = options.get("network_params")
    params: dict = given if isinstance(given, dict) else {}
    crop = options.get("crop_size")
    try:
        check_network_input(spec, shape, crop if isinstance(crop, int) and crop > 0 else None, params)
    except FormValidationError as exc:
        return dict(exc.errors)
    except (TypeError, ValueError):  # an input_size that is no number: the options' own check names it
        return {}
    return {}


def _network_errors(network: str, options: dict, ds: Job | None) -> dict[str, list[str]]:
    """A network name checked with the engine's rules: known, fit for the dataset's kind and task, its weights usable."""
    from ..engine.networks import list_networks, network_kind_problem, network_task_problem  # per request
    from ..engine.volume_nets import VOLUME_NETWORKS  # names only, as list_networks

    errors: dict[str, list[str]] = {}
    specs = {spec.name.lower(): spec for spec in list_networks()}
    names = set(specs) | set(VOLUME_NETWORKS)
    kind_problem = network_kind_problem(network, dataset_kind(ds), ds.id) if ds is not None else None
    if network.lower() not in names and not (ds is not None and dataset_kind(ds) == "volume"):
        errors["network"] = [f'Unknown network "{network}"; choose one of {", ".join(sorted(names))}.']
    elif kind_problem:  # a volume network on 2-D data or the reverse: refused here, not 16 s into the job
        errors["network"] = [kind_problem]
    elif ds is not None and network.lower() in specs:
        problem = network_task_problem(specs[network.lower()], options.get("task") or dataset_task(ds), ds.id)
        if problem:
            errors["network"] = [problem]
    if ds is not None and network.lower() in specs and "network" not in errors:
        errors.update(_input_size_errors(specs[network.lower()], options, ds))
    if network.lower() in specs:
        from ..engine.trainer import check_weights  # the engine's rule, as for the network above

        try:  # weights that are missing, tampered or outside the data roots: refused before any job exists
            check_weights(specs[network.lower()], options, download=False)
        except FormValidationError as exc:
            errors.update(exc.errors)
    return errors


def create_model_job(
    name: str,
    dataset: str,
    network: str | None,
    options: dict,
    custom_code: str | None = None,
    *,
    store: JobStore,
    queue: Queue,
    jobs_dir: str | Path,
    group: str | None = None,
    sweep: dict | None = None,
) -> Job:
    """Validate, save and queue a training job.

    A request with several values of an option (a sweep) goes through
    :func:`create_model_jobs`, which calls this once per point.

    Args:
        name: The model's name.
        dataset: A Done dataset job id.
        network: A network name, or ``None``/"" with ``custom_code``.
        options: Engine training options (see ``TrainingOptions``).
        custom_code: Python source defining ``build_model``; saved as
            ``network.py`` in the job folder and run only by the job's worker.
        store: The job store the dataset is looked up in.
        queue: Where the saved job is queued (the server's scheduler).
        jobs_dir: The jobs folder the job is created in.
        group: The job group (``job.json`` key ``group``).
        sweep: For a point of a sweep, its swept values (``job.json`` key ``sweep``).

    Raises:
        FormValidationError: A bad option, name, dataset or network.
    """
    errors: dict[str, list[str]] = {}
    if not (name or "").strip():
        errors["model_name"] = ["Give the model a name."]
    elif len(name) > MAX_JOB_NAME_LENGTH:
        errors["model_name"] = [f"at most {MAX_JOB_NAME_LENGTH} characters, not {len(name)}"]
    ds: Job | None
    try:
        ds = store.get(dataset, kind="dataset")
        if ds.status is not JobStatus.DONE:
            errors["dataset"] = [f"Dataset {ds.id} is {ds.status.value}; choose a dataset that is Done."]
    except DigitsError as exc:
        errors["dataset"] = [str(exc)]
        ds = None
    if custom_code is None and network:
        errors.update(_network_errors(network, options, ds))
    elif custom_code is not None:
        from ..engine.networks import custom_code_problem, network_kind_problem  # the engine's rules

        problem = custom_code_problem(custom_code)
        if problem:
            errors["custom_network"] = [problem]
        kind_problem = network_kind_problem("custom code", dataset_kind(ds), ds.id) if ds is not None else None
        if kind_problem:  # a volume dataset trains only the volume networks
            errors["network"] = [kind_problem]
    try:
        check_request_options(  # the gate every door shares (POST /api/sweeps too)
            options, store, network=network if custom_code is None else None
        )
    except FormValidationError as exc:
        errors.update(exc.errors)
    if errors or ds is None:
        raise FormValidationError(errors, "new model")
    # network: None only from a direct call without one, stored as it came (the doors refuse that earlier)
    extra: JobFields = {
        "dataset_id": ds.id,
        "network": cast(str, network if custom_code is None else CUSTOM_NETWORK_FILE),
    }
    if group:
        extra["group"] = group
    if sweep:
        extra["sweep"] = sweep
    job = create_model_record(
        name.strip(),
        jobs_dir=jobs_dir,
        **extra,
    )
    with job.removed_if_disk_full():  # a full disk: no job left Initialized, a 507 that says where
        if custom_code is not None:
            (job.path / CUSTOM_NETWORK_FILE).write_text(custom_code, encoding="utf-8")
            network = str(job.path / CUSTOM_NETWORK_FILE)
        if custom_code is not None:
            job.update(train_options={"dataset": ds.id, "network": network, **options}, custom_network=True)
        else:
            job.update(train_options={"dataset": ds.id, "network": network, **options})
        queue.submit(job)
    return job


def create_model_jobs(
    name: str,
    dataset: str,
    network: str | None,
    options: dict,
    custom_code: str | None = None,
    group: str | None = None,
    *,
    store: JobStore,
    queue: Queue,
    jobs_dir: str | Path,
) -> list[Job]:
    """Validate and queue one training job, or every job of a sweep.

    All points are checked before the first job is created, so a bad value
    queues nothing. The jobs of a sweep are named ``"NAME lr=… batch=…"``
    and all join ``group`` (default: ``name``); ``job.json`` key ``sweep``
    holds each job's swept values.

    Args:
        name: The model's name (of a sweep: the start of every job name).
        dataset, network, custom_code, store, queue, jobs_dir: As for :func:`create_model_job`.
        options: Training options; ``learning_rate`` / ``batch_size`` may hold several values
            (lists or comma-separated text).
        group: The job group (optional for a single job).

    Returns:
        The queued jobs, in sweep order.

    Raises:
        FormValidationError: A bad name, group, option, dataset or network (nothing is queued).
    """
    if not (name or "").strip():
        raise FormValidationError({"model_name": ["Give the model a name."]}, "new model")
    group_name = normalize_group(group)
    points = expand_sweep(options, name.strip())
    if len(points) == 1:
        return [
            create_model_job(
                name,
                dataset,
                network,
                dict(points[0].options),
                custom_code,
                store=store,
                queue=queue,
                jobs_dir=jobs_dir,
                group=group_name,
            )
        ]
    check_options(dict(options))  # every point, before any job exists
    group_name = sweep_group(name, group_name)
    return [
        create_model_job(
            point.name,
            dataset,
            network,
            dict(point.options),
            custom_code,
            store=store,
            queue=queue,
            jobs_dir=jobs_dir,
            group=group_name,
            sweep=point.values,
        )
        for point in points
    ]
