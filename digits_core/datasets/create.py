"""Creating a dataset from any data plugin: the one path behind the API, CLI and web UI.

:func:`create_dataset` validates the plugin's form, creates a dataset job,
itemizes the entries in this process, encodes them in a pool of worker
processes (chunks of entries go out, packed record bytes come back), writes
them in a stable order to one LMDB environment per stage, computes the
float32 mean image, writes ``dataset.json`` and publishes the dataset with
one rename. See ``docs/formats.md`` for the on-disk format.

Worker processes are forked when TensorFlow is not loaded in this process
(cheap, nothing to pickle); otherwise they come from a ``forkserver``
(forking a process that runs TensorFlow threads is unsafe), which pickles
the plugin instance once per worker.
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import secrets
import shutil
import signal
import sys
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from ..errors import DatasetError, DigitsError
from ..interfaces import STAGES
from ..jobs import Job, JobStatus, write_json_atomic
from . import records as rec
from .progress import ProgressReporter
from .reader import DATASET_DIRNAME, ERRORS_FILE, INFO_FILE, MEAN_FILE, PROGRESS_FILE, Dataset
from .storage import StageWriter

logger = logging.getLogger("digits_core.datasets")

#: Default ``max_errors``: the fraction of entries that may be skipped.
DEFAULT_MAX_ERRORS = 0.05
#: Largest chunk of entries sent to a worker at once.
MAX_CHUNK = 512
#: At most this many images without decoded pixels (pass-through bytes) are decoded for the mean.
MEAN_SAMPLE_LIMIT = 128
#: A write transaction is committed once it holds this many records or TXN_BYTES (a chunk is never split).
RECORDS_PER_TXN = 1000
TXN_BYTES = 32 << 20
#: Entries in the first chunks of a stage, before record sizes are known.
FIRST_CHUNK = 64
#: Later chunks hold about this many bytes of records (between MIN_CHUNK and MAX_CHUNK entries).
CHUNK_BYTES = 8 << 20
MIN_CHUNK = 4
#: Prefix of the hidden folder a dataset is built in, inside the job folder.
BUILD_PREFIX = ".building-"

FORMAT_NAME = "digits-lmdb"
FORMAT_VERSION = 1


# -- worker side ---------------------------------------------------------------

_WORKER_PLUGIN = None


def _init_worker(plugin) -> None:
    """Pool initializer: keep the plugin instance; leave Ctrl-C to the parent."""
    global _WORKER_PLUGIN
    _WORKER_PLUGIN = plugin
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (in-process use)
        pass


def _describe_exception(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _encode_chunk(start: int, entries: list, mean_every: int) -> tuple[list, dict]:
    """Encode ``entries`` (global indexes from ``start``) with the worker's plugin.

    Returns:
        ``(outcomes, sums)``: one outcome per entry, ``(records, metas, None,
        label histogram)`` or ``(None, None, error message, None)``; ``sums``
        maps a record layout to ``[float64 sum of pixels, count]`` for the
        mean image (empty when ``mean_every`` is 0).
    """
    plugin = _WORKER_PLUGIN
    outcomes = []
    sums: dict[tuple, list] = {}
    interned: dict = {}  # equal metas become one object: pickled once per chunk
    for offset, entry in enumerate(entries):
        try:
            result = plugin.encode_entry(entry)
            pairs = result if isinstance(result, list) else [result]
            if not pairs:
                raise rec.RecordError("encode_entry returned an empty list")
            packed, metas, hist = [], [], None
            for pair in pairs:
                if not isinstance(pair, tuple) or len(pair) != 2:
                    raise rec.RecordError(f"encode_entry must return (feature, label) or a list of them, "
                                          f"got {type(pair).__name__}")
                data, meta, pixels = rec.pack_record(*pair)
                meta = interned.setdefault(meta, meta)
                if mean_every and (pixels is not None or (start + offset) % mean_every == 0):
                    if pixels is None:
                        feature = pair[0]
                        pixels = rec.decode_image_bytes(feature.data, meta.feature_shape, meta.feature_dtype)
                    layout = meta.layout
                    slot = sums.get(layout)
                    if slot is None and len(sums) < 4:
                        slot = sums[layout] = [np.zeros(meta.feature_shape, np.float64), 0, [], 0]
                    if slot is not None:
                        _add_to_mean(slot, pixels.reshape(meta.feature_shape))
                packed.append(data)
                metas.append(meta)
                if meta.label_kind == rec.CLASS:  # class ids are counted in the parent, per chunk
                    hist = (hist or []) + [int(pair[1])]
                else:
                    hist = rec.add_histograms(hist, rec.label_histogram(pair[1], meta.label_kind))
            outcomes.append((packed, metas, None, hist))
        except Exception as exc:  # noqa: BLE001 - a bad entry is skipped and reported
            outcomes.append((None, None, _describe_exception(exc), None))
    for slot in sums.values():
        _flush_mean(slot)
    sums_out = {layout: slot[:2] for layout, slot in sums.items()}
    if len(interned) == 1 and all(o[2] is None for o in outcomes):
        # The usual case, sent compactly so the parent does no per-record Python work: every
        # entry encoded, all records share one meta.
        (meta,) = interned
        records = [r for o in outcomes for r in o[0]]
        per_entry = [len(o[0]) for o in outcomes]
        if meta.label_kind == rec.CLASS:
            labels = np.fromiter((c for o in outcomes for c in o[3]), dtype=np.int64, count=len(records))
            hist = np.bincount(labels) if len(labels) and labels.max() < rec.MAX_HISTOGRAM_CLASSES else None
        else:
            hist = None
            for o in outcomes:
                hist = rec.add_histograms(hist, o[3])
        return _Uniform(meta, records, per_entry, hist), sums_out
    return outcomes, sums_out


def _expand(chunk: "_Uniform") -> list:
    """Turn a compact chunk back into per-entry outcomes (records, metas, error, histogram)."""
    outcomes, i = [], 0
    for n in chunk.per_entry:
        outcomes.append((chunk.records[i:i + n], [chunk.meta] * n, None, None))
        i += n
    return outcomes


class _Uniform(NamedTuple):
    """A chunk whose entries all encoded, to records sharing one meta."""

    meta: Any
    records: list
    per_entry: list  # records per entry (usually all 1)
    histogram: Any  # class or mask histogram of the chunk, or None


#: Pixels of this many bytes are summed at once for the mean (one numpy call instead of one per image).
_MEAN_BATCH_BYTES = 4 << 20


def _add_to_mean(slot: list, pixels: np.ndarray) -> None:
    """Queue ``pixels`` for the running sum ``slot`` = [sum, count, pending arrays, pending bytes]."""
    slot[2].append(pixels)
    slot[3] += pixels.nbytes
    if slot[3] >= _MEAN_BATCH_BYTES:
        _flush_mean(slot)


def _flush_mean(slot: list) -> None:
    pending = slot[2]
    if pending:
        slot[0] += np.sum(np.stack(pending), axis=0, dtype=np.float64)
        slot[1] += len(pending)
        slot[2] = []
        slot[3] = 0


# -- options -------------------------------------------------------------------

def parse_max_errors(value: Any) -> float | int:
    """Normalise a ``max_errors`` setting.

    Accepts ``None`` (default 5 %), an int >= 0 or a string of one (a count
    of entries), a float in ``[0, 1)`` or a string like ``"0.1"`` /
    ``"10%"`` (a fraction of all entries).

    Raises:
        DatasetError: The value is none of these.
    """
    if value is None:
        return DEFAULT_MAX_ERRORS
    original = value
    try:
        if isinstance(value, str):
            text = value.strip()
            if text.endswith("%"):
                value = float(text[:-1]) / 100.0
            elif text.isdigit():
                value = int(text)
            else:
                value = float(text)
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            if value < 0:
                raise ValueError
            return value
        value = float(value)
        if value.is_integer() and value >= 1:
            return int(value)
        if not 0 <= value < 1:
            raise ValueError
        return value
    except ValueError:
        raise DatasetError(f'max_errors "{original}" is not a count (e.g. 10), a fraction (e.g. 0.05) '
                           "or a percentage (e.g. 5%).") from None


def allowed_errors(max_errors: float | int, total: int) -> int:
    """Return how many of ``total`` entries may be skipped under ``max_errors``."""
    if isinstance(max_errors, int):
        return max_errors
    return int(math.floor(max_errors * total))


def resolve_workers(workers: int | None) -> int:
    """Return the worker count: ``workers`` or the number of CPUs this process may use."""
    if workers is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)
    workers = int(workers)
    if workers < 1:
        raise DatasetError(f"workers must be at least 1, not {workers}")
    return workers


def chunk_size(total: int, workers: int) -> int:
    """Entries per task: large enough that inter-process traffic does not dominate."""
    return max(1, min(MAX_CHUNK, math.ceil(total / (workers * 4))))


def _mp_context():
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and "tensorflow" not in sys.modules:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def _jsonable(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"{what} is not JSON-serializable: {exc}") from exc


def _describe_layout(layout: tuple) -> str:
    fdtype, fshape, kind, ldtype, lshape = layout
    return f"feature {fdtype} {tuple(fshape)}, label {rec.LABEL_KINDS[kind]} {ldtype} {tuple(lshape)}"


# -- the job -------------------------------------------------------------------

def create_dataset_job(plugin_id: str, form_data: Mapping[str, Any] | None = None, *, name: str | None = None,
                       jobs_dir: str | os.PathLike | None = None, max_errors: Any = None,
                       workers: int | None = None) -> Job:
    """Validate the form and create a dataset job (status Initialized) without running it.

    The web UI uses this to queue a job; :func:`run_dataset_job` builds it.

    Raises:
        PluginNotFoundError: No data plugin ``plugin_id``.
        FormValidationError: A form value is invalid (the error names the field).
        DatasetError: ``max_errors`` or ``workers`` is invalid.
    """
    from ..forms import validate_values
    from ..plugin_registry import registry

    plugin_cls = registry.get_data_ingestion(plugin_id)
    values = validate_values(plugin_cls.get_dataset_form(), form_data or {},
                             form_name=f'dataset form of plugin "{plugin_id}"')
    limit = parse_max_errors(max_errors)
    if workers is not None:
        resolve_workers(workers)
    from ..form_secrets import redact, secret_field_names, stash

    secret = secret_field_names(plugin_cls.get_dataset_form())  # PasswordField values never reach disk
    job = Job.create(
        "dataset", name or plugin_id, jobs_dir=jobs_dir, plugin_id=plugin_id,
        form_data=json.loads(json.dumps(redact(values, secret), default=str)), max_errors=limit, workers=workers,
    )
    stash(job.id, values, secret)
    return job


def create_dataset(plugin_id: str, form_data: Mapping[str, Any] | None = None, *, name: str | None = None,
                   workers: int | None = None, jobs_dir: str | os.PathLike | None = None,
                   max_errors: Any = None, progress: Callable[[dict], None] | None = None) -> Job:
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

    Returns:
        The dataset :class:`~digits_core.Job`, status Done; open it with
        :func:`~digits_core.datasets.open_dataset`.

    Raises:
        PluginNotFoundError: No data plugin ``plugin_id``.
        FormValidationError: A form value is invalid (before any work starts).
        DatasetError: The plugin failed to itemize, too many entries failed,
            or nothing could be encoded. The job is left with status Error
            and no published dataset.
    """
    job = create_dataset_job(plugin_id, form_data, name=name, jobs_dir=jobs_dir, max_errors=max_errors,
                             workers=workers)
    return run_dataset_job(job, workers=workers, progress=progress)


def run_dataset_job(job: Job, *, workers: int | None = None, progress: Callable[[dict], None] | None = None) -> Job:
    """Build the dataset of a job made by :func:`create_dataset_job` and publish it.

    Raises:
        DatasetError: As :func:`create_dataset`; the job ends in status Error.
    """
    return _Builder(job, workers=workers if workers is not None else job.data.get("workers"),
                    progress=progress).run()


class _Builder:
    """Runs one dataset job; see :func:`create_dataset`."""

    def __init__(self, job: Job, *, workers: int | None, progress):
        self.job = job
        self.plugin_id = job.data["plugin_id"]
        self.workers = resolve_workers(workers)
        self.max_errors = parse_max_errors(job.data.get("max_errors"))
        self.callback = progress
        self.tmp = job.path / f"{BUILD_PREFIX}{secrets.token_hex(4)}"
        self.layout: tuple | None = None
        self.errors = 0
        self.allowed = 0
        self.error_lines: list[str] = []
        self.errors_file = None
        self.stage_info: dict[str, dict] = {}
        self.mean_sums: dict[tuple, list] = {}
        self.progress: ProgressReporter | None = None

    # -- top level -------------------------------------------------------------

    def run(self) -> Job:
        job = self.job
        job.data["pid"] = os.getpid()
        job.set_status(JobStatus.RUNNING)
        started = time.perf_counter()
        try:
            plugin = self._make_plugin()
            t0 = time.perf_counter()
            entries = self._itemize(plugin)
            itemize_s = time.perf_counter() - t0
            from ..form_secrets import redact, secret_field_names

            userdata = _jsonable(redact(plugin.userdata, secret_field_names(plugin.get_dataset_form())),
                                 f'The userdata of plugin "{self.plugin_id}"')
            total = sum(len(e) for e in entries.values())
            if total == 0:
                raise DatasetError(f'Plugin "{self.plugin_id}" found no entries for any stage; '
                                   "check the folders or lists in the form.")
            self.allowed = allowed_errors(self.max_errors, total)
            self.progress = ProgressReporter(job.path / PROGRESS_FILE, {s: len(e) for s, e in entries.items() if e},
                                             self.callback)
            self.tmp.mkdir()
            t1 = time.perf_counter()
            self._encode_all(plugin, entries)
            encode_s = time.perf_counter() - t1
            written = sum(info["count"] for info in self.stage_info.values())
            if written == 0:
                raise DatasetError(f'Plugin "{self.plugin_id}": every entry failed to encode; '
                                   f"see {job.path / ERRORS_FILE}. First error: {self._first_error()}")
            info = self._write_metadata(userdata, entries, itemize_s, encode_s, started, written)
            self._close_errors()
            final = job.path / DATASET_DIRNAME
            if final.exists():
                raise DatasetError(f"{final} already exists; a job publishes its dataset only once.")
            os.rename(self.tmp, final)
            job.data["dataset"] = {"stages": {s: v["count"] for s, v in info["stages"].items()},
                                   "skipped": self.errors, "feature": info["feature"], "label": info["label"]}
            job.set_status(JobStatus.DONE)
            self.progress.finish(JobStatus.DONE.value)
        except BaseException as exc:
            self._close_errors()
            shutil.rmtree(self.tmp, ignore_errors=True)
            if isinstance(exc, KeyboardInterrupt):
                self._fail(JobStatus.ABORTED, "Interrupted by the user.")
                raise
            if isinstance(exc, DigitsError):
                self._fail(JobStatus.ERROR, str(exc))
                raise
            message = f'Dataset job failed in plugin "{self.plugin_id}": {_describe_exception(exc)}'
            self._fail(JobStatus.ERROR, message)
            raise DatasetError(message) from exc
        from ..plugin_registry import registry

        registry.call_hook("digits_dataset_created", dataset=Dataset(final, job_path=job.path))
        return job

    def _fail(self, status: JobStatus, message: str) -> None:
        try:
            self.job.set_status(status, error=message)
            if self.progress is not None:
                self.progress.finish(status.value)
        except Exception:  # noqa: BLE001 - never hide the original error
            logger.exception("could not record the failure of job %s", self.job.id)

    # -- steps -----------------------------------------------------------------

    def _make_plugin(self):
        from ..plugin_registry import registry

        plugin_cls = registry.get_data_ingestion(self.plugin_id)
        try:
            from ..form_secrets import restore

            return plugin_cls(**restore(self.job.id, self.job.data.get("form_data", {})))
        except DigitsError:
            raise
        except Exception as exc:
            raise DatasetError(f'Plugin "{self.plugin_id}" failed to start: {_describe_exception(exc)}') from exc

    def _itemize(self, plugin) -> dict[str, list]:
        entries = {}
        for stage in STAGES:
            try:
                items = plugin.itemize_entries(stage)
                entries[stage] = list(items) if items is not None else []
            except Exception as exc:
                raise DatasetError(f'Plugin "{self.plugin_id}" failed to list the entries of stage "{stage}": '
                                   f"{_describe_exception(exc) if not isinstance(exc, DigitsError) else exc}") from exc
        return entries

    def _encode_all(self, plugin, entries: dict[str, list]) -> None:
        stages = [s for s in STAGES if entries[s]]
        total = sum(len(entries[s]) for s in stages)
        size = chunk_size(total, self.workers)
        if self.workers == 1:
            _init_worker(plugin)
            try:
                for stage in stages:
                    self._encode_stage(stage, entries[stage], size, None)
            finally:
                _init_worker(None)
            return
        ctx = _mp_context()
        executor = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_init_worker,
                                       initargs=(plugin,))
        try:
            for stage in stages:
                self._encode_stage(stage, entries[stage], size, executor)
        except BaseException:
            for proc in list(getattr(executor, "_processes", {}).values()):
                proc.terminate()
            executor.shutdown(wait=True, cancel_futures=True)
            raise
        executor.shutdown(wait=True)

    def _encode_stage(self, stage: str, items: list, size: int, executor) -> None:
        t0 = time.perf_counter()
        writer = StageWriter(self.tmp / stage)
        n = len(items)
        mean_every = 0
        if stage == "train":
            mean_every = max(1, math.ceil(n / MEAN_SAMPLE_LIMIT))
        counts = {"encodings": {}, "skipped": 0}
        pending_records: list[bytes] = []
        pending_bytes = [0]
        # Chunks start small; once record sizes are known they hold about CHUNK_BYTES of records
        # (at most `size` entries), so big images never pile up in the pipes or in memory.
        chunking = {"next": 0, "size": min(size, FIRST_CHUNK), "max": size, "bytes": 0, "entries": 0}

        def next_chunk() -> tuple[int, int] | None:
            start = chunking["next"]
            if start >= n:
                return None
            if chunking["entries"]:
                per_entry = max(1.0, chunking["bytes"] / chunking["entries"])
                chunking["size"] = int(min(chunking["max"], max(MIN_CHUNK, CHUNK_BYTES // per_entry)))
            stop = min(n, start + chunking["size"])
            chunking["next"] = stop
            return start, stop
        histogram: list = [None]
        last_ok: list = [None]  # the last meta object that matched the layout (identity fast path)

        def handle(start: int, result) -> None:
            outcomes, sums = result
            if isinstance(outcomes, _Uniform):
                layout = outcomes.meta.layout
                if self.layout is None:
                    self.layout = layout
                if layout == self.layout:
                    finish(outcomes.records, len(outcomes.per_entry), 0, sums, outcomes.histogram, None,
                           {rec.ENCODINGS[outcomes.meta.encoding]: len(outcomes.records)})
                    return
                outcomes = _expand(outcomes)  # every entry of the chunk has the wrong layout
            good: list[bytes] = []
            errors = 0
            class_ids: list[int] = []
            encodings: dict[str, int] = {}
            for offset, (packed, metas, error, hist) in enumerate(outcomes):
                if error is None:
                    for meta in metas:
                        if meta is last_ok[0]:
                            continue
                        if self.layout is None:
                            self.layout = meta.layout
                        if meta.layout == self.layout:
                            last_ok[0] = meta
                        else:
                            error = (f"record layout ({_describe_layout(meta.layout)}) differs from the dataset's "
                                     f"({_describe_layout(self.layout)})")
                            break
                if error is not None:
                    errors += 1
                    self._record_error(stage, items[start + offset], error)
                    continue
                good.extend(packed)
                if isinstance(hist, list):
                    class_ids.extend(hist)
                elif hist is not None:
                    histogram[0] = rec.add_histograms(histogram[0], hist)
                for meta in metas:
                    name = rec.ENCODINGS[meta.encoding]
                    encodings[name] = encodings.get(name, 0) + 1
            finish(good, len(outcomes), errors, sums, None, class_ids, encodings)

        def finish(good: list, entries: int, errors: int, sums: dict, hist, class_ids, encodings: dict) -> None:
            """Account for a chunk's written records and skipped entries, then write and report."""
            histogram[0] = rec.add_histograms(histogram[0], hist)
            for name, number in encodings.items():
                counts["encodings"][name] = counts["encodings"].get(name, 0) + number
            for layout, (total_sum, count) in sums.items():
                slot = self.mean_sums.get(layout)
                if slot is None:
                    self.mean_sums[layout] = [total_sum, count]
                else:
                    slot[0] += total_sum
                    slot[1] += count
            if class_ids:
                ids = np.asarray(class_ids, dtype=np.int64)
                if ids.max() < rec.MAX_HISTOGRAM_CLASSES:
                    histogram[0] = rec.add_histograms(histogram[0], np.bincount(ids))
            pending_records.extend(good)
            chunk_bytes = sum(map(len, good))
            pending_bytes[0] += chunk_bytes
            chunking["bytes"] += chunk_bytes
            chunking["entries"] += entries
            if len(pending_records) >= RECORDS_PER_TXN or pending_bytes[0] >= TXN_BYTES:
                writer.append(pending_records)
                pending_records.clear()
                pending_bytes[0] = 0
            counts["skipped"] += errors
            self.progress.update(stage, entries, errors)
            if self.errors > self.allowed:
                raise DatasetError(
                    f"{self.errors} entries failed, more than max-errors allows ({self.allowed} of "
                    f"{self.progress.total}); no dataset was published. See {self.job.path / ERRORS_FILE}; "
                    f"first error: {self._first_error()}"
                )

        try:
            self.progress.update(stage, 0, 0, force=True)
            if executor is None:
                while (chunk := next_chunk()) is not None:
                    start, stop = chunk
                    handle(start, _encode_chunk(start, items[start:stop], mean_every))
            else:
                window: deque = deque()  # futures in submission (= record) order
                limit = self.workers * 2 + 1

                def submit() -> None:
                    chunk = next_chunk()
                    if chunk is not None:
                        start, stop = chunk
                        window.append((start, executor.submit(_encode_chunk, start, items[start:stop], mean_every)))

                for _ in range(limit):
                    submit()
                while window:
                    start, future = window.popleft()
                    try:
                        result = future.result()
                    except BrokenProcessPool as exc:
                        raise DatasetError(f'A worker process of plugin "{self.plugin_id}" died while encoding '
                                           f'stage "{stage}" (out of memory or a crash in native code).') from exc
                    handle(start, result)
                    submit()
            writer.append(pending_records)
            pending_records.clear()
            count = writer.count
        finally:
            writer.close()
        self.stage_info[stage] = {
            "count": count,
            "entries": n,
            "skipped": counts["skipped"],
            "encodings": counts["encodings"],
            "label_histogram": None if histogram[0] is None else histogram[0].tolist(),
            "lmdb": stage,
            "map_grows": writer.map_grows,
            "encode_s": round(time.perf_counter() - t0, 3),
        }

    def _record_error(self, stage: str, entry, error: str) -> None:
        self.errors += 1
        line = json.dumps({"stage": stage, "entry": str(entry), "error": error})
        if len(self.error_lines) < 5:
            self.error_lines.append(f"{entry}: {error}")
        if self.errors_file is None:
            self.errors_file = open(self.job.path / ERRORS_FILE, "w", encoding="utf-8")
        self.errors_file.write(line + "\n")

    def _first_error(self) -> str:
        return self.error_lines[0] if self.error_lines else "none"

    def _close_errors(self) -> None:
        if self.errors_file is not None:
            self.errors_file.close()
            self.errors_file = None

    def _write_metadata(self, userdata: dict, entries: dict, itemize_s: float, encode_s: float,
                        started: float, written: int) -> dict:
        fdtype, fshape, kind, ldtype, lshape = self.layout
        mean_info = None
        slot = self.mean_sums.get(self.layout)
        if slot is not None and slot[1] > 0:
            mean = (slot[0] / slot[1]).astype(np.float32)
            np.save(self.tmp / MEAN_FILE, mean)
            train_count = self.stage_info.get("train", {}).get("count", 0)
            mean_info = {"file": MEAN_FILE, "images": int(slot[1]), "stage": "train",
                         "exact": int(slot[1]) == train_count}
        total_s = time.perf_counter() - started
        job = self.job
        class_labels = userdata.get("class_labels")
        num_classes = None
        if rec.LABEL_KINDS[kind] in ("class", "mask"):
            seen = max((len(i["label_histogram"] or []) for i in self.stage_info.values()), default=0)
            num_classes = max(seen, len(class_labels or []))
            if not class_labels and num_classes:
                class_labels = [str(i) for i in range(num_classes)]
        info = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "id": job.id,
            "name": job.name,
            "plugin_id": self.plugin_id,
            "plugin_version": self._plugin_version(),
            "created": time.time(),
            "feature": {"shape": list(fshape), "dtype": fdtype, "layout": "HWC"},
            "label": {"kind": rec.LABEL_KINDS[kind], "dtype": ldtype, "shape": list(lshape)},
            "stages": {s: self.stage_info[s] for s in STAGES if s in self.stage_info},
            "userdata": userdata,
            "class_labels": class_labels,
            "num_classes": num_classes,
            "color_palette": userdata.get("color_palette"),
            "mean": mean_info,
            "errors": {"skipped": self.errors, "max_errors": self.max_errors, "report": f"../{ERRORS_FILE}"
                       if self.errors else None},
            "workers": self.workers,
            "timing": {"itemize_s": round(itemize_s, 3), "encode_s": round(encode_s, 3),
                       "total_s": round(total_s, 3),
                       "entries_per_s": round(sum(len(e) for e in entries.values()) / encode_s, 1)
                       if encode_s > 0 else None},
        }
        write_json_atomic(self.tmp / INFO_FILE, info)
        return info

    def _plugin_version(self) -> str | None:
        from ..plugin_registry import registry

        for record in registry.records():
            if record.kind == "data" and record.id == self.plugin_id:
                return record.version
        return None
