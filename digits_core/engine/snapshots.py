"""Snapshots of a model job: save, restore for resume, load for use, fine-tune from one.

A snapshot is two files in ``snapshots/``: the Keras model
(``epoch-<tag>.keras``) and the optimizer state with the step counter
(``epoch-<tag>.state.npz``); both are written to a temporary name and
renamed, so a reader never sees half a snapshot. ``model.json`` lists them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DigitsError, TrainingError
from ..jobs.model import add_snapshot
from ..jobs.record import ModelRecord, SnapshotEntry
from . import jobio
from .networks.custom import load_network_module
from .precision import as_float32

logger = logging.getLogger("digits_core.engine")


def save_snapshot(folder: Path, model, optimizer, epoch: float, step: int) -> None:
    """Write the model and optimizer state at ``step`` and list them in ``model.json``.

    Raises:
        TrainingError: The disk is full (or quota exceeded, or an I/O error): the half-written
            files are removed first, so the job's end can still be recorded.
    """
    with disk_errors(folder):
        files = write_snapshot_files(folder, model, optimizer_arrays(optimizer), epoch, step)
    with disk_errors(folder, unlisted=files):
        add_snapshot(folder, epoch, step, *files)


@contextmanager
def disk_errors(folder: Path, unlisted: Iterable[str] = ()) -> Iterator[None]:
    """Turn a full disk (or an I/O error) while writing a snapshot or ``model.json`` into :class:`TrainingError`.

    The snapshot's half-written ``.tmp-*`` files are removed first, and the
    ``unlisted`` snapshot files (written, but ``model.json`` could not list
    them), so the job's end can still be recorded; any other error passes
    through unchanged.
    """
    try:
        yield
    except Exception as exc:
        from ..faults import disk_error_message

        message = disk_error_message(exc, folder.parent)
        if message is None:
            raise
        snapshots = folder / jobio.SNAPSHOT_DIR
        for tmp in [*snapshots.glob(".tmp-*"), *(snapshots / name for name in _not_listed(folder, unlisted))]:
            tmp.unlink(missing_ok=True)
        raise TrainingError(message) from exc


def _not_listed(folder: Path, names: Iterable[str]) -> list[str]:
    """The ``names`` that ``model.json`` lists for no snapshot (all of them kept when it cannot be read)."""
    names = list(names)
    if not names:
        return []
    try:
        listed = jobio.read_model_info(folder).get("snapshots") or []
    except Exception:  # noqa: BLE001 - unreadable: delete nothing it might list
        return []
    taken = {entry.get(key) for entry in listed if isinstance(entry, dict) for key in ("file", "state")}
    return [name for name in names if name not in taken]


def optimizer_arrays(optimizer) -> list[np.ndarray]:
    """Copies of the optimizer's variables (its state), in order, as saved in ``.state.npz``."""
    return [np.array(v.numpy(), copy=True) for v in optimizer.variables]


def write_snapshot_files(folder: Path, model, opt_arrays: list[np.ndarray], epoch: float, step: int) -> tuple[str, str]:
    """Write ``epoch-<tag>.keras`` and ``epoch-<tag>.state.npz`` (each via a temporary name).

    Returns:
        The two file names, for :func:`~digits_core.jobs.model.add_snapshot`.
    """
    snap_dir = folder / jobio.SNAPSHOT_DIR
    snap_dir.mkdir(exist_ok=True)
    tag = jobio.epoch_tag(epoch)
    model_file, state_file = f"epoch-{tag}.keras", f"epoch-{tag}.state.npz"
    tmp = snap_dir / f".tmp-{model_file}"
    model.save(tmp)
    os.replace(tmp, snap_dir / model_file)
    arrays = {f"opt_{i}": value for i, value in enumerate(opt_arrays)}
    with open(snap_dir / f".tmp-{state_file}", "wb") as handle:
        payload: dict[str, Any] = {"count": len(arrays), "step": step, **arrays}
        np.savez(handle, **payload)
    os.replace(snap_dir / f".tmp-{state_file}", snap_dir / state_file)
    return model_file, state_file


def restore_optimizer_state(folder: Path, optimizer: Any, snap: SnapshotEntry) -> int:
    """Load a snapshot's optimizer variables into ``optimizer``; returns the step to continue from."""
    state = np.load(folder / jobio.SNAPSHOT_DIR / snap["state"])
    arrays = [state[f"opt_{i}"] for i in range(int(state["count"]))]
    variables = optimizer.variables
    if len(arrays) != len(variables):
        raise TrainingError(
            f"Snapshot {snap['state']} has {len(arrays)} optimizer variables, the optimizer "
            f"{len(variables)}; was the solver (or mixed precision) changed?"
        )
    for var, value in zip(variables, arrays):
        var.assign(value)
    return int(snap["step"])


def find_snapshot(info: ModelRecord, epoch: float | None, job_name: str) -> SnapshotEntry:
    """The snapshot entry at ``epoch`` (a number, fractions allowed; ``None``: the last one).

    Raises:
        TrainingError: No snapshot at all, or none at that epoch (the message lists those available).
    """
    snaps = info.get("snapshots") or []
    if not snaps:
        raise TrainingError(f"Model job {job_name} has no snapshot yet.")
    if epoch is None:
        return snaps[-1]
    try:
        wanted = float(epoch)
    except (TypeError, ValueError):
        raise TrainingError(f"Model job {job_name}: epoch {epoch!r} is not a number.") from None
    for snap in snaps:
        if abs(float(snap["epoch"]) - wanted) < 1e-6:
            return snap
    available = ", ".join(f"{s['epoch']:g}" for s in snaps)
    raise TrainingError(f"Model job {job_name} has no snapshot at epoch {epoch} (available: {available}).")


def load_snapshot(job: Any, epoch: float | None = None, *, jobs_dir=None):
    """Load a snapshot of a model job as a Keras model.

    Args:
        job: The model job (Job, id or folder).
        epoch: The snapshot's epoch (``1.5`` for a mid-epoch snapshot); ``None`` for the last one.
        jobs_dir: Jobs folder.

    Returns:
        The ``keras.Model`` (not compiled; float32 compute, also for a bfloat16 run). Its inputs expect data prepared with
        :class:`~digits_core.engine.preprocessing.Preprocessing` (``Preprocessing.load(job)``).

    Raises:
        TrainingError: The job has no snapshot (at that epoch).
    """
    import keras

    folder = jobio.model_folder(job, jobs_dir)
    info = jobio.read_model_info(folder)
    snap = find_snapshot(info, epoch, folder.name)
    if info.get("network_source") == "file" and (folder / jobio.NETWORK_COPY).is_file():
        load_network_module(folder / jobio.NETWORK_COPY)  # registers the file's custom layers
    model = keras.models.load_model(folder / jobio.SNAPSHOT_DIR / snap["file"], compile=False, safe_mode=False)
    return as_float32(model)  # a bfloat16 run's snapshot infers and exports in float32 (its weights are float32)


def fine_tune(model, source: str, jobs_dir: Path) -> dict:
    """Copy weights by layer name (and shape) from a model job, a ``.keras`` file or a Keras 2 ``.h5`` file.

    Returns:
        The report stored in ``model.json`` (``loaded``, ``shape_mismatch``, ``not_in_source``).

    Raises:
        TrainingError: The source cannot be read or no layer matches.
    """
    import keras

    path = Path(source).expanduser()
    try:
        if path.is_file() and source.endswith(".weights.h5"):
            raise TrainingError(
                f'pretrained "{source}": Keras 3 ".weights.h5" files store weights by position, not by layer '
                'name; pass the full model saved as ".keras" (model.save("net.keras")), a Keras 2 ".h5" '
                "weights file, or a model job id."
            )
        if path.is_file() and source.endswith(".h5"):
            donor_weights = _read_legacy_h5(path)
        else:
            if path.is_file():
                donor = keras.models.load_model(path, compile=False, safe_mode=False)
            else:
                donor = load_snapshot(source, jobs_dir=jobs_dir)
            donor_weights = {layer.name: layer.get_weights() for layer in donor.layers if layer.weights}
    except DigitsError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise TrainingError(f'pretrained "{source}": cannot read weights: {type(exc).__name__}: {exc}') from exc
    loaded, mismatched, missing = [], [], []
    for layer in model.layers:
        if not layer.weights:
            continue
        weights = donor_weights.get(layer.name)
        if weights is None:
            missing.append(layer.name)
            continue
        if [tuple(w.shape) for w in weights] != [tuple(w.shape) for w in layer.get_weights()]:
            mismatched.append(layer.name)
            continue
        layer.set_weights(weights)
        loaded.append(layer.name)
    if not loaded:
        raise TrainingError(
            f'pretrained "{source}": no layer name and shape matches the network '
            f"(network layers: {', '.join(layer.name for layer in model.layers if layer.weights)})."
        )
    logger.info("fine-tune: loaded %d layers from %s", len(loaded), source)
    return {"source": source, "loaded": loaded, "shape_mismatch": mismatched, "not_in_source": missing}


def _read_legacy_h5(path: Path) -> dict:
    """Layer name -> weight arrays from a Keras 2 HDF5 file (``save_weights("x.h5")`` or a full ``.h5`` model)."""
    import h5py

    found: dict[str, list] = {}
    with h5py.File(path, "r") as handle:
        root = handle.get("model_weights", handle)
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in root.attrs.get("layer_names", [])]
        if not names:
            raise TrainingError(f"{path}: not a Keras 2 HDF5 weights file (no layer_names attribute).")
        for name in names:
            group = root[name]
            weight_names = [w.decode() if isinstance(w, bytes) else str(w) for w in group.attrs.get("weight_names", [])]
            if weight_names:
                found[name] = [group[w][()] for w in weight_names]
    return found
