"""A lab's own model zoo: weight files in a folder with a ``manifest.json``, for ``weights=zoo:NAME``.

The folder is ``$DIGITS_ZOO`` (default ``~/.digits/zoo``). ``manifest.json``
is ``{"entries": {NAME: entry}}``, each entry::

    {"name": ..., "file": "NAME.weights.h5", "sha256": ..., "source": "job 2026... epoch 10" or a URL,
     "license": ..., "input_channels": 3, "preprocessing": "in the graph", "network": "mobilenet_v3_small",
     "dataset": ..., "metric": {"name": ..., "epoch": ...}, "task": "classification", "input_shape": [64, 64, 3],
     "added": "2026-12-06T07:00:00Z"}

Entries are added from a file (``digits zoo add FILE --name N``) or from the
encoder of a trained model job (``digits zoo add --from-model JOB``: the
nested ``backbone`` layer's weights of a snapshot, with the job, dataset and
best metric as provenance), removed, and exported with their manifest entry
to another folder (another lab's zoo). The manifest is replaced atomically.
Reading and checking entries is :mod:`.weights` (it resolves ``zoo:NAME``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import FormValidationError
from . import jobio
from .finetune import BACKBONE_LAYER
from .snapshots import load_snapshot
from .weights import MANIFEST, file_digest, read_manifest, zoo_dir

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_FORM = "digits zoo"


def _check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise FormValidationError(
            {"name": [f'"{name}": use letters, digits, ".", "_" and "-" (at most 100, not starting with a sign)']},
            _FORM,
        )
    return name


def _write_manifest(folder: Path, entries: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".manifest-", dir=folder)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump({"entries": entries}, out, indent=2, sort_keys=True)
    os.replace(tmp, folder / MANIFEST)


def list_entries(folder: Path | None = None) -> list[dict]:
    """The zoo's entries, sorted by name (each with its ``name``)."""
    return [{**entry, "name": name} for name, entry in sorted(read_manifest(folder or zoo_dir()).items())]


def add_file(
    path: str | os.PathLike,
    name: str,
    *,
    network: str = "",
    source: str = "",
    license: str = "",
    input_channels: int | None = None,
    extra: dict | None = None,
    replace: bool = False,
) -> dict:
    """Copy a weights file into the zoo as entry ``name`` and record it (SHA-256 computed here).

    Raises:
        FormValidationError: A bad name, a name in use (without ``replace``) or a missing file.
    """
    folder = zoo_dir()
    _check_name(name)
    src = Path(path).expanduser()
    if not src.is_file():
        raise FormValidationError({"file": [f"{src} is not a file"]}, _FORM)
    entries = read_manifest(folder)
    if name in entries and not replace:
        raise FormValidationError(
            {"name": [f'the zoo already has "{name}"; remove it first or pick another name']}, _FORM
        )
    suffix = ".weights.h5" if src.name.endswith(".weights.h5") else src.suffix
    target = folder / f"{name}{suffix}"
    folder.mkdir(parents=True, exist_ok=True)
    if src.resolve() != target.resolve():
        shutil.copyfile(src, target)
    entry: dict[str, Any] = {
        "file": target.name,
        "sha256": file_digest(target),
        "source": source or f"file {src.resolve()}",
        "license": license,
        "input_channels": input_channels,
        "preprocessing": "in the network's graph",
        "network": network,
        "added": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }
    entries[name] = entry
    _write_manifest(folder, entries)
    return {**entry, "name": name}


def add_from_model(job: Any, name: str, *, epoch: float | None = None, jobs_dir=None, license: str = "") -> dict:
    """Publish the encoder (the ``backbone`` layer) of a model job's snapshot as zoo entry ``name``.

    Raises:
        FormValidationError: The job's network has no ``backbone`` layer (not a backbone network), or a bad name.
        TrainingError: The job has no snapshot (at that epoch).
    """
    _check_name(name)
    folder = jobio.model_folder(job, jobs_dir)
    info = jobio.read_model_info(folder)
    model = load_snapshot(folder, epoch)
    try:
        encoder = model.get_layer(BACKBONE_LAYER)
    except ValueError:
        raise FormValidationError(
            {"from_model": [f'job {folder.name} ({info.get("network")}) has no "{BACKBONE_LAYER}" layer to publish']},
            _FORM,
        ) from None
    snapshots = info.get("snapshots") or []
    used = epoch if epoch is not None else (snapshots[-1]["epoch"] if snapshots else None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.weights.h5"
        encoder.save_weights(path)
        metric = {"name": info.get("best_metric"), "epoch": info.get("best_epoch")} if info.get("best_metric") else None
        return add_file(
            path,
            name,
            network=str(info.get("network") or ""),
            source=f"job {folder.name} epoch {used}",
            license=license,
            input_channels=int(info["input_shape"][-1]) if info.get("input_shape") else None,
            extra={
                "job": folder.name,
                "dataset": info.get("dataset_id"),
                "epoch": used,
                "metric": metric,
                "task": info.get("task"),
                "input_shape": list(info["input_shape"]) if info.get("input_shape") else None,
            },
        )


def remove(name: str) -> None:
    """Remove entry ``name`` and its file.

    Raises:
        FormValidationError: No such entry.
    """
    folder = zoo_dir()
    entries = read_manifest(folder)
    if name not in entries:
        raise FormValidationError({"name": [f'the zoo has no "{name}" (see digits zoo list)']}, _FORM)
    entry = entries.pop(name)
    _write_manifest(folder, entries)
    (folder / str(entry.get("file") or "")).unlink(missing_ok=True)


def export(name: str, target: str | os.PathLike) -> Path:
    """Copy entry ``name`` (file and manifest entry) into the zoo folder ``target`` (created if missing).

    Returns:
        The copied file.

    Raises:
        FormValidationError: No such entry, or the target already has an entry of that name.
    """
    folder, dest = zoo_dir(), Path(target).expanduser()
    entries = read_manifest(folder)
    if name not in entries:
        raise FormValidationError({"name": [f'the zoo has no "{name}" (see digits zoo list)']}, _FORM)
    theirs = read_manifest(dest)
    if name in theirs:
        raise FormValidationError({"dir": [f'{dest} already has an entry "{name}"']}, _FORM)
    dest.mkdir(parents=True, exist_ok=True)
    entry = entries[name]
    copied = dest / str(entry["file"])
    shutil.copyfile(folder / str(entry["file"]), copied)
    theirs[name] = entry
    _write_manifest(dest, theirs)
    return copied
