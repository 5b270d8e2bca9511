"""The training engine: Keras 3 on TensorFlow, tf.data input, tf.distribute strategies.

::

    from digits_core.engine import train, resume_training, request_abort, load_snapshot, lr_schedule_preview

    job = train("20261202-101500-ab12", "lenet", name="mnist-lenet", epochs=5,
                solver="momentum", learning_rate=0.01, lr_policy="step")
    model = load_snapshot(job)                  # the last snapshot, a keras.Model

Importing this package does not import TensorFlow; the functions do when
called. Modules: :mod:`.options` (hyper-parameters), :mod:`.lr_policies`,
:mod:`.solvers`, :mod:`.networks` (built-in, plugin and custom networks),
:mod:`.preprocessing` (shared with inference), :mod:`.augmentation`,
:mod:`.pipeline` (tf.data), :mod:`.losses`, :mod:`.distribute`,
:mod:`.jobio` (files of a model job), :mod:`.tasks` (what differs per task: loss,
metrics, labels), :mod:`.trainer` (public API and a run's life cycle), :mod:`.setup`
(everything before the first step), :mod:`.loop` (the steps), :mod:`.steps`
(compiled train/val steps), :mod:`.callbacks` (the Keras callback protocol),
:mod:`.snapshots` (save, resume, load, fine-tune), :mod:`.snapshot_writer` (snapshots written off the
training thread).
"""

from __future__ import annotations

import importlib

_NAMES = {
    "train": "trainer",
    "train_existing_job": "trainer",
    "resume_training": "trainer",
    "request_abort": "trainer",
    "load_snapshot": "snapshots",
    "Task": "tasks",
    "register_task": "tasks",
    "lr_schedule_preview": "lr_policies",
    "TrainingOptions": "options",
    "Augmentation": "options",
    "Preprocessing": "preprocessing",
    "list_networks": "networks",
    "read_metrics": "jobio",
    "read_model_info": "jobio",
}

__all__ = list(_NAMES)


def __getattr__(name: str):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'digits_core.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
