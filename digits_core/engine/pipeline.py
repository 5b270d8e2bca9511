"""The tf.data input pipeline over a dataset reader.

Two sources, one pipeline:

* **preload** (default when the stage fits in ``preload_limit_mb``): the
  whole stage is read with one batched LMDB read (``read_all``), kept as
  tensors, and each batch is a ``tf.gather`` of shuffled indexes;
* **stream**: each batch is one ``read_indexes`` call (one LMDB transaction
  for a batch of keys) from a Python generator, handed to tf.data.

Encoded stages (PNG, JPEG or pass-through file bytes) are read as batches
of encoded bytes (``decode=False``) and decoded inside tf.data with
``tf.io.decode_png`` / ``decode_jpeg`` / ``decode_image`` in parallel
``map`` stages (:func:`make_decoder`), never with Pillow one record at a
time: a preloaded stage is decoded once, when it is loaded, by a parallel
tf.data pass (then batches are gathers as for raw data); a streamed stage
is decoded per batch in the training/validation pipeline. 16-bit PNGs
decode to uint16, and the channel count comes from the dataset's feature
shape. Raw stages keep the ``frombuffer`` fast path. A stage that mixes
raw and encoded records, or an encoded stage of a dtype other than uint8
or uint16, is decoded by the reader (Pillow) as before.

Never one record at a time through Python. Normalization (mean, scale),
cropping and augmentation are batched TensorFlow ops in ``map`` stages,
followed by ``prefetch``.

Epoch order is a pure function of ``(seed, epoch)`` and augmentation draws
of ``(seed, epoch, batch)``, so a run resumed at step ``k`` of epoch ``e``
sees the same batches as an uninterrupted run. With several input pipelines
(multi-worker training) each pipeline takes every ``num_pipelines``-th
index of the epoch's permutation.

The decoders of encoded records are :mod:`~digits_core.engine.decode`. The
train and validation builders and the preload/stream sources stay together
here: they share the batching layout and the epoch-order rules above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .augmentation import augment_batch
from .decode import (  # noqa: F401  (re-exported: the pipeline's decoders were defined here)
    ENCODED_KINDS,
    bytes_array,
    decode_all,
    make_batch_decoder,
    make_decoder,
    stage_encodings,
)
from .options import Augmentation
from .preprocessing import Preprocessing, center_crop_offsets, tf_center_crop

AUTOTUNE = -1


@dataclass
class Layout:
    """How batches are split over input pipelines and replicas.

    Attributes:
        global_batch: Images per optimizer step over all replicas.
        num_pipelines: Input pipelines (one per worker).
        pipeline_id: This pipeline's index.
        replicas: Replicas in sync (all workers).
    """

    global_batch: int
    num_pipelines: int = 1
    pipeline_id: int = 0
    replicas: int = 1

    @property
    def per_replica_batch(self) -> int:
        return max(1, self.global_batch // self.replicas)

    @property
    def local_replicas(self) -> int:
        return max(1, self.replicas // self.num_pipelines)

    def steps_per_epoch(self, n: int) -> int:
        """Optimizer steps per epoch (the last partial batch is kept on one replica, dropped on several)."""
        if self.replicas == 1:
            return max(1, math.ceil(n / self.global_batch))
        return max(1, n // (self.per_replica_batch * self.replicas))


class StageSource:
    """One stage of a dataset reader, preloaded or streamed.

    Args:
        reader: An object with the dataset reader API (``count``, ``read_all``,
            ``read_indexes``, ``feature_shape``, ``feature_dtype``, ``label_kind``).
        stage: ``"train"`` or ``"val"``.
        preload: Read the whole stage into memory.
        fix_labels: ``labels -> labels`` as the model takes them (the task's
            :attr:`~digits_core.engine.tasks.Task.fix_labels`); default: by the dataset's label kind.
    """

    def __init__(self, reader, stage: str, preload: bool, fix_labels=None):
        self.reader = reader
        self.stage = stage
        self.n = int(reader.count(stage))
        self.preload = bool(preload)
        self.feature_shape = tuple(reader.feature_shape())
        self.feature_dtype = np.dtype(reader.feature_dtype())
        self.label_kind = reader.label_kind
        self._label_fn = fix_labels
        self.encodings = stage_encodings(reader, stage)
        self.features: Any = None  # preloaded arrays (None when streaming)
        self.labels: Any = None
        self.decode_s = 0.0
        if self.preload:
            if self.encoded:
                import time

                t0 = time.perf_counter()
                encoded, labels = reader.read_all(stage, decode=False)
                self.features = self._decode(encoded)
                self.decode_s = time.perf_counter() - t0
            else:
                self.features, labels = reader.read_all(stage)
            self.labels = self._fix_labels(labels)
        first = self.labels[:1] if self.preload else self.read_labels(np.arange(min(1, self.n)))
        self.label_shape = tuple(first.shape[1:])
        self.label_dtype = first.dtype

    def _fix_labels(self, labels: np.ndarray) -> np.ndarray:
        if self._label_fn is not None:
            return self._label_fn(labels)
        if self.label_kind in ("class", "mask"):
            return labels.astype(np.int32, copy=False)
        labels = labels.astype(np.float32, copy=False)
        return labels.reshape(len(labels), -1)

    @property
    def encoded(self) -> bool:
        """Features are decoded by TensorFlow (see :func:`stage_encodings`)."""
        return self.encodings is not None

    def _decode(self, encoded) -> np.ndarray:
        if isinstance(encoded, np.ndarray):  # every record turned out raw
            return encoded
        return decode_all(encoded, self.feature_shape, self.feature_dtype, self.encodings)

    def read(self, indexes: np.ndarray):
        """Read records by index (preloaded: numpy take; streamed: one batched LMDB read).

        Returns decoded features; a streamed encoded stage decodes them with
        TensorFlow (:func:`decode_all`).
        """
        if self.preload:
            return self.features[indexes], self.labels[indexes]
        if self.encoded:
            encoded, labels = self.read_encoded(indexes)
            return self._decode(encoded), labels
        features, labels = self.reader.read_indexes(self.stage, [int(i) for i in indexes])
        return np.asarray(features), self._fix_labels(labels)

    def read_encoded(self, indexes: np.ndarray):
        """Streamed encoded stage: ``(encoded bytes list (or raw array), labels)`` in one LMDB read, no decoding."""
        features, labels = self.reader.read_indexes(self.stage, [int(i) for i in indexes], decode=False)
        return features, self._fix_labels(labels)

    def read_labels(self, indexes: np.ndarray) -> np.ndarray:
        """Labels only (features are not decoded)."""
        if self.preload:
            return self.labels[indexes]
        idx = [int(i) for i in indexes]
        if self.encoded:
            return self._fix_labels(self.reader.read_indexes(self.stage, idx, decode=False)[1])
        return self._fix_labels(self.reader.read_indexes(self.stage, idx)[1])

    def sample(self, count: int = 1024, seed: int = 0) -> np.ndarray:
        """A few features for statistics (input scale)."""
        if self.n == 0:
            return np.zeros((0, *self.feature_shape), self.feature_dtype)
        idx = np.sort(np.random.default_rng(seed).choice(self.n, min(count, self.n), replace=False))
        return self.read(idx)[0]

    def nbytes_estimate(self) -> int:
        return self.n * int(np.prod(self.feature_shape)) * self.feature_dtype.itemsize


def pipeline_options():
    """The ``tf.data.Options`` of every engine pipeline: no auto-sharding, and no autotuning model thread.

    ``AUTOTUNE`` still sizes the parallel maps (to the cores) and the prefetch
    buffers (TensorFlow's prefetch autotuner). The autotuning *model* is off
    because of how it ends: destroying an iterator joins its optimization thread,
    which sleeps through its current period (which grows to tens of seconds)
    without being woken, so ``digits train`` stalled 5-30 s after its last step
    in 3 of 5 runs (LeNet, 20,000 images, 3 epochs; gdb: the main thread in
    ``RootDataset::Iterator::~Iterator`` waiting on ``Model::OptimizeLoop``). Without
    it: no stall in 9 runs, and the same steps/s (``bench/train_phases.py``).
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    options.autotune.enabled = False
    return options


def should_preload(reader, stage: str, preload, limit_mb: float) -> bool:
    """Decide preload vs stream for ``preload`` = True/False/"auto"."""
    if preload != "auto":
        return bool(preload)
    n = int(reader.count(stage))
    size = n * int(np.prod(reader.feature_shape())) * np.dtype(reader.feature_dtype()).itemsize
    return size <= limit_mb * 1024 * 1024


def _epoch_permutation_np(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    return np.random.default_rng([int(seed), int(epoch)]).permutation(n).astype(np.int64)


def train_dataset(  # noqa: C901 - split pending (the complexity ratchet in pyproject.toml)
    source: StageSource,
    *,
    layout: Layout,
    prep: Preprocessing,
    aug: Augmentation,
    seed: int,
    shuffle: bool,
    start_epoch: int,
    epochs: int,
    skip_batches: int = 0,
):
    """The training ``tf.data.Dataset`` for one input pipeline.

    Yields ``(images, labels)`` per-replica batches from epoch ``start_epoch``
    (skipping its first ``skip_batches`` optimizer steps) to ``epochs - 1``.
    """
    import tensorflow as tf

    # The map functions are graph code already: tracing them without autograph's AST conversion is faster.
    plain = tf.autograph.experimental.do_not_convert
    n = source.n
    per_b = layout.per_replica_batch
    steps = layout.steps_per_epoch(n)
    batches_per_epoch = steps * layout.local_replicas
    drop = layout.replicas > 1
    pid, npipe = layout.pipeline_id, layout.num_pipelines
    is_mask = source.label_kind == "mask"
    out_hw = prep.input_shape[:2]
    random_crop = bool(prep.crop_size)
    needs_aug = aug.enabled or random_crop

    if source.preload:
        features = tf.constant(source.features)
        labels = tf.constant(source.labels)

        def epoch_batches(epoch):
            if shuffle:
                keys = tf.random.stateless_uniform([n], seed=tf.stack([tf.cast(seed, tf.int64), epoch]))
                perm = tf.argsort(keys)
            else:
                perm = tf.range(n)
            perm = tf.cast(perm[pid::npipe], tf.int64)
            return (
                tf.data.Dataset.from_tensor_slices(perm)
                .batch(per_b, drop_remainder=drop)
                .take(batches_per_epoch)
                .enumerate()
                .map(plain(lambda j, idx: (epoch, j, idx)))
            )

        def gather(epoch, j, idx):
            return epoch, j, tf.gather(features, idx), tf.gather(labels, idx)

        ds = tf.data.Dataset.range(start_epoch, epochs).flat_map(plain(epoch_batches))
        if skip_batches:
            ds = ds.skip(skip_batches * layout.local_replicas)
        ds = ds.map(plain(gather), num_parallel_calls=AUTOTUNE, deterministic=True)
    else:
        encoded = source.encoded
        if encoded:
            feat_sig = tf.TensorSpec((None,), tf.string)
        else:
            feat_sig = tf.TensorSpec((None, *source.feature_shape), tf.as_dtype(source.feature_dtype))
        label_sig = tf.TensorSpec((None, *source.label_shape), tf.as_dtype(source.label_dtype))
        unread = skip_batches * layout.local_replicas  # a resume's trained batches: skipped unread (no Dataset.skip)

        def generator(epoch):
            epoch = int(epoch)
            perm = _epoch_permutation_np(n, seed, epoch, shuffle)[pid::npipe]
            count = 0
            for j, start in enumerate(range(0, len(perm), per_b)):
                idx = np.sort(perm[start : start + per_b])
                if count >= batches_per_epoch or (drop and len(idx) < per_b):
                    return
                count += 1
                if epoch == start_epoch and count <= unread:  # reading them delayed the first step (and SIGTERM)
                    continue
                if encoded:
                    x, y = source.read_encoded(idx)
                    x = bytes_array(x)
                else:
                    x, y = source.read(idx)
                yield epoch, j, x, y

        def epoch_batches(epoch):
            return tf.data.Dataset.from_generator(
                generator,
                args=(epoch,),
                output_signature=(tf.TensorSpec((), tf.int64), tf.TensorSpec((), tf.int64), feat_sig, label_sig),
            )

        ds = tf.data.Dataset.range(start_epoch, epochs).flat_map(epoch_batches)
        if encoded:
            decode_batch = make_batch_decoder(source.feature_shape, source.feature_dtype, source.encodings)
            ds = ds.map(lambda e, j, x, y: (e, j, decode_batch(x), y), num_parallel_calls=AUTOTUNE, deterministic=True)

    def transform(epoch, j, x, y):
        x = prep.tf_normalize(x)
        if needs_aug:
            batch_seed = tf.stack([tf.cast(seed, tf.int64), epoch * 1_000_003 + j * 7919 + pid])
            x, y = augment_batch(
                x,
                y,
                batch_seed,
                aug,
                out_hw=out_hw,
                is_mask=is_mask,
                random_crop=random_crop,
                is_boxes=source.label_kind == "boxes",
            )
        return x, y

    ds = ds.map(plain(transform), num_parallel_calls=AUTOTUNE, deterministic=True)
    options = pipeline_options()
    options.deterministic = True
    return ds.with_options(options).prefetch(AUTOTUNE)


def val_dataset(source: StageSource, *, layout: Layout, prep: Preprocessing):
    """The validation ``tf.data.Dataset`` for one input pipeline.

    Yields ``(images, labels, valid)`` per-replica batches, centre-cropped,
    padded to a full batch with ``valid = 0`` rows so every pipeline runs
    the same number of steps and every record counts exactly once.
    """
    import tensorflow as tf

    per_b = layout.per_replica_batch
    pid, npipe = layout.pipeline_id, layout.num_pipelines
    idx_all = np.arange(source.n)[pid::npipe]
    per_pipe = math.ceil(source.n / npipe)
    steps = max(1, math.ceil(per_pipe / per_b))
    batches = steps * layout.local_replicas
    crop = prep.crop_size
    is_mask = source.label_kind == "mask"
    label_shape = source.label_shape
    if crop and is_mask:
        label_shape = (crop, crop)

    def generator():
        for b in range(batches):
            idx = idx_all[b * per_b : (b + 1) * per_b]
            valid = np.zeros(per_b, np.float32)
            valid[: len(idx)] = 1
            if len(idx):
                x, y = source.read(idx)
            else:
                x = np.zeros((0, *source.feature_shape), source.feature_dtype)
                y = np.zeros((0, *source.label_shape), source.label_dtype)
            x = prep.normalize(x) if len(idx) else x.astype(np.float32)
            if crop:
                top, left = center_crop_offsets(x.shape[1], x.shape[2], crop)
                x = x[:, top : top + crop, left : left + crop]
                if is_mask:
                    y = y[:, top : top + crop, left : left + crop]
            pad = per_b - len(idx)
            if pad:
                x = np.concatenate([x, np.zeros((pad, *x.shape[1:]), np.float32)])
                y = np.concatenate([y, np.zeros((pad, *label_shape), y.dtype)])
            yield x.astype(np.float32), y, valid

    in_shape = prep.input_shape
    if source.preload:
        return _preloaded_val_dataset(
            source, per_b=per_b, batches=batches, idx_all=idx_all, prep=prep, label_shape=label_shape
        ), steps
    if source.encoded and not source.preload:
        return _encoded_val_dataset(
            source, per_b=per_b, batches=batches, idx_all=idx_all, prep=prep, label_shape=label_shape
        ), steps
    ds = tf.data.Dataset.from_generator(
        generator,
        output_signature=(
            tf.TensorSpec((per_b, *in_shape), tf.float32),
            tf.TensorSpec((per_b, *label_shape), tf.as_dtype(source.label_dtype)),
            tf.TensorSpec((per_b,), tf.float32),
        ),
    )
    options = pipeline_options()
    return ds.with_options(options).prefetch(AUTOTUNE), steps


def _preloaded_val_dataset(
    source: StageSource, *, per_b: int, batches: int, idx_all: np.ndarray, prep: Preprocessing, label_shape: tuple
):
    """Validation batches of a preloaded stage: slices of tensors made once, normalized, cropped, padded in tf.data.

    The same batches as the generator path (same order, the same float32 arithmetic as ``prep.normalize``,
    padding rows with ``valid = 0``), without a Python generator and a numpy pass over every batch per validation.
    """
    import tensorflow as tf

    plain = tf.autograph.experimental.do_not_convert
    crop = prep.crop_size
    is_mask = source.label_kind == "mask"
    in_shape = tuple(prep.input_shape)
    count = len(idx_all)
    features = tf.constant(source.features[idx_all])
    labels = tf.constant(source.labels[idx_all])
    valid_all = tf.constant((np.arange(batches * per_b) < count).astype(np.float32))
    top, left = center_crop_offsets(source.feature_shape[0], source.feature_shape[1], crop) if crop else (0, 0)

    def batch(b):
        start = b * per_b
        stop = tf.maximum(tf.minimum(start + per_b, count), start)
        x, y = prep.tf_normalize(features[start:stop]), labels[start:stop]
        if crop:
            x = x[:, top : top + crop, left : left + crop]
            if is_mask:
                y = y[:, top : top + crop, left : left + crop]
        pad = per_b - (stop - start)
        x = tf.concat([x, tf.zeros(tf.concat([[pad], tf.constant(in_shape, tf.int64)], 0), tf.float32)], 0)
        y = tf.concat([y, tf.zeros(tf.concat([[pad], tf.constant(label_shape, tf.int64)], 0), y.dtype)], 0)
        return (
            tf.ensure_shape(x, (per_b, *in_shape)),
            tf.ensure_shape(y, (per_b, *label_shape)),
            valid_all[start : start + per_b],
        )

    ds = tf.data.Dataset.range(batches).map(plain(batch), num_parallel_calls=AUTOTUNE, deterministic=True)
    options = pipeline_options()
    return ds.with_options(options).prefetch(AUTOTUNE)


def _encoded_val_dataset(
    source: StageSource, *, per_b: int, batches: int, idx_all: np.ndarray, prep: Preprocessing, label_shape: tuple
):
    """Validation batches of a streamed encoded stage: bytes from LMDB, decode/normalize/crop/pad in tf.data."""
    import tensorflow as tf

    crop = prep.crop_size
    is_mask = source.label_kind == "mask"
    decode_batch = make_batch_decoder(source.feature_shape, source.feature_dtype, source.encodings)
    in_shape = tuple(prep.input_shape)

    def generator():
        for b in range(batches):
            idx = idx_all[b * per_b : (b + 1) * per_b]
            valid = np.zeros(per_b, np.float32)
            valid[: len(idx)] = 1
            if len(idx):
                x, y = source.read_encoded(idx)
            else:
                x, y = [], np.zeros((0, *source.label_shape), source.label_dtype)
            if crop and is_mask:
                top, left = center_crop_offsets(y.shape[1], y.shape[2], crop) if len(idx) else (0, 0)
                y = y[:, top : top + crop, left : left + crop]
            pad = per_b - len(idx)
            if pad:
                y = np.concatenate([y, np.zeros((pad, *label_shape), y.dtype)])
            yield bytes_array(x), y, valid

    def transform(x, y, valid):
        images = tf_center_crop(prep.tf_normalize(decode_batch(x)), crop)
        pad = per_b - tf.shape(images)[0]
        images = tf.concat([images, tf.zeros(tf.concat([[pad], tf.constant(in_shape, tf.int32)], 0), tf.float32)], 0)
        return tf.ensure_shape(images, (per_b, *in_shape)), y, valid

    ds = tf.data.Dataset.from_generator(
        generator,
        output_signature=(
            tf.TensorSpec((None,), tf.string),
            tf.TensorSpec((per_b, *label_shape), tf.as_dtype(source.label_dtype)),
            tf.TensorSpec((per_b,), tf.float32),
        ),
    )
    ds = ds.map(transform, num_parallel_calls=AUTOTUNE, deterministic=True)
    options = pipeline_options()
    return ds.with_options(options).prefetch(AUTOTUNE)
