"""The Keras callback protocol, served by the engine's own loop.

The engine drives training itself (for resume bit-compatibility, fractional
validation/snapshot intervals, cross-worker abort), and calls every method
``keras.callbacks.Callback`` documents, with the logs Keras documents:

* ``set_model(model)`` and ``set_params({"epochs", "steps", "verbose"})`` once, before training;
* ``on_train_begin(logs)``; ``on_epoch_begin(epoch)``;
* ``on_train_batch_begin(batch)``; ``on_train_batch_end(batch, logs)`` with the
  running means over the epoch so far (``loss`` and ``accuracy``/``mae``);
* around each validation: ``on_test_begin``, ``on_test_batch_begin/end(batch, logs)``
  (``batch`` counts validation batches), ``on_test_end(logs)`` with the validation
  metrics *without* the ``val_`` prefix (as ``model.evaluate`` reports them);
* ``on_epoch_end(epoch, logs)``: the epoch's mean ``loss`` and training metric, the
  learning rate ``lr`` and the latest validation metrics (``val_loss``, ``val_accuracy`` ...);
* ``on_train_end(logs)``: the final metrics.

Epochs and batches are 0-based within the run; a resumed run starts at the
epoch it resumes in. Setting ``model.stop_training = True`` stops the run
after the current step (status Done, a snapshot is taken).

**Abort and errors.** An aborted run (``request_abort``, SIGTERM/SIGINT, an
abort on another worker, a progress callback that raised) sets
``model.stop_training = True`` and calls ``on_epoch_end`` for the interrupted
epoch (logs over the steps that ran) and then ``on_train_end``. A run that
fails (e.g. the loss became NaN) calls ``on_train_end`` only. A callback
that raises ends the run in Error.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("digits_core.engine")


class CallbackDriver:
    """Calls a list of Keras callbacks around the engine's loop (see the module docstring).

    Args:
        callbacks: ``keras.callbacks.Callback`` objects (user, then plugin hooks).
        model: The model being trained.
        epochs: Total epochs of the run.
        steps_per_epoch: Optimizer steps per epoch.
    """

    def __init__(self, callbacks: list, model: Any, *, epochs: int, steps_per_epoch: int):
        import keras

        self.active = bool(callbacks)
        self.model = model
        self.callbacks = keras.callbacks.CallbackList(list(callbacks), model=model)
        self.callbacks.set_params({"verbose": 0, "epochs": int(epochs), "steps": int(steps_per_epoch)})
        self.epoch_open: int | None = None
        self.train_ended = False

    def train_begin(self) -> None:
        self.model.stop_training = False
        if self.active:
            self.callbacks.on_train_begin({})

    def epoch_begin(self, epoch: int) -> None:
        self.epoch_open = epoch
        if self.active:
            self.callbacks.on_epoch_begin(epoch, {})

    def batch_begin(self, batch: int) -> None:
        if self.active:
            self.callbacks.on_train_batch_begin(batch, {})

    def batch_end(self, batch: int, logs: dict) -> None:
        if self.active:
            self.callbacks.on_train_batch_end(batch, dict(logs))

    def test_begin(self) -> None:
        if self.active:
            self.callbacks.on_test_begin({})

    def test_batch_begin(self, batch: int) -> None:
        if self.active:
            self.callbacks.on_test_batch_begin(batch, {})

    def test_batch_end(self, batch: int, logs: dict) -> None:
        if self.active:
            self.callbacks.on_test_batch_end(batch, dict(logs))

    def test_end(self, val_logs: dict) -> None:
        if self.active:
            self.callbacks.on_test_end({k[4:] if k.startswith("val_") else k: v for k, v in val_logs.items()})

    def epoch_end(self, epoch: int, logs: dict) -> None:
        self.epoch_open = None
        if self.active:
            self.callbacks.on_epoch_end(epoch, dict(logs))

    def train_end(self, logs: dict) -> None:
        self.train_ended = True
        if self.active:
            self.callbacks.on_train_end(dict(logs))

    def aborted(self, logs: dict) -> None:
        """An abort: close the open epoch, then end training (see the module docstring)."""
        self.model.stop_training = True
        if self.epoch_open is not None:
            self.epoch_end(self.epoch_open, logs)
        self.train_end(logs)

    def failed(self, logs: dict) -> None:
        """A failure: ``on_train_end`` only; an exception raised there is logged, not raised."""
        if self.train_ended or not self.active:
            return
        self.train_ended = True
        try:
            self.callbacks.on_train_end(dict(logs))
        except Exception:  # noqa: BLE001 - the run's own error is the one to report
            logger.exception("a callback failed in on_train_end after a training error")
