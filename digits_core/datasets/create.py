"""Creating a dataset from any data plugin: the one path behind the API, CLI and web UI.

:func:`create_dataset` validates the plugin's form and creates a dataset job;
:func:`run_dataset_job` builds it. The build, one unit per module:

* itemize the entries in this process (the plugin's ``itemize_entries``);
* :mod:`.pool` — encoder worker processes (or this process, for one worker),
  bound to this process's life, naming the entry a crashed worker held;
* :mod:`.encoder` — what a worker does with a chunk of entries;
* :mod:`.arena` — shared memory the workers write records into (no pickling);
* :mod:`.stage` — one stage's chunks, results and LMDB environment;
* :mod:`.layout` — the dataset layout, decided by agreement;
* :mod:`.report` — the errors report and the error budget;
* :mod:`.publish` — mean image, ``dataset.json`` and the atomic publish.

See ``docs/formats.md`` for the on-disk format.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import DatasetError, DigitsError
from ..interfaces import STAGES
from ..jobs import Job, JobStatus, release_running_hold
from ..submit.records import create_dataset_record
from .encoder import describe_exception
from .options import (  # noqa: F401
    DEFAULT_MAX_ERRORS,
    MAX_CHUNK,
    allowed_errors,
    check_dataset_options,
    chunk_size,
    parse_max_errors,
    resolve_workers,
)
from .pool import make_pool, mp_context
from .progress import ProgressReporter
from .publish import BUILD_PREFIX, FORMAT_NAME, FORMAT_VERSION, dataset_info, publish, write_mean  # noqa: F401
from .reader import ERRORS_FILE, PROGRESS_FILE, Dataset
from .report import ErrorsReport
from .stage import LayoutState, StageEncoder

logger = logging.getLogger("digits_core.datasets")

_mp_context = mp_context  # the name tests and older callers use


def _jsonable(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        for key, item in value.items() if isinstance(value, Mapping) else ():
            try:
                json.dumps(item)
            except (TypeError, ValueError) as item_exc:
                raise DatasetError(
                    f'{what}: key "{key}" is not JSON-serializable ({item_exc}); dataset.json '
                    "stores userdata as JSON: keep paths, numbers and strings there"
                ) from exc
        raise DatasetError(f"{what} is not JSON-serializable: {exc}") from exc


# -- the public API ------------------------------------------------------------------


def create_dataset_job(
    plugin_id: str,
    form_data: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    jobs_dir: str | os.PathLike | None = None,
    max_errors: Any = None,
    workers: int | None = None,
    group: str | None = None,
    hold: bool = False,
) -> Job:
    """Validate the form and create a dataset job (status Initialized) without running it.

    The web UI uses this to queue a job; :func:`run_dataset_job` builds it.
    ``group`` is the job group (see :func:`create_dataset`). ``hold``: this
    process runs the job next and owns it from now on (see
    :func:`~digits_core.submit.records.create_dataset_record`).

    Raises:
        PluginNotFoundError: No data plugin ``plugin_id``.
        FormValidationError: A form value is invalid (the error names the field).
        DatasetOptionsError: A job option (``name``, ``group``, ``workers``, ``max_errors``) is
            invalid (a :class:`~digits_core.errors.DatasetError`; declared in :mod:`.options`).
    """
    from ..forms import validate_values
    from ..plugins.registry import registry

    plugin_cls = registry.get_data_ingestion(plugin_id)
    values = validate_values(
        plugin_cls.get_dataset_form(), form_data or {}, form_name=f'dataset form of plugin "{plugin_id}"'
    )
    options = check_dataset_options(
        {"name": name, "group": group, "workers": workers, "max_errors": max_errors},
        f'dataset job options (plugin "{plugin_id}")',
    )
    group_fields = {"group": options["group"]} if options["group"] else {}
    from ..form_secrets import redact, secret_field_names, stash

    secret = secret_field_names(plugin_cls.get_dataset_form())  # PasswordField values never reach disk
    job = create_dataset_record(
        options["name"] or plugin_id,
        jobs_dir=jobs_dir,
        plugin_id=plugin_id,
        form_data=json.loads(json.dumps(redact(values, secret), default=str)),
        max_errors=parse_max_errors(options["max_errors"]),
        workers=options["workers"],
        hold=hold,
        **group_fields,
    )
    stash(job.id, values, secret)
    return job


def create_dataset(
    plugin_id: str,
    form_data: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    workers: int | None = None,
    jobs_dir: str | os.PathLike | None = None,
    max_errors: Any = None,
    progress: Callable[[dict], None] | None = None,
    group: str | None = None,
    ray_address: str | None = None,
) -> Job:
    """Build a dataset with a data plugin, synchronously.

    Args:
        plugin_id: The data plugin's id (e.g. ``"image-classification"``).
        form_data: Values for the plugin's dataset form (field name to value;
            strings as typed on a command line also work). Missing fields
            take the form's defaults.
        name: The dataset's name (default: the plugin id).
        workers: Encoding processes (default: the number of CPUs; 1 encodes
            in this process).
        jobs_dir: The jobs folder.
        max_errors: How many entries may be skipped before the job fails: a
            count (``10``), a fraction (``0.05``) or a percentage (``"5%"``);
            default 5 %.
        progress: Called with a progress snapshot (see
            :class:`~digits_core.datasets.progress.ProgressReporter`) after
            each chunk of entries.
        group: The job group shown on the web home page (``job.json`` key ``group``;
            see :mod:`digits_core.groups`).
        ray_address: Encode the chunks of entries as Ray tasks on the cluster
            at ``HOST:PORT`` (this process connects as a driver; see
            :mod:`digits_core.executors.ray_encode`) instead of in local
            worker processes; ``workers`` is then ignored.

    Returns:
        The dataset :class:`~digits_core.Job`, status Done; open it with
        :func:`~digits_core.datasets.open_dataset`.

    Raises:
        PluginNotFoundError: No data plugin ``plugin_id``.
        FormValidationError: A form value is invalid (before any work starts).
        DatasetError: The plugin failed to itemize, too many entries failed,
            or nothing could be encoded. The job is left with status Error
            and no published dataset.
        ConfigurationError: ``ray_address`` is given, and Ray is not
            installed or no cluster answers there (no job is created).
    """
    if ray_address is not None:  # no cluster, or no Ray: an error before any job is created
        from ..executors.ray_encode import ray_for_dataset_job

        ray_for_dataset_job(ray_address)
    job = create_dataset_job(
        plugin_id,
        form_data,
        name=name,
        jobs_dir=jobs_dir,
        max_errors=max_errors,
        workers=workers,
        group=group,
        hold=True,
    )
    try:
        return run_dataset_job(job, progress=progress, ray_address=ray_address)  # the job's checked worker count
    finally:
        release_running_hold(job.path)  # a no-op when the run ended the job (it released the hold itself)


def run_dataset_job(
    job: Job,
    *,
    workers: int | None = None,
    progress: Callable[[dict], None] | None = None,
    ray_address: str | None = None,
) -> Job:
    """Build the dataset of a job made by :func:`create_dataset_job` and publish it.

    ``ray_address`` (a cluster's ``HOST:PORT``, or ``"current"`` inside a Ray
    task) encodes the chunks on a Ray cluster, as :func:`create_dataset`.

    Raises:
        DatasetError: As :func:`create_dataset`; the job ends in status Error.
        KeyboardInterrupt: Interrupted (Ctrl-C, or a signal turned into it);
            the job ends Aborted, nothing is published.
    """
    from ..plugins.registry import registry
    from .volume_build import VolumeBuild, is_volume_plugin  # it subclasses _Build: a module-level import would cycle

    try:
        plugin_cls = registry.get_data_ingestion(job.plugin_id or "")
    except DigitsError:  # the build reports it and ends the job in Error
        plugin_cls = None
    build = VolumeBuild if is_volume_plugin(plugin_cls) else _Build
    return build(
        job,
        workers=workers if workers is not None else job.data.get("workers"),
        progress=progress,
        ray_address=ray_address,
    ).run()


# -- one build -------------------------------------------------------------------------


class _Build:
    """Runs one dataset job: plugin → entries → stages → publish; on any failure, nothing is published."""

    def __init__(self, job: Job, *, workers: int | None, progress, ray_address: str | None = None):
        self.job = job
        self.ray_address = ray_address
        self.plugin_id = job.plugin_id or ""
        self.workers = resolve_workers(workers)
        self.max_errors = parse_max_errors(job.data.get("max_errors"))
        self.callback = progress
        self.tmp = job.path / f"{BUILD_PREFIX}{secrets.token_hex(4)}"
        self.layout = LayoutState(self.plugin_id)
        self.stage_info: dict[str, dict] = {}
        self.mean_sums: dict[tuple, list] = {}
        self.report: ErrorsReport | None = None
        self.progress: ProgressReporter | None = None

    def run(self) -> Job:
        job = self.job
        job.set_status(JobStatus.RUNNING, pid=os.getpid())
        started = time.perf_counter()
        try:
            plugin = self._make_plugin()
            t0 = time.perf_counter()
            entries = self._itemize(plugin)
            itemize_s = time.perf_counter() - t0
            from ..form_secrets import redact, secret_field_names

            stored = plugin.userdata_to_store(job.path)
            userdata = _jsonable(
                redact(stored, secret_field_names(plugin.get_dataset_form())),
                f'The userdata of plugin "{self.plugin_id}"',
            )
            total = sum(len(e) for e in entries.values())
            if total == 0:
                raise DatasetError(
                    f'Plugin "{self.plugin_id}" found no entries for any stage; check the folders or lists in the form.'
                )
            self.report = ErrorsReport(job.path / ERRORS_FILE, allowed_errors(self.max_errors, total), total)
            self.progress = ProgressReporter(
                job.path / PROGRESS_FILE, {s: len(e) for s, e in entries.items() if e}, self.callback
            )
            self.tmp.mkdir()
            t1 = time.perf_counter()
            self._encode_all(plugin, entries)
            encode_s = time.perf_counter() - t1
            written = sum(info["count"] for info in self.stage_info.values())
            if written == 0 or self.layout.layout is None:
                raise DatasetError(
                    f'Plugin "{self.plugin_id}": every entry failed to encode; '
                    f"see {job.path / ERRORS_FILE}. First error: {self.report.first}"
                )
            timing = {
                "itemize_s": round(itemize_s, 3),
                "encode_s": round(encode_s, 3),
                "total_s": round(time.perf_counter() - started, 3),
                "entries_per_s": round(total / encode_s, 1) if encode_s > 0 else None,
            }
            info = self._info(userdata, timing)
            self.report.close()
            final = publish(self.tmp, job.path, info)
            job.finish(
                JobStatus.DONE,
                dataset={
                    "stages": {s: v["count"] for s, v in info["stages"].items()},
                    "skipped": self.report.count,
                    "feature": info["feature"],
                    "label": info["label"],
                },
            )
            self.progress.finish(JobStatus.DONE.value)
        except BaseException as exc:
            self._abandon(exc)
            if isinstance(exc, (DigitsError, KeyboardInterrupt)):
                raise
            raise self._as_error(exc) from exc
        from ..plugins.registry import registry

        registry.call_hook("digits_dataset_created", dataset=Dataset(final, job_path=job.path))
        return job

    def _abandon(self, exc: BaseException) -> None:
        """Remove the build folder and record the job's end (Aborted or Error)."""
        if self.report is not None:
            self.report.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if isinstance(exc, KeyboardInterrupt):
            self._fail(JobStatus.ABORTED, str(exc) or "Interrupted by the user.")
        elif isinstance(exc, DigitsError):
            self._fail(JobStatus.ERROR, str(exc))
        else:
            self._fail(JobStatus.ERROR, str(self._as_error(exc)))

    def _as_error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, (DigitsError, KeyboardInterrupt)):
            return exc
        from ..faults import disk_error_message

        full = disk_error_message(exc, self.job.path.parent)
        if full is not None:
            return DatasetError(full)
        return DatasetError(f'Dataset job failed in plugin "{self.plugin_id}": {describe_exception(exc)}')

    def _fail(self, status: JobStatus, message: str) -> None:
        try:
            self.job.set_status(status, error=message)
            if self.progress is not None:
                self.progress.finish(status.value)
        except Exception:  # noqa: BLE001 - never hide the original error
            logger.exception("could not record the failure of job %s", self.job.id)

    # -- steps -----------------------------------------------------------------

    def _make_plugin(self):
        from ..plugins.registry import registry

        plugin_cls = registry.get_data_ingestion(self.plugin_id)
        try:
            from ..form_secrets import restore

            return plugin_cls(**restore(self.job.id, self.job.data.get("form_data", {})))
        except DigitsError:
            raise
        except Exception as exc:
            raise DatasetError(f'Plugin "{self.plugin_id}" failed to start: {describe_exception(exc)}') from exc

    def _itemize(self, plugin) -> dict[str, list]:
        entries = {}
        for stage in STAGES:
            try:
                items = plugin.itemize_entries(stage)
                entries[stage] = list(items) if items is not None else []
            except Exception as exc:
                raise DatasetError(
                    f'Plugin "{self.plugin_id}" failed to list the entries of stage "{stage}": '
                    f"{describe_exception(exc) if not isinstance(exc, DigitsError) else exc}"
                ) from exc
        return entries

    def _encode_all(self, plugin, entries: dict[str, list]) -> None:
        stages = [s for s in STAGES if entries[s]]
        if self.ray_address is not None:
            from ..executors.ray_encode import RayPool, ray_for_dataset_job

            pool = RayPool(ray_for_dataset_job(self.ray_address), plugin, self.plugin_id)
            self.workers = pool.cpus  # the cluster's CPUs: chunk sizes and dataset.json's "workers"
        else:
            pool = make_pool(plugin, self.workers, self.plugin_id)
        size = chunk_size(sum(len(entries[s]) for s in stages), self.workers)
        with pool:
            for stage in stages:
                encoder = StageEncoder(
                    stage,
                    entries[stage],
                    self.tmp / stage,
                    layout=self.layout,
                    report=self.report,
                    progress=self.progress,
                    mean_sums=self.mean_sums,
                    max_chunk=size,
                )
                self.stage_info[stage] = encoder.run(pool)
        if self.ray_address is not None:  # where the chunks ran, kept in job.json
            self.job.record_encoding(pool.placement())

    def _info(self, userdata: dict, timing: dict) -> dict:
        layout = self.layout.layout
        mean = write_mean(self.tmp, self.mean_sums.get(layout), self.stage_info.get("train", {}).get("count", 0))
        return dataset_info(
            job=self.job,
            plugin_id=self.plugin_id,
            plugin_version=self._plugin_version(),
            layout=layout,
            stage_info=self.stage_info,
            userdata=userdata,
            mean=mean,
            skipped=self.report.count,
            max_errors=self.max_errors,
            workers=self.workers,
            timing=timing,
        )

    def _plugin_version(self) -> str | None:
        from ..plugins.registry import registry

        for record in registry.records(check_templates=False):  # compiling templates is not needed here
            if record.kind == "data" and record.id == self.plugin_id:
                return record.version
        return None
