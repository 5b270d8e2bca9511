"""Early stopping: end a run whose validation metric stopped improving.

Declared as training options (``early_stopping_metric``, ``_mode``,
``_patience``, ``_min_delta``, ``_restore_best`` in :mod:`.option_specs`), so
every front door has it. The training loop feeds every validation to
:meth:`EarlyStopping.observe`; once the metric has not improved by more than
``min_delta`` for ``patience`` epochs the run stops (status Done), the best
weights are put back when ``restore_best`` is set (the last snapshot then
holds them: that is the model's result), and :attr:`EarlyStopping.note` says
what happened ("stopped early at epoch N (best M at epoch K)"). No TensorFlow here.
"""

from __future__ import annotations

from typing import Any

from ..errors import TrainingError

#: Metric names containing one of these get better as they go down (mode ``auto``).
_LOWER_IS_BETTER = ("loss", "error", "mae", "mse", "rmse", "hd95", "distance")


def direction(metric: str, mode: str) -> str:
    """``"min"`` or ``"max"``: ``mode`` itself, or for ``auto`` the one the metric's name implies."""
    if mode in ("min", "max"):
        return mode
    return "min" if any(word in metric.lower() for word in _LOWER_IS_BETTER) else "max"


class EarlyStopping:
    """Watches one validation metric; says when to stop (see the module docstring).

    Args:
        metric: A logged validation metric (``val_loss``, ``val_accuracy`` ...).
        mode: ``min``, ``max`` or ``auto``.
        patience: Epochs without improvement before stopping.
        min_delta: Smallest change that counts as an improvement.
        restore_best: Keep a copy of the best weights and restore them on stopping.
    """

    def __init__(
        self, metric: str, mode: str = "auto", patience: int = 5, min_delta: float = 0.0, restore_best: bool = True
    ):
        self.metric = metric
        self.mode = direction(metric, mode)
        self.patience = int(patience)
        self.min_delta = float(min_delta)
        self.restore_best = restore_best
        self.best: float | None = None
        self.best_epoch: float | None = None
        self.best_weights: list | None = None
        self.stopped_epoch: float | None = None

    @classmethod
    def from_options(cls, opts: Any) -> EarlyStopping | None:
        """The early stopping ``opts`` ask for, or ``None`` (no ``early_stopping_metric``)."""
        metric = (opts.early_stopping_metric or "").strip()
        if not metric:
            return None
        return cls(
            metric,
            opts.early_stopping_mode,
            opts.early_stopping_patience,
            opts.early_stopping_min_delta,
            opts.early_stopping_restore_best,
        )

    def _improved(self, value: float) -> bool:
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def observe(self, epoch: float, values: dict, model: Any) -> bool:
        """Take one validation's metrics; True when the run should stop now.

        Raises:
            TrainingError: The metric is not among the validation's metrics (names the ones there are).
        """
        if self.metric not in values:
            known = ", ".join(sorted(k for k in values if k.startswith("val_")))
            raise TrainingError(
                f'early_stopping_metric "{self.metric}" is not a validation metric of this run; choose one of {known}'
            )
        value = float(values[self.metric])
        if self._improved(value):
            self.best, self.best_epoch = value, epoch
            if self.restore_best:
                self.best_weights = [w.copy() for w in model.get_weights()]
            return False
        assert self.best_epoch is not None
        if epoch - self.best_epoch < self.patience - 1e-6:
            return False
        self.stopped_epoch = epoch
        if self.restore_best and self.best_weights is not None:
            model.set_weights(self.best_weights)
        return True

    @property
    def note(self) -> str:
        """What the job's status note says after a stop."""
        restored = "; best weights restored" if self.restore_best else ""
        return (
            f"stopped early at epoch {self.stopped_epoch:g} (best {self.metric} {self.best:.6g} at epoch "
            f"{self.best_epoch:g}){restored}"
        )

    def summary(self) -> dict:
        """The ``model.json`` record of a stop (key ``early_stopping``)."""
        return {
            "metric": self.metric,
            "mode": self.mode,
            "patience": self.patience,
            "min_delta": self.min_delta,
            "stopped_epoch": self.stopped_epoch,
            "best_epoch": self.best_epoch,
            "best_value": self.best,
            "restored_best": bool(self.restore_best and self.best_weights is not None),
            "note": self.note,
        }
