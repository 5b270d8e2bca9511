"""Snapshots written off the training thread.

Saving a Keras model is mostly Python work (each layer's config, one HDF5
group per layer): ~0.2 s for the default U-Net, once per epoch, which the
training steps would wait for (17 % of the demo's 30-epoch U-Net run). The
:class:`SnapshotWriter` instead copies the weights and the optimizer state
(a few milliseconds), lets a thread write them through a clone of the
network (the *shadow*, built once) and goes on training.

What a reader sees does not change: the files appear under their final names
only when complete, and a snapshot is listed in ``model.json`` (on the
training thread, so the job's other writes never race it) only after both
are. A write's error (a full disk) is raised on the training thread at the
next snapshot or at the end of the run, as :func:`.snapshots.save_snapshot`
raises it; the run's last snapshot is written synchronously, and the run
never ends with a write in flight. Networks that cannot be cloned
(``keras.models.clone_model`` fails, or the clone's variables differ) and
distributed runs are saved synchronously, as before.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..jobs.model import add_snapshot
from .snapshots import disk_errors, optimizer_arrays, save_snapshot, write_snapshot_files

logger = logging.getLogger("digits_core.engine")


@dataclass
class _Write:
    """One snapshot on its way to disk."""

    epoch: float
    step: int
    weights: list[np.ndarray]
    opt_arrays: list[np.ndarray]
    thread: threading.Thread | None = None
    files: tuple[str, str] | None = None
    error: BaseException | None = field(default=None, repr=False)


class SnapshotWriter:
    """Writes a run's snapshots, off the training thread where it can (see the module docstring).

    Args:
        folder: The model job's folder.
        model: The network being trained.
        optimizer: Its optimizer (state saved beside the model for resume).
        background: Write in a thread; ``False`` writes every snapshot synchronously.
    """

    def __init__(self, folder: Path, model, optimizer, *, background: bool = True) -> None:
        self.folder = folder
        self.model = model
        self.optimizer = optimizer
        self.background = background
        self._shadow: Any = None
        self._pending: _Write | None = None

    def save(self, epoch: float, step: int, *, last: bool = False) -> None:
        """Snapshot the model as it is now, at ``epoch`` / ``step``.

        Waits for the previous snapshot first (raising its error, if any).
        ``last``: the run's final snapshot, written before returning.

        Raises:
            TrainingError: A snapshot could not be written (the disk is full, ...).
        """
        self.wait()
        if last or not self._shadow_ready():
            save_snapshot(self.folder, self.model, self.optimizer, epoch, step)
            return
        write = _Write(
            epoch,
            step,
            weights=[np.array(v.numpy(), copy=True) for v in self.model.variables],
            opt_arrays=optimizer_arrays(self.optimizer),
        )
        write.thread = threading.Thread(target=self._write, args=(write,), name="digits-snapshot-writer", daemon=True)
        self._pending = write
        write.thread.start()

    def poll(self) -> None:
        """List a snapshot whose write has finished (cheap when none has); raises its error."""
        if self._pending is not None and self._pending.thread is not None and not self._pending.thread.is_alive():
            self.wait()

    def wait(self) -> bool:
        """Wait for the snapshot being written, then list it in ``model.json``; raises its error.

        Returns:
            Whether a snapshot was pending.
        """
        write, self._pending = self._pending, None
        if write is None:
            return False
        if write.thread is not None:
            write.thread.join()
        if write.error is not None:
            with disk_errors(self.folder):
                raise write.error
        assert write.files is not None
        with disk_errors(self.folder, unlisted=write.files):
            add_snapshot(self.folder, write.epoch, write.step, *write.files)
        return True

    def close(self, *, quiet: bool = False) -> None:
        """Wait for any write in flight; ``quiet`` logs its error instead of raising (the run failed already)."""
        try:
            self.wait()
        except Exception:
            if not quiet:
                raise
            logger.warning("a snapshot could not be written while the run was ending", exc_info=True)

    # -- internals ---------------------------------------------------------------------------

    def _write(self, write: _Write) -> None:
        try:
            for variable, value in zip(self._shadow.variables, write.weights):
                variable.assign(value)
            write.files = write_snapshot_files(self.folder, self._shadow, write.opt_arrays, write.epoch, write.step)
        except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
            write.error = exc

    def _shadow_ready(self) -> bool:
        """Build the shadow on first use; ``False`` (synchronous writes from now on) when it cannot be."""
        if not self.background:
            return False
        if self._shadow is None:
            self._shadow = self._clone()
            if self._shadow is None:
                self.background = False
                return False
        return True

    def _clone(self):
        import keras

        try:
            shadow = keras.models.clone_model(self.model)
        except Exception as exc:  # noqa: BLE001 - a network Keras cannot clone is saved synchronously
            logger.debug("snapshots stay on the training thread: cannot clone the network (%s)", exc)
            return None
        ours = [(v.path, tuple(v.shape)) for v in self.model.variables]
        theirs = [(v.path, tuple(v.shape)) for v in shadow.variables]
        if ours != theirs or shadow.name != self.model.name:
            logger.debug("snapshots stay on the training thread: the network's clone has other variables")
            return None
        return shadow
