"""Loading a trained model for inference, once, behind a compiled function.

:func:`load_inference_model` returns an :class:`InferenceModel`: the Keras
snapshot of one epoch, the preprocessing the engine trained it with
(:class:`digits_core.engine.preprocessing.Preprocessing`: cast, mean
subtraction, scale, centre crop), the dataset's metadata, and one
``tf.function`` that runs *raw* features ``[N, H, W, C]`` (the dataset's
dtype) through that preprocessing and the network. The function has a
fixed input signature with a free batch dimension, so it is traced once.

Loaded models are kept in a process-wide LRU cache (size
``DIGITS_MODEL_CACHE_SIZE``, default 4) keyed by the model folder, the
epoch and the snapshot file's modification time, so the API and the web
server pay the load and the tracing once. :func:`clear_model_cache` empties
it.

TensorFlow is imported when a model is loaded, not when this module is.
Finding the model job, its ``model.json`` and the snapshot of an epoch is
:mod:`~digits_core.inference.snapshots`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferenceError
from ..interfaces.view import ViewContext
from ..jobs.record import DatasetRecord, ModelRecord
from .snapshots import (  # noqa: F401  (re-exported: part of this module's public names)
    MODEL_FILE,
    SNAPSHOT_DIR,
    SNAPSHOT_PATTERN,
    find_model_job,
    list_snapshots,
    read_model_info,
    resolve_epoch,
)
from .view_choice import BUNDLED_DEFAULT_VIEWS, default_view_for

CACHE_SIZE_ENV = "DIGITS_MODEL_CACHE_SIZE"
#: The bundled view per model task (the settings of :mod:`~digits_core.inference.view_choice` may name others).
DEFAULT_VIEWS = BUNDLED_DEFAULT_VIEWS


@dataclass
class DatasetMeta:
    """What inference and views need to know about the model's dataset.

    Built from the dataset job when it still exists, else from ``model.json``.

    Attributes:
        id: Dataset job id (or ``None``).
        plugin_id: Id of the data plugin that built it (or ``None``).
        userdata: The plugin's userdata (form values, ``class_labels``...).
        class_labels: Class names, index = class id (or ``None``).
        color_palette: ``[r, g, b]`` per class (or ``None``).
        feature_shape: Stored feature shape ``(H, W, C)``.
        feature_dtype: Stored feature dtype name.
        info: The dataset's ``dataset.json`` (empty when unavailable).
        available: Whether the dataset job could be opened.
    """

    id: str | None
    plugin_id: str | None
    userdata: dict
    class_labels: list | None
    color_palette: list | None
    feature_shape: tuple
    feature_dtype: str
    info: DatasetRecord = field(default_factory=lambda: DatasetRecord())
    available: bool = False
    dataset: Any = field(default=None, repr=False)

    @property
    def resize_mode(self) -> str:
        """The dataset's resize mode (``squash`` when it has none)."""
        return str(self.userdata.get("resize_mode") or "squash")

    def to_dict(self) -> dict:
        """JSON-friendly summary."""
        return {
            "id": self.id,
            "plugin_id": self.plugin_id,
            "class_labels": self.class_labels,
            "feature_shape": list(self.feature_shape),
            "feature_dtype": self.feature_dtype,
        }


def _dataset_id(info: ModelRecord) -> str | None:
    value = info.get("dataset_id") or info.get("dataset")
    if isinstance(value, dict):
        value = value.get("id")
    return str(value) if value else None


def dataset_meta(info: ModelRecord, preprocessing: Any, jobs_dir: Any = None) -> DatasetMeta:
    """Describe the model's dataset, from its job when it exists, else from ``model.json``."""
    dataset_id = _dataset_id(info)
    ds = None
    for reference in (dataset_id, info.get("dataset_path")):
        if ds is None and reference:
            from ..datasets.reader import open_dataset  # the reader alone: the package root reaches the executors
            from ..errors import DatasetError

            try:
                ds = open_dataset(reference, jobs_dir)
            except DatasetError:
                ds = None
    if ds is not None:
        return DatasetMeta(
            id=ds.id,
            plugin_id=ds.plugin_id,
            userdata=dict(ds.userdata),
            class_labels=ds.class_labels or info.get("class_labels"),
            color_palette=ds.color_palette,
            feature_shape=tuple(ds.feature_shape()),
            feature_dtype=ds.feature_dtype(),
            info=ds.info,
            available=True,
            dataset=ds,
        )
    return DatasetMeta(
        id=dataset_id,
        plugin_id=info.get("dataset_plugin") or info.get("plugin_id"),
        userdata={},
        class_labels=info.get("class_labels"),
        color_palette=info.get("color_palette"),
        feature_shape=tuple(preprocessing.feature_shape),
        feature_dtype=info.get("feature_dtype") or "uint8",
    )


def _load_keras_model(job: Any, epoch: int | float, path: Path) -> Any:
    """Load a snapshot through the engine (custom layers included)."""
    try:
        from ..engine import load_snapshot
    except ImportError:  # engine without load_snapshot: a snapshot is a full Keras model file
        import keras

        return keras.saving.load_model(path, compile=False)
    return load_snapshot(job, epoch=epoch)


def _load_preprocessing(job: Any, info: ModelRecord) -> Any:
    from ..engine.preprocessing import Preprocessing

    data = info.get("preprocessing")
    if not data:
        raise InferenceError(
            f'{Path(job.path) / MODEL_FILE} has no "preprocessing" entry; '
            "the model was trained by an older engine and cannot be used for inference."
        )
    return Preprocessing.from_dict(data, job.path)


class InferenceModel:
    """One epoch of a trained model, ready to run on raw features.

    Attributes:
        job: The model :class:`~digits_core.Job`.
        info: The parsed ``model.json``.
        epoch: The snapshot's epoch.
        snapshot: The snapshot file.
        model: The Keras model.
        preprocessing: The engine's :class:`Preprocessing` for this model.
        dataset: The :class:`DatasetMeta`.
        task: ``"classification"``, ``"segmentation"`` or ``"regression"``.
        class_labels: Class names (model's, else dataset's), or ``None``.
    """

    def __init__(
        self,
        job: Any,
        info: ModelRecord,
        epoch: int | float,
        snapshot: Path,
        model: Any,
        preprocessing: Any,
        dataset: DatasetMeta,
    ):
        import tensorflow as tf

        self.job = job
        self.info = info
        self.epoch = epoch
        self.snapshot = snapshot
        self.model = model
        self.preprocessing = preprocessing
        self.dataset = dataset
        self.task = str(
            info.get("task")
            or ("segmentation" if dataset.info.get("label", {}).get("kind") == "mask" else "classification")
        )
        self.class_labels = info.get("class_labels") or dataset.class_labels
        self.feature_shape = tuple(int(v) for v in preprocessing.feature_shape)
        self.feature_dtype = np.dtype(dataset.feature_dtype)
        spec = tf.TensorSpec([None, *self.feature_shape], tf.as_dtype(self.feature_dtype), name="images")
        self._function = tf.function(self.serve, input_signature=[spec], reduce_retracing=True)
        self._concrete: Any = None  # the traced graph, called directly (see predict)
        self._to_tensor = tf.constant

    @property
    def id(self) -> str:
        """The model job id."""
        return self.job.id

    def serve(self, images: Any) -> Any:
        """Raw features ``[N, H, W, C]`` → network output, as TensorFlow ops (preprocessing inside)."""
        from ..engine.preprocessing import tf_center_crop

        x = self.preprocessing.tf_normalize(images)
        x = tf_center_crop(x, self.preprocessing.crop_size)
        out = self.model(x, training=False)
        if self.task == "detection":  # decoded in the graph: [N, K, 6] (class, score, x1, y1, x2, y2)
            return detection_rows(out, x.shape[1:3], len(self.class_labels or []) or int(out.shape[-1]) - 4)
        return out

    def predict(self, features: np.ndarray, batch_size: int = 64) -> np.ndarray:
        """Run the compiled function on raw features, ``batch_size`` at a time.

        Args:
            features: ``[N, H, W, C]`` array (cast to the dataset's dtype if needed).
            batch_size: Largest batch per call.

        Returns:
            The network outputs as one numpy array ``[N, ...]``.
        """
        features = np.asarray(features)
        if features.ndim == 3:
            features = features[None]
        if features.shape[1:] != self.feature_shape:
            raise InferenceError(
                f"Inputs of shape {features.shape[1:]} do not match the model's dataset images {self.feature_shape}."
            )
        if features.dtype != self.feature_dtype:
            features = features.astype(self.feature_dtype)
        # The warm path does what a bare tf.function call does, minus its per-call dispatch: the one traced
        # graph is called directly on a tensor made here (handing numpy to a tf.function converts it in Python
        # on every call), one call per batch.
        call = self._concrete
        if call is None:
            call = self._concrete = self._function.get_concrete_function()
        to_tensor = self._to_tensor
        outputs = [
            call(to_tensor(features[start : start + batch_size])).numpy()
            for start in range(0, len(features), batch_size)
        ]
        if not outputs:
            return np.zeros((0,), np.float32)
        return outputs[0] if len(outputs) == 1 else np.concatenate(outputs)

    def network_input(self, feature: np.ndarray) -> np.ndarray:
        """Return the part of a raw feature the network sees (its centre crop), still raw."""
        crop = self.preprocessing.crop_size
        if not crop:
            return feature
        from ..engine.preprocessing import center_crop_offsets

        top, left = center_crop_offsets(feature.shape[0], feature.shape[1], crop)
        return feature[top : top + crop, left : left + crop]

    def crop_label(self, label: Any) -> Any:
        """Centre-crop a mask label like the input (other labels unchanged)."""
        if label is None or np.ndim(label) < 2:
            return label
        return self.preprocessing.crop_label(np.asarray(label))

    def run_network_inputs(self, batch: Any) -> np.ndarray:
        """The outputs for inputs shaped like a sample's ``input_data`` (the centre crop when the model crops).

        A cropped input is set in the middle of a stored-size array, so the compiled function's own
        centre crop takes exactly it back (mean subtraction is per pixel: the border never counts).
        """
        batch = np.asarray(batch)
        if batch.ndim == 3:
            batch = batch[None]
        crop = self.preprocessing.crop_size
        if crop and batch.shape[1:3] == (crop, crop) and batch.shape[1:] != self.feature_shape:
            from ..engine.preprocessing import center_crop_offsets  # the engine's module: TF-free, but not for listing

            height, width = self.feature_shape[0], self.feature_shape[1]
            top, left = center_crop_offsets(height, width, crop)
            full = np.zeros((len(batch), *self.feature_shape), self.feature_dtype)
            full[:, top : top + crop, left : left + crop] = batch
            batch = full
        return self.predict(batch)

    def view_context(self) -> Any:
        """The :class:`~digits_core.interfaces.view.ViewContext` a view of this model's results gets."""
        crop = self.preprocessing.crop_size
        shape = (crop, crop, self.feature_shape[2]) if crop else self.feature_shape
        return ViewContext(
            model_id=self.id,
            epoch=float(self.epoch),
            task=self.task,
            class_labels=list(self.class_labels) if self.class_labels else None,
            input_shape=tuple(shape),
            run=self.run_network_inputs,
        )

    def default_view(self) -> str | None:
        """The default view id for this model's task (:func:`~.view_choice.default_view_for`), or ``None``."""
        return default_view_for(self.task)

    def describe(self) -> dict:
        """JSON-friendly description (id, name, epoch, task, network, dataset)."""
        return {
            "id": self.job.id,
            "name": self.job.name,
            "epoch": self.epoch,
            "task": self.task,
            "network": self.info.get("network"),
            "class_labels": self.class_labels,
            "dataset": self.dataset.to_dict(),
        }


_cache: OrderedDict[tuple, InferenceModel] = OrderedDict()
_cache_lock = threading.Lock()
#: (model id as given, epoch, jobs_dir, $DIGITS_JOBS_DIR) -> (model, model.json path, its mtime)
_aliases: dict[tuple, tuple] = {}
_load_count = 0


def _cache_size() -> int:
    try:
        return max(0, int(os.environ.get(CACHE_SIZE_ENV, "4")))
    except ValueError:
        return 4


def load_inference_model(model_id: Any, *, epoch: int | float | None = None, jobs_dir: Any = None) -> InferenceModel:
    """Return the (cached) :class:`InferenceModel` of a model job's epoch.

    A cache hit costs one ``stat`` of ``model.json``: when the file changed
    (a new snapshot, a resumed run) the snapshot is resolved again.

    Args:
        model_id: Model job id, unique prefix, or job folder.
        epoch: Snapshot epoch; ``None`` takes the last one.
        jobs_dir: The jobs folder.

    Raises:
        JobNotFoundError: No such model.
        InferenceError: No snapshot (for that epoch), or no preprocessing saved.
    """
    alias = (
        str(model_id),
        None if epoch is None else float(epoch),
        str(jobs_dir) if jobs_dir else None,
        os.environ.get("DIGITS_JOBS_DIR"),
    )
    with _cache_lock:
        hit = _aliases.get(alias)
    if hit is not None:
        loaded, info_path, mtime = hit
        try:
            if info_path.stat().st_mtime_ns == mtime:
                return loaded
        except OSError:
            pass
    job = find_model_job(model_id, jobs_dir)
    info_path = Path(job.path) / MODEL_FILE
    mtime = info_path.stat().st_mtime_ns if info_path.is_file() else None
    info = read_model_info(job)
    epoch, snapshot = resolve_epoch(job, epoch, info)
    key = (str(Path(job.path).resolve()), epoch, snapshot.stat().st_mtime_ns)
    with _cache_lock:
        loaded = _cache.get(key)
        if loaded is not None:
            _cache.move_to_end(key)
    if loaded is None:
        preprocessing = _load_preprocessing(job, info)
        model = _load_keras_model(job, epoch, snapshot)
        loaded = InferenceModel(
            job, info, epoch, snapshot, model, preprocessing, dataset_meta(info, preprocessing, jobs_dir)
        )
        with _cache_lock:
            global _load_count
            _load_count += 1
            _cache[key] = loaded
            while len(_cache) > _cache_size():
                _cache.popitem(last=False)
    with _cache_lock:
        if key in _cache:
            _aliases[alias] = (loaded, info_path, mtime)
        for name in [a for a, (m, _, _) in _aliases.items() if not any(m is c for c in _cache.values())]:
            del _aliases[name]
    return loaded


def model_load_count() -> int:
    """How many models this process loaded from disk (cache misses) so far."""
    return _load_count


def clear_model_cache() -> None:
    """Forget every cached model (e.g. after deleting a job, or to free memory)."""
    with _cache_lock:
        _cache.clear()
        _aliases.clear()


def detection_rows(output_map: Any, input_hw: Any, num_classes: int) -> Any:
    """A detector's output map → ``[N, K, 6]`` ``(class, score, x1, y1, x2, y2)`` in network-input pixels."""
    import tensorflow as tf

    from ..engine.detection.decode import decode_detections

    boxes, scores, classes = decode_detections(output_map, input_hw, num_classes)
    return tf.concat([tf.cast(classes, tf.float32)[..., None], scores[..., None], boxes], axis=-1)
