"""Choosing a ``tf.distribute`` strategy: default device, MirroredStrategy, MultiWorkerMirroredStrategy.

* ``TF_CONFIG`` set with a cluster of more than one task: ``MultiWorkerMirroredStrategy``
  (one input pipeline per worker, each reading its shard of every epoch; only
  the chief writes outputs);
* ``gpus`` = N or ``"all"``: ``MirroredStrategy`` over that many local GPUs;
* otherwise TensorFlow's default strategy (one device).

The strategy must be created before TensorFlow runs anything else in the
process (a TensorFlow rule for collective ops), so :func:`make_strategy`
is the first thing a training run does.

Input batches reach the accelerator ahead of the step that uses them:
distributed strategies fetch each replica's batch to its device
(:func:`distribute_input`, ``experimental_fetch_to_device``); the default
strategy on a GPU machine prefetches to ``/gpu:0``
(:func:`input_device`, :func:`feed_to_device`), and on a CPU it is left as it is.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..errors import TrainingError


@dataclass
class StrategyInfo:
    """The strategy and this process's role.

    Attributes:
        strategy: The ``tf.distribute.Strategy``.
        kind: ``"default"``, ``"MirroredStrategy"`` or ``"MultiWorkerMirroredStrategy"``.
        num_workers: Worker processes.
        worker_index: This worker's index (0-based; chief is 0).
        is_chief: Whether this process writes outputs.
        replicas: Replicas in sync over all workers.
    """

    strategy: Any
    kind: str
    num_workers: int = 1
    worker_index: int = 0
    is_chief: bool = True
    replicas: int = 1

    def describe(self) -> dict:
        return {
            "strategy": self.kind,
            "num_workers": self.num_workers,
            "worker_index": self.worker_index,
            "replicas": self.replicas,
        }


def cluster_from_env() -> dict | None:
    """The parsed ``TF_CONFIG`` when it describes more than one task, else ``None``."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TrainingError(f"TF_CONFIG is not valid JSON: {exc}") from exc
    cluster = config.get("cluster") or {}
    tasks = sum(len(v) for v in cluster.values())
    if tasks <= 1:
        return None
    task = config.get("task") or {}
    if "type" not in task or "index" not in task:
        raise TrainingError('TF_CONFIG needs a "task" with "type" and "index" (e.g. {"type": "worker", "index": 0}).')
    return config


def _scheduler_assignment(gpus: Any) -> Any:
    """In a worker the scheduler gave GPUs (``DIGITS_ASSIGNED_GPUS``), use all of them and only them.

    CUDA renumbers the assigned devices from 0 (the scheduler set ``CUDA_VISIBLE_DEVICES``), so the
    machine ids the job asked for (``"0,2"``) no longer name them; one device is the default strategy.
    """
    from ..gpus import ASSIGNED_ENV

    assigned = os.environ.get(ASSIGNED_ENV)
    if assigned is None:
        return gpus
    count = len([d for d in assigned.split(",") if d])
    return count if count > 1 else None


def make_strategy(gpus: Any = None) -> StrategyInfo:
    """Create the strategy for ``gpus`` and ``TF_CONFIG`` (see module docstring).

    Raises:
        TrainingError: More GPUs requested than visible, or a bad TF_CONFIG.
    """
    config = cluster_from_env()
    import tensorflow as tf

    if config is not None:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        cluster = config["cluster"]
        task_type, index = config["task"]["type"], int(config["task"]["index"])
        workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
        if "chief" in cluster:
            is_chief = task_type == "chief"
            worker_index = 0 if is_chief else index + 1
        else:
            is_chief = task_type == "worker" and index == 0
            worker_index = index
        return StrategyInfo(
            strategy, "MultiWorkerMirroredStrategy", workers, worker_index, is_chief, strategy.num_replicas_in_sync
        )
    gpus = _scheduler_assignment(gpus)
    if gpus not in (None, 0, "0"):
        visible = tf.config.list_physical_devices("GPU")
        if not visible:
            raise TrainingError(
                f"--gpus {gpus}: no GPU is visible to TensorFlow on this machine; omit --gpus to train on the CPU."
            )
        ids = [int(i) for i in str(gpus).split(",")] if "," in str(gpus) else None
        count = len(visible) if gpus == "all" else (len(ids) if ids else int(gpus))
        if count > len(visible) or (ids and max(ids) >= len(visible)):
            raise TrainingError(f"--gpus {gpus}: only {len(visible)} GPU(s) are visible.")
        devices = [f"/gpu:{i}" for i in (ids or range(count))]
        strategy = tf.distribute.MirroredStrategy(devices=devices)
        return StrategyInfo(strategy, "MirroredStrategy", replicas=strategy.num_replicas_in_sync)
    return StrategyInfo(tf.distribute.get_strategy(), "default")


def input_device(info: StrategyInfo) -> str | None:
    """The device the default strategy's batches are prefetched to: ``/gpu:0`` when a GPU is visible.

    ``None`` on a CPU-only machine (the batches are already where the step runs) and for
    distributed strategies (:func:`distribute_input` places their batches).
    """
    if info.kind != "default":
        return None
    import tensorflow as tf

    return "/gpu:0" if tf.config.list_physical_devices("GPU") else None


def feed_to_device(dataset: Any, device: str | None) -> Any:
    """``dataset`` with its batches copied to ``device`` ahead of use (``prefetch_to_device``).

    The copy is the last stage (tf.data's rule for ``prefetch_to_device``) and changes neither
    the batches nor their order; ``device=None`` returns ``dataset`` unchanged.
    """
    if device is None:
        return dataset
    import tensorflow as tf

    return dataset.apply(tf.data.experimental.prefetch_to_device(device))


def distribute_input(info: StrategyInfo, make: Any) -> Any:
    """The input of a run: ``make(input_context)`` per pipeline, its batches fed to the devices.

    Under a distributed strategy, one pipeline per worker
    (``distribute_datasets_from_function``) whose per-replica batches are fetched to each
    replica's device; under the default strategy, the one pipeline through :func:`feed_to_device`.
    """
    import tensorflow as tf

    if info.kind == "default":
        return feed_to_device(make(tf.distribute.InputContext()), input_device(info))
    return info.strategy.distribute_datasets_from_function(
        make, options=tf.distribute.InputOptions(experimental_fetch_to_device=True)
    )
