"""TensorBoard HParams data of a training run: its options and final metrics, for the HParams dashboard.

At the end of a run (any final status; a volume run's too, :func:`volume_record`) the chief writes, into the job's ``tb/`` folder beside the
scalar curves:

* the HParams *config* (``hparams_config``): one hparam per option, one metric per final metric;
* the *session* (``hparams``): the option values of this run, its trial id (the job id);
* one ``final/<name>`` scalar per final metric (``model.json`` ``final_metrics``), at the last step,
  written as float64 so TensorBoard shows exactly the job's record.

``tensorboard --logdir JOBS_DIR`` (or a sweep's trials) then lists every run in the HParams tab.
TensorBoard reads one config per log folder: runs of one sweep share theirs (the same options
and metrics); a folder of unrelated runs shows the columns of one of them, and each run's values.

The ``tensorboard`` package is imported here only, when a run ends.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from .jobio import TB_DIR, read_metrics

#: The scalar tag prefix of the final metrics (the HParams dashboard's metric columns).
FINAL_PREFIX = "final/"
#: Option keys that are not hyper-parameters: where a run is tracked, not how it trains.
NOT_HPARAMS = frozenset({"mlflow"})

logger = logging.getLogger("digits_core.engine")


def hparam_values(options: dict, *, network: str | None = None, dataset: str | None = None) -> dict[str, Any]:
    """A run's options as HParams values: numbers, strings and booleans kept, ``None`` left out,
    nested values (augmentation, network parameters, lists) flattened to ``parent.key`` or JSON text.

    Args:
        options: The run's options (``model.json`` ``options``).
        network: The network's name (hparam ``network``).
        dataset: The dataset job id (hparam ``dataset``).
    """
    values: dict[str, Any] = {}
    if network:
        values["network"] = str(network)
    if dataset:
        values["dataset"] = str(dataset)
    for key, value in sorted(options.items()):
        if key in NOT_HPARAMS:
            continue
        if isinstance(value, dict) and key == "augmentation":
            for sub, item in sorted(value.items()):
                _put(values, f"{key}.{sub}", item)
        else:
            _put(values, key, value)
    return values


def _put(values: dict, key: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, (bool, str)):
        values[key] = value
    elif isinstance(value, (int, float)):
        if isinstance(value, int) or math.isfinite(value):
            values[key] = value
    else:
        values[key] = json.dumps(value, sort_keys=True, default=str)


def final_values(metrics: dict) -> dict[str, float]:
    """The final metrics that are finite numbers (a detector's ``null`` mAP is left out)."""
    found: dict[str, float] = {}
    for name, value in metrics.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            found[str(name)] = float(value)
    return found


def write_hparams(
    folder: str | os.PathLike, hparams: dict[str, Any], metrics: dict[str, float], *, step: int, trial_id: str
) -> Path:
    """Write a run's HParams config, session and final metrics into ``folder`` (a TensorBoard log folder).

    Args:
        folder: The log folder (a model job's ``tb/``).
        hparams: Option values (:func:`hparam_values`).
        metrics: Final metric values (:func:`final_values`).
        step: The run's last step (where the final scalars are placed).
        trial_id: The session's name in the dashboard (the job id).

    Returns:
        The log folder.
    """
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp  # the tensorboard package: only when a run ends
    from tensorflow.core.framework import summary_pb2

    path = Path(folder)
    writer = tf.summary.create_file_writer(str(path), filename_suffix=".hparams")
    try:
        with writer.as_default():
            hp.hparams_config(
                hparams=[hp.HParam(name) for name in hparams],
                metrics=[hp.Metric(FINAL_PREFIX + name, display_name=name) for name in metrics],
            )
            hp.hparams(hparams, trial_id=trial_id)
            scalar = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
            )
            for name, value in metrics.items():
                tf.summary.write(FINAL_PREFIX + name, tf.constant(value, tf.float64), step=int(step), metadata=scalar)
        writer.flush()
    finally:
        writer.close()
    return path


def volume_record(folder: str | os.PathLike, record: dict, options: dict) -> dict:
    """A volume run's record in :func:`write_run_hparams`'s terms: its options (the volume settings as
    ``volume_<name>``, as the options name them) and, as final metrics, the last value of each logged metric."""
    points = read_metrics(folder)
    finals: dict[str, Any] = {}
    for point in points:
        finals[str(point.get("name"))] = point.get("value")
    settings = {f"volume_{key}": value for key, value in dict(record.get("volume") or {}).items()}
    return {
        "options": {**options, **settings},
        "network": record.get("network"),
        "dataset_id": record.get("dataset_id"),
        "final_metrics": finals,
        "snapshots": [{"step": max((int(p.get("step") or 0) for p in points), default=0)}],
    }


def write_run_hparams(folder: str | os.PathLike, record: dict, job_id: str) -> None:
    """The end-of-run entry point: a model job's record to TensorBoard HParams data under ``tb/``.

    A failure here (a full disk, a broken TensorBoard install) is logged, never the run's failure:
    the model and its record are already complete.

    Args:
        folder: The model job folder.
        record: Its ``model.json`` (``options``, ``network``, ``dataset_id``, ``final_metrics``).
        job_id: The job id (the session's name).
    """
    try:
        hparams = hparam_values(
            dict(record.get("options") or {}), network=record.get("network"), dataset=record.get("dataset_id")
        )
        write_hparams(
            Path(folder) / TB_DIR,
            hparams,
            final_values(dict(record.get("final_metrics") or {})),
            step=int(((record.get("snapshots") or [{}])[-1]).get("step") or 0),  # the last snapshot's
            trial_id=job_id,
        )
    except (ImportError, OSError, ValueError, TypeError) as exc:
        logger.warning("TensorBoard HParams data not written for %s: %s", job_id, exc)
