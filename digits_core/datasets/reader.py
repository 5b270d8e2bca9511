"""Reading a published dataset: :func:`open_dataset` and :class:`Dataset`.

Reads are batched: a batch of records is fetched with one LMDB transaction
and one cursor walk, then unpacked into arrays by
:mod:`~digits_core.datasets.batches`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetError, JobNotFoundError
from ..interfaces import STAGES
from ..jobs.readers import UnreadableRecordError, read_json_object
from ..jobs.record import DatasetRecord
from .batches import PAD_CLASS, RecordLayout, pad_boxes, unpack_records  # noqa: F401  (pad_boxes re-exported)
from .storage import open_reader, read_keys, read_range, release_reader

#: The published dataset folder inside a dataset job folder.
DATASET_DIRNAME = "dataset"
INFO_FILE = "dataset.json"
MEAN_FILE = "mean.npy"
ERRORS_FILE = "errors.jsonl"
PROGRESS_FILE = "progress.json"


def _find_dataset_folder(job_id_or_path: str | os.PathLike, jobs_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    """Return ``(job_folder, dataset_folder)``."""
    text = str(job_id_or_path)
    candidate = Path(text).expanduser()
    if os.sep in text or "/" in text or candidate.is_dir():
        if (candidate / INFO_FILE).is_file():
            return candidate.parent, candidate
        if (candidate / DATASET_DIRNAME / INFO_FILE).is_file():
            return candidate, candidate / DATASET_DIRNAME
        if candidate.is_dir():
            raise DatasetError(
                f"{candidate} holds no published dataset (no {DATASET_DIRNAME}/{INFO_FILE}); "
                "the job may still be running, or it failed: see `digits dataset show`."
            )
        raise DatasetError(f"Dataset folder {candidate} does not exist.")
    from ..jobs import JobStore

    try:
        job = JobStore(jobs_dir).get(text, kind="dataset")
    except JobNotFoundError as exc:
        raise DatasetError(f"{exc} Run `digits dataset list` to see the datasets.") from exc
    folder = job.path / DATASET_DIRNAME
    if not (folder / INFO_FILE).is_file():
        detail = f" ({job.error})" if job.error else ""
        raise DatasetError(
            f'Dataset job "{job.id}" has no published dataset: its status is {job.status.value}{detail}.'
        )
    return job.path, folder


def read_errors_report(job_path: str | os.PathLike) -> list[dict]:
    """Return the entries a dataset job skipped (``{"stage", "entry", "error"}`` each), from ``errors.jsonl``."""
    path = Path(job_path) / ERRORS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def open_dataset(job_id_or_path: str | os.PathLike, jobs_dir: str | os.PathLike | None = None) -> Dataset:
    """Open a published dataset for reading.

    Args:
        job_id_or_path: A dataset job id (or unique prefix), a job folder,
            or the ``dataset`` folder inside it.
        jobs_dir: The jobs folder to look ids up in.

    Returns:
        The :class:`Dataset`.

    Raises:
        DatasetError: No such dataset, or it is not published (still
            running, failed or killed).
    """
    job_path, folder = _find_dataset_folder(job_id_or_path, jobs_dir)
    return Dataset(folder, job_path=job_path)


def resolve_job_files(userdata: dict, job_path: Path) -> dict:
    """``userdata`` with each ``{"job_file": NAME, ...}`` value's ``NAME`` made the file's path under ``job_path``.

    Only a bare file name is resolved (never a path out of the job folder);
    anything else is returned as it is.
    """

    def resolved(value: Any) -> Any:
        name = value.get("job_file") if isinstance(value, dict) else None
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            return value
        return {**value, "job_file": str(Path(job_path) / name)}

    return {key: resolved(value) for key, value in userdata.items()}


class Dataset:
    """A published dataset: metadata from ``dataset.json`` and batched record reads.

    Instances are cheap; LMDB environments open on first read (and reopen
    after a fork, so a dataset can be shared with worker processes).

    Args:
        path: The published dataset folder (``<job>/dataset``).
        job_path: The job folder (defaults to ``path``'s parent).

    Attributes:
        path: The dataset folder.
        job_path: The job folder (``job.json``, ``errors.jsonl``, ``progress.json``).
        info: The parsed ``dataset.json``.
    """

    def __init__(self, path: str | os.PathLike, *, job_path: str | os.PathLike | None = None):
        self.path = Path(path)
        self.job_path = Path(job_path) if job_path is not None else self.path.parent
        try:  # read as the job store reads its records: bounded, strict, never a crash (jobs.readers)
            self.info: DatasetRecord = read_json_object(self.path / INFO_FILE)  # type: ignore[assignment]
        except OSError as exc:
            raise DatasetError(f"Cannot read {self.path / INFO_FILE}: {exc.strerror or exc}") from exc
        except UnreadableRecordError as exc:
            raise DatasetError(str(exc)) from None
        self._envs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._mean: np.ndarray | None = None

    # -- metadata ------------------------------------------------------------

    @property
    def id(self) -> str:
        """The dataset job's id."""
        return self.info.get("id") or self.job_path.name

    @property
    def name(self) -> str:
        """The user's name for the dataset."""
        return self.info.get("name", "")

    @property
    def plugin_id(self) -> str:
        """Id of the data plugin that built the dataset."""
        return self.info["plugin_id"]

    @property
    def stages(self) -> list[str]:
        """The stages with at least one record, in ``train, val, test`` order."""
        st = self.info.get("stages", {})
        return [s for s in STAGES if st.get(s, {}).get("count", 0) > 0]

    def count(self, stage: str) -> int:
        """Number of records in ``stage`` (0 for a stage the dataset lacks)."""
        return int(self.info.get("stages", {}).get(stage, {}).get("count", 0))

    @property
    def userdata(self) -> dict:
        """The plugin's userdata (validated form values plus what itemizing added).

        A value naming a file of the dataset's job folder, ``{"job_file": NAME, ...}``
        (the DIGITS 6 adapter's pickled objects), comes back with ``job_file``
        the file's path under the job folder as it is now, so a jobs folder
        moved elsewhere keeps working.
        """
        return resolve_job_files(self.info.get("userdata", {}), self.job_path)

    @property
    def class_labels(self) -> list[str] | None:
        """Class names, index = class id, or ``None`` (regression).

        When the plugin gave none, classes are named by their index
        (``"0"``, ``"1"``, ...) up to the highest id seen.
        """
        return self.info.get("class_labels") or self.userdata.get("class_labels")

    @property
    def color_palette(self) -> list[list[int]] | None:
        """``[r, g, b]`` per class id, or ``None``."""
        return self.info.get("color_palette") or self.userdata.get("color_palette")

    @property
    def label_kind(self) -> str:
        """``"class"``, ``"regression"``, ``"mask"`` or ``"boxes"``."""
        return self.info["label"]["kind"]

    @property
    def label_dtype(self) -> str:
        """numpy dtype name of the labels (``int64`` for classes)."""
        return self.info["label"]["dtype"]

    @property
    def label_shape(self) -> tuple:
        """Shape of one label: ``()`` for classes and scalars, ``(K,)``, ``(H, W)``, or ``(None, 5)`` for boxes."""
        return tuple(self.info["label"]["shape"])

    def _stage_info(self, stage: str) -> dict:
        try:
            return self.info["stages"][stage]
        except KeyError:
            raise DatasetError(
                f'Dataset "{self.id}" has no stage "{stage}" (stages: {", ".join(self.stages)}).'
            ) from None

    def feature_shape(self, stage: str | None = None) -> tuple:
        """``(H, W, C)`` of the features (shared by every stage)."""
        if stage is not None:
            self._stage_info(stage)
        return tuple(self.info["feature"]["shape"])

    def feature_dtype(self, stage: str | None = None) -> str:
        """numpy dtype name of the features (uint8, uint16, int16 or float32)."""
        if stage is not None:
            self._stage_info(stage)
        return self.info["feature"]["dtype"]

    def feature_encodings(self, stage: str) -> dict[str, int]:
        """How many records of ``stage`` use each encoding (none, png, jpg, other)."""
        return dict(self._stage_info(stage).get("encodings", {}))

    @property
    def num_classes(self) -> int | None:
        """Number of classes: ``class_labels``' length, at least the highest class id seen + 1; ``None`` for regression."""
        labels = self.class_labels
        counted = self.info.get("num_classes")
        if counted is None and not labels:
            return None
        return max(counted or 0, len(labels or []))

    def label_histogram(self, stage: str) -> list[int] | None:
        """Records per class id (class labels) or pixels per class id (masks) in ``stage``."""
        return self._stage_info(stage).get("label_histogram")

    def mean(self) -> np.ndarray | None:
        """Return the float32 ``H×W×C`` mean image of the train stage, or ``None``."""
        if self._mean is None:
            mean_path = self.path / MEAN_FILE
            if not mean_path.is_file():
                return None
            self._mean = np.load(mean_path)
        return self._mean.copy()

    def errors(self) -> list[dict]:
        """Return the skipped entries recorded while building (``stage``, ``entry``, ``error``)."""
        return read_errors_report(self.job_path)

    # -- records -------------------------------------------------------------

    def _env(self, stage: str) -> Any:
        if self._pid != os.getpid():  # forked: LMDB handles must not cross a fork
            self._envs = {}
            self._pid = os.getpid()
        env = self._envs.get(stage)
        if env is None:
            with self._lock:  # tf.data may read from several threads
                env = self._envs.get(stage)
                if env is None:
                    env = open_reader(self._env_path(stage))
                    self._envs[stage] = env
        return env

    def _env_path(self, stage: str) -> Path:
        return self.path / self._stage_info(stage).get("lmdb", stage)

    def read_records(self, stage: str, start: int, stop: int | None) -> list[bytes]:
        """Return the raw record bytes ``start..stop-1`` of ``stage`` (one transaction)."""
        start, stop = self._clip(stage, start, stop)
        return read_range(self._env(stage), start, stop)

    def _clip(self, stage: str, start: int, stop: int | None) -> tuple[int, int]:
        n = self.count(stage)
        self._stage_info(stage)
        stop = n if stop is None else min(int(stop), n)
        start = max(0, int(start))
        return start, max(start, stop)

    def read_batch(
        self, stage: str, start: int = 0, stop: int | None = None, *, decode: bool = True
    ) -> tuple[Any, np.ndarray]:
        """Read records ``start..stop-1`` of ``stage`` in one LMDB transaction.

        Args:
            stage: ``"train"``, ``"val"`` or ``"test"``.
            start: First record index.
            stop: One past the last index (clipped to the stage's count; ``None``: the end).
            decode: Decode encoded images (default). With False, encoded
                features come back as a list of ``bytes`` (raw ones as arrays).

        Returns:
            ``(features, labels)``: features ``[N, H, W, C]`` of
            :meth:`feature_dtype`; labels ``[N]`` int64 (class), ``[N]`` or
            ``[N, K]`` float (regression), ``[N, H, W]`` (mask), or float32
            ``[N, M, 5]`` boxes padded to the batch's largest count ``M``
            with rows of ``-1`` (boxes; see :func:`pad_boxes`).
        """
        values = self.read_records(stage, start, stop)
        return self._unpack(values, decode)

    def read_indexes(self, stage: str, indexes: Sequence[int], *, decode: bool = True) -> tuple[Any, np.ndarray]:
        """Like :meth:`read_batch` for arbitrary record indexes (e.g. a shuffled batch)."""
        n = self.count(stage)
        bad = [i for i in indexes if not 0 <= int(i) < n]
        if bad:
            raise DatasetError(f'Record index {bad[0]} is out of range for stage "{stage}" ({n} records).')
        values = read_keys(self._env(stage), indexes)
        return self._unpack(values, decode)

    def read_all(self, stage: str, *, decode: bool = True) -> tuple[Any, np.ndarray]:
        """Read a whole stage into memory: ``read_batch(stage, 0, count)``."""
        return self.read_batch(stage, 0, None, decode=decode)

    def iter_batches(self, stage: str, batch_size: int, *, decode: bool = True) -> Iterator[tuple]:
        """Yield ``(features, labels)`` batches of ``batch_size`` records in order (the last may be smaller)."""
        if batch_size < 1:
            raise DatasetError(f"batch_size must be at least 1, not {batch_size}")
        n = self.count(stage)
        for start in range(0, n, batch_size):
            yield self.read_batch(stage, start, start + batch_size, decode=decode)

    def _unpack(self, values: list[bytes], decode: bool) -> tuple[Any, np.ndarray]:
        return unpack_records(values, self.batch_layout(), decode=decode)

    def batch_layout(self) -> RecordLayout:
        """How this dataset's records unpack into batches (shapes, dtypes, label kind)."""
        return RecordLayout(
            self.id,
            tuple(self.feature_shape()),
            self.feature_dtype(),
            self.label_kind,
            self.label_dtype,
            tuple(self.label_shape),
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_envs"], state["_lock"] = {}, None  # reopened after unpickling
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def close(self) -> None:
        """Release this object's LMDB environments (closed when no other reader in the process uses them).

        Reading again reopens them. Call it (or use ``with open_dataset(...) as ds:``) in
        long-running processes, e.g. before deleting a dataset's files.
        """
        if self._pid == os.getpid():
            for stage in list(self._envs):
                release_reader(self._env_path(stage))
        self._envs = {}

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def summary(self) -> dict:
        """Return a JSON-friendly summary (what ``digits dataset show --json`` prints)."""
        return {
            "id": self.id,
            "name": self.name,
            "path": str(self.path),
            "plugin_id": self.plugin_id,
            "stages": {s: self.count(s) for s in self.stages},
            "feature": self.info.get("feature"),
            "label": self.info.get("label"),
            "class_labels": self.class_labels,
            "num_classes": self.num_classes,
            "label_histograms": {s: self.label_histogram(s) for s in self.stages},
            "color_palette": self.color_palette,
            "mean": self.info.get("mean"),
            "errors": self.info.get("errors"),
            "timing": self.info.get("timing"),
        }

    def __repr__(self) -> str:
        counts = ", ".join(f"{s}={self.count(s)}" for s in self.stages)
        return f"<Dataset {self.id} {self.plugin_id} {counts}>"
