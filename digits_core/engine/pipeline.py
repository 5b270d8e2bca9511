"""The tf.data input pipeline over a dataset reader.

Two sources, one pipeline:

* **preload** (default when the stage fits in ``preload_limit_mb``): the
  whole stage is read with one batched LMDB read (``read_all``), kept as
  tensors, and each batch is a ``tf.gather`` of shuffled indexes;
* **stream**: each batch is one ``read_indexes`` call (one LMDB transaction
  for a batch of keys) from a Python generator, decoded there, then handed
  to tf.data.

Never one record at a time through Python. Normalization (mean, scale),
cropping and augmentation are batched TensorFlow ops in ``map`` stages,
followed by ``prefetch``.

Epoch order is a pure function of ``(seed, epoch)`` and augmentation draws
of ``(seed, epoch, batch)``, so a run resumed at step ``k`` of epoch ``e``
sees the same batches as an uninterrupted run. With several input pipelines
(multi-worker training) each pipeline takes every ``num_pipelines``-th
index of the epoch's permutation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .augmentation import augment_batch
from .options import Augmentation
from .preprocessing import Preprocessing, center_crop_offsets

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
    """

    def __init__(self, reader, stage: str, preload: bool):
        self.reader = reader
        self.stage = stage
        self.n = int(reader.count(stage))
        self.preload = bool(preload)
        self.feature_shape = tuple(reader.feature_shape())
        self.feature_dtype = np.dtype(reader.feature_dtype())
        self.label_kind = reader.label_kind
        self.features = self.labels = None
        if self.preload:
            self.features, labels = reader.read_all(stage)
            self.labels = self._fix_labels(labels)
        first = self.labels[:1] if self.preload else self._fix_labels(reader.read_batch(stage, 0, 1)[1])
        self.label_shape = tuple(first.shape[1:])
        self.label_dtype = first.dtype

    def _fix_labels(self, labels: np.ndarray) -> np.ndarray:
        if self.label_kind in ("class", "mask"):
            return labels.astype(np.int32, copy=False)
        labels = labels.astype(np.float32, copy=False)
        return labels.reshape(len(labels), -1)

    def read(self, indexes: np.ndarray):
        """Read records by index (preloaded: numpy take; streamed: one batched LMDB read)."""
        if self.preload:
            return self.features[indexes], self.labels[indexes]
        features, labels = self.reader.read_indexes(self.stage, [int(i) for i in indexes])
        return np.asarray(features), self._fix_labels(labels)

    def sample(self, count: int = 1024, seed: int = 0) -> np.ndarray:
        """A few features for statistics (input scale)."""
        if self.n == 0:
            return np.zeros((0, *self.feature_shape), self.feature_dtype)
        idx = np.sort(np.random.default_rng(seed).choice(self.n, min(count, self.n), replace=False))
        return self.read(idx)[0]

    def nbytes_estimate(self) -> int:
        return self.n * int(np.prod(self.feature_shape)) * self.feature_dtype.itemsize


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


def train_dataset(source: StageSource, *, layout: Layout, prep: Preprocessing, aug: Augmentation,
                  seed: int, shuffle: bool, start_epoch: int, epochs: int, skip_batches: int = 0):
    """The training ``tf.data.Dataset`` for one input pipeline.

    Yields ``(images, labels)`` per-replica batches from epoch ``start_epoch``
    (skipping its first ``skip_batches`` optimizer steps) to ``epochs - 1``.
    """
    import tensorflow as tf

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
            return (tf.data.Dataset.from_tensor_slices(perm).batch(per_b, drop_remainder=drop)
                    .take(batches_per_epoch).enumerate()
                    .map(lambda j, idx: (epoch, j, idx)))

        def gather(epoch, j, idx):
            return epoch, j, tf.gather(features, idx), tf.gather(labels, idx)

        ds = tf.data.Dataset.range(start_epoch, epochs).flat_map(epoch_batches)
        if skip_batches:
            ds = ds.skip(skip_batches * layout.local_replicas)
        ds = ds.map(gather, num_parallel_calls=AUTOTUNE, deterministic=True)
    else:
        feat_sig = tf.TensorSpec((None, *source.feature_shape), tf.as_dtype(source.feature_dtype))
        label_sig = tf.TensorSpec((None, *source.label_shape), tf.as_dtype(source.label_dtype))

        def generator(epoch):
            epoch = int(epoch)
            perm = _epoch_permutation_np(n, seed, epoch, shuffle)[pid::npipe]
            count = 0
            for j, start in enumerate(range(0, len(perm), per_b)):
                idx = np.sort(perm[start:start + per_b])
                if count >= batches_per_epoch or (drop and len(idx) < per_b):
                    return
                count += 1
                x, y = source.read(idx)
                yield epoch, j, x, y

        def epoch_batches(epoch):
            return tf.data.Dataset.from_generator(
                generator, args=(epoch,),
                output_signature=(tf.TensorSpec((), tf.int64), tf.TensorSpec((), tf.int64), feat_sig, label_sig))

        ds = tf.data.Dataset.range(start_epoch, epochs).flat_map(epoch_batches)
        if skip_batches:
            ds = ds.skip(skip_batches * layout.local_replicas)

    def transform(epoch, j, x, y):
        x = prep.tf_normalize(x)
        if needs_aug:
            batch_seed = tf.stack([tf.cast(seed, tf.int64), epoch * 1_000_003 + j * 7919 + pid])
            x, y = augment_batch(x, y, batch_seed, aug, out_hw=out_hw, is_mask=is_mask, random_crop=random_crop)
        return x, y

    ds = ds.map(transform, num_parallel_calls=AUTOTUNE, deterministic=True)
    options = tf.data.Options()
    options.deterministic = True
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
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
            idx = idx_all[b * per_b:(b + 1) * per_b]
            valid = np.zeros(per_b, np.float32)
            valid[:len(idx)] = 1
            if len(idx):
                x, y = source.read(idx)
            else:
                x = np.zeros((0, *source.feature_shape), source.feature_dtype)
                y = np.zeros((0, *source.label_shape), source.label_dtype)
            x = prep.normalize(x) if len(idx) else x.astype(np.float32)
            if crop:
                top, left = center_crop_offsets(x.shape[1], x.shape[2], crop)
                x = x[:, top:top + crop, left:left + crop]
                if is_mask:
                    y = y[:, top:top + crop, left:left + crop]
            pad = per_b - len(idx)
            if pad:
                x = np.concatenate([x, np.zeros((pad, *x.shape[1:]), np.float32)])
                y = np.concatenate([y, np.zeros((pad, *label_shape), y.dtype)])
            yield x.astype(np.float32), y, valid

    in_shape = prep.input_shape
    ds = tf.data.Dataset.from_generator(generator, output_signature=(
        tf.TensorSpec((per_b, *in_shape), tf.float32),
        tf.TensorSpec((per_b, *label_shape), tf.as_dtype(source.label_dtype)),
        tf.TensorSpec((per_b,), tf.float32)))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options).prefetch(AUTOTUNE), steps
