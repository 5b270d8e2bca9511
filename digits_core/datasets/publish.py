"""Finishing a dataset job: the mean image, ``dataset.json``, and publishing with one rename.

A dataset is built in a hidden ``.building-XXXXXXXX`` folder inside its job
folder and becomes visible only when that folder is renamed to ``dataset``
(atomic on one filesystem), so a reader never sees half a dataset. A build
folder left behind by a killed job is removed by :func:`remove_stale_builds`.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from ..interfaces import STAGES
from ..interfaces.labels import LABEL_KINDS
from ..jobs import write_json_atomic
from .reader import DATASET_DIRNAME, ERRORS_FILE, INFO_FILE, MEAN_FILE

#: Prefix of the hidden folder a dataset is built in, inside the job folder.
BUILD_PREFIX = ".building-"

FORMAT_NAME = "digits-lmdb"
FORMAT_VERSION = 1


def write_mean(build: Path, mean_sum: list | None, train_count: int) -> dict | None:
    """Save the float32 mean image from ``[sum, count]``; return its ``dataset.json`` entry."""
    if mean_sum is None or mean_sum[1] <= 0:
        return None
    np.save(build / MEAN_FILE, (mean_sum[0] / mean_sum[1]).astype(np.float32))
    return {"file": MEAN_FILE, "images": int(mean_sum[1]), "stage": "train", "exact": int(mean_sum[1]) == train_count}


def dataset_info(
    *,
    job,
    plugin_id: str,
    plugin_version: str | None,
    layout: tuple,
    stage_info: dict,
    userdata: dict,
    mean: dict | None,
    skipped: int,
    max_errors,
    workers: int,
    timing: dict,
) -> dict:
    """Return the content of ``dataset.json`` (see ``docs/formats.md``)."""
    fdtype, fshape, kind, ldtype, lshape = layout
    class_labels = userdata.get("class_labels")
    num_classes = None
    if LABEL_KINDS[kind] in ("class", "mask"):
        seen = max((len(i["label_histogram"] or []) for i in stage_info.values()), default=0)
        num_classes = max(seen, len(class_labels or []))
        if not class_labels and num_classes:
            class_labels = [str(i) for i in range(num_classes)]
    elif LABEL_KINDS[kind] == "multilabel":  # one 0/1 entry per class
        num_classes = int(lshape[0])
        class_labels = class_labels or [str(i) for i in range(num_classes)]
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "id": job.id,
        "name": job.name,
        "plugin_id": plugin_id,
        "plugin_version": plugin_version,
        "created": time.time(),
        "feature": {"shape": list(fshape), "dtype": fdtype, "layout": "HWC"},
        "label": {"kind": LABEL_KINDS[kind], "dtype": ldtype, "shape": list(lshape)},
        "stages": {s: stage_info[s] for s in STAGES if s in stage_info},
        "userdata": userdata,
        "class_labels": class_labels,
        "num_classes": num_classes,
        "color_palette": userdata.get("color_palette"),
        "mean": mean,
        "errors": {"skipped": skipped, "max_errors": max_errors, "report": f"../{ERRORS_FILE}" if skipped else None},
        "workers": workers,
        "timing": timing,
    }


def publish(build: Path, job_path: Path, info: dict) -> Path:
    """Write ``dataset.json`` into ``build`` and rename it to ``<job>/dataset``; return that folder.

    Raises:
        DatasetError: The job already has a published dataset.
    """
    write_json_atomic(build / INFO_FILE, info)
    final = job_path / DATASET_DIRNAME
    if final.exists():
        raise DatasetError(f"{final} already exists; a job publishes its dataset only once.")
    os.rename(build, final)
    return final


def _owner_alive(job_path: Path) -> bool:
    """True while a process owns the job (holds its lock; see :mod:`digits_core.jobs`)."""
    from ..jobs import is_job_alive

    return is_job_alive(job_path)


def remove_stale_builds(jobs_dir: str | os.PathLike | None = None) -> int:
    """Delete the ``.building-*`` folders that killed dataset jobs left behind; return how many.

    Only folders of jobs whose owner process is gone are touched: a job
    being built right now (by any process) keeps its build folder. The
    dataset commands and the server call this on start.
    """
    from ..config import resolve_jobs_dir

    removed = 0
    try:
        jobs = [p for p in resolve_jobs_dir(jobs_dir, create=False).iterdir() if p.is_dir()]
    except OSError:
        return 0
    for job_path in jobs:
        try:
            builds = [p for p in job_path.iterdir() if p.name.startswith(BUILD_PREFIX)]
        except OSError:
            continue
        if not builds or _owner_alive(job_path):
            continue
        for path in builds:
            shutil.rmtree(path, ignore_errors=True)
            removed += not path.exists()
    return removed
