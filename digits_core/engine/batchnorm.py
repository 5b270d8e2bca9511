"""BatchNormalization momentum fitted to the run's steps per epoch (built-in and plugin networks).

Keras's default momentum 0.99 keeps 0.99^k of the initial statistics after
``k`` steps: a short run on a small set (48 images, batch 16: 3 steps an
epoch) validates and exports a model whose inference-mode statistics are
still mostly the initial ones, so it predicts background (segmentation) or
nothing (detection) for many epochs although training is going well; a
``keras.applications`` backbone (momentum 0.999) trained from random weights
validated at chance for a whole short run. The engine therefore sets the
momentum of the BatchNormalization layers of every network it builds from the
registry (built-in or a plugin's; a network file of the user's own keeps its
own) so that the statistics of one epoch ago keep at most
:data:`STALE_AFTER_EPOCH` of their weight (never above Keras's 0.99, never
below :data:`MIN_MOMENTUM`).
"""

from __future__ import annotations

#: Weight the moving statistics keep from before the last epoch.
STALE_AFTER_EPOCH = 0.1
#: Keras's default and the upper bound (long epochs).
MAX_MOMENTUM = 0.99
#: Lower bound (very short epochs: one batch's statistics alone are noisy).
MIN_MOMENTUM = 0.3


def momentum_for(steps_per_epoch: int) -> float:
    """The momentum for epochs of ``steps_per_epoch`` steps: ``STALE_AFTER_EPOCH ** (1 / steps)``, bounded."""
    steps = max(int(steps_per_epoch), 1)
    return min(MAX_MOMENTUM, max(MIN_MOMENTUM, STALE_AFTER_EPOCH ** (1.0 / steps)))


def fit_batchnorm_momentum(model, steps_per_epoch: int) -> float | None:
    """Set every BatchNormalization layer of ``model`` (nested models too) to :func:`momentum_for`.

    Returns:
        The momentum set, or ``None`` when the model has no BatchNormalization layer.
    """
    import keras

    momentum = momentum_for(steps_per_epoch)
    found = False
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = momentum
            found = True
    return momentum if found else None
