"""Fine-tuning a pretrained backbone: frozen for ``freeze_epochs``, then at ``backbone_lr_mult`` of the rate.

A network that nests its encoder as a layer named ``backbone`` (the backbones
plugin does) and starts from pretrained weights (the ``weights`` option) gets a
:class:`BackboneSchedule`. The train step applies the optimizer's update to
every variable, then moves the backbone's variables only by ``scale`` of
their update: 0 while frozen, ``backbone_lr_mult`` after. For every solver
the update is proportional to the learning rate, so this is the same as a
backbone learning rate of ``backbone_lr_mult × rate``, and the head's rate,
the policy and the optimizer state stay one. The graph is traced once: the
scale is a variable the schedule sets at each epoch's start (a Keras
callback). BatchNorm stays in inference mode (the plugin fixes the encoder's
BatchNorm layers when it loads weights), as Keras's transfer-learning guide
asks.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormValidationError
from .weights import is_none

#: The nested layer whose variables are the backbone's.
BACKBONE_LAYER = "backbone"


def backbone_variables(model: Any) -> list:
    """The trainable variables of ``model``'s layer named ``backbone`` (``[]`` without one)."""
    try:
        layer = model.get_layer(BACKBONE_LAYER)
    except ValueError:
        return []
    return list(layer.trainable_variables)


class BackboneSchedule:
    """The backbone's share of each update, by epoch (see the module docstring).

    Args:
        variables: The backbone's trainable variables.
        freeze_epochs: Epochs with the backbone fixed.
        lr_mult: Its share of the learning rate afterwards.
    """

    def __init__(self, variables: list, freeze_epochs: float, lr_mult: float):
        import tensorflow as tf

        self.variables = variables
        self.freeze_epochs = float(freeze_epochs)
        self.lr_mult = float(lr_mult)
        self.scale = tf.Variable(self.factor(0), trainable=False, dtype=tf.float32, name="backbone_scale")

    def factor(self, epoch: float) -> float:
        """The share at ``epoch`` (0 while frozen)."""
        return 0.0 if epoch < self.freeze_epochs else self.lr_mult

    def at_epoch(self, epoch: float) -> None:
        """Set the share for ``epoch`` (called at each epoch's start, and where a resumed run starts)."""
        value = self.factor(epoch)
        if float(self.scale.numpy()) != value:
            self.scale.assign(value)

    def callback(self) -> Any:
        """A Keras callback that calls :meth:`at_epoch` at each epoch's start."""
        import keras

        schedule = self

        class _Schedule(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                schedule.at_epoch(epoch)

        return _Schedule()


def make_schedule(model: Any, opts: Any, start_epoch: float = 0.0, replicas: int = 1) -> BackboneSchedule | None:
    """The run's schedule, or ``None`` (no backbone, random weights, or nothing to change: no freeze, mult 1).

    Build it under the strategy's scope.

    Raises:
        FormValidationError: A schedule over several replicas (its variable updates run per replica:
            not supported yet), naming the two options that turn it off.
    """
    if is_none(getattr(opts, "weights", None)):
        return None
    if float(opts.freeze_epochs) <= 0 and float(opts.backbone_lr_mult) == 1.0:
        return None
    variables = backbone_variables(model)
    if not variables:
        return None
    if replicas > 1:
        raise FormValidationError(
            {
                "freeze_epochs": [
                    f"a frozen or slowed backbone trains on one replica, not {replicas}: set freeze_epochs 0 and "
                    "backbone_lr_mult 1, or train on one device"
                ]
            },
            "training options",
        )
    schedule = BackboneSchedule(variables, opts.freeze_epochs, opts.backbone_lr_mult)
    schedule.at_epoch(start_epoch)
    return schedule


def scaled_apply(optimizer: Any, grads: list, variables: list, schedule: BackboneSchedule | None) -> None:
    """``optimizer.apply_gradients``, the backbone's variables moved by ``schedule.scale`` of their update."""
    import tensorflow as tf

    if schedule is None:
        optimizer.apply_gradients(zip(grads, variables))
        return
    before = [tf.identity(v.value if hasattr(v, "value") else v) for v in schedule.variables]
    optimizer.apply_gradients(zip(grads, variables))
    for var, old in zip(schedule.variables, before, strict=True):
        var.assign(old + schedule.scale * (var.value - old))
