"""Solvers: DIGITS's solver names mapped to Keras 3 optimizers.

=========  ==========================================================
solver     Keras optimizer
=========  ==========================================================
sgd        ``SGD(momentum=0)``  (DIGITS's default)
momentum   ``SGD(momentum=m)``  (m = ``momentum``, default 0.9)
nesterov   ``SGD(momentum=m, nesterov=True)``
adam       ``Adam``
adamw      ``AdamW``
rmsprop    ``RMSprop(momentum=0, rho=0.9)``
adagrad    ``Adagrad``
adadelta   ``Adadelta``
=========  ==========================================================

``weight_decay`` is Keras's decoupled weight decay
(``w -= lr * weight_decay * w`` each step), which for plain SGD equals an L2
penalty of ``weight_decay / 2 * |w|^2`` as in Caffe. 0 disables it.
"""

from __future__ import annotations

from ..errors import FormValidationError
from .lr_policies import keras_schedule
from .options import SOLVERS


def build_optimizer(solver: str, learning_rate, *, momentum: float = 0.9, weight_decay: float = 0.0):
    """Return a Keras optimizer.

    Args:
        solver: One of :data:`~digits_core.engine.options.SOLVERS`.
        learning_rate: A float or a Keras ``LearningRateSchedule``.
        momentum: Momentum for the momentum solvers.
        weight_decay: Decoupled weight decay; ``0`` disables it.

    Raises:
        FormValidationError: Unknown solver.
    """
    import keras

    wd = float(weight_decay) or None
    opt = keras.optimizers
    if solver == "sgd":
        return opt.SGD(learning_rate, momentum=0.0, weight_decay=wd)
    if solver == "momentum":
        return opt.SGD(learning_rate, momentum=momentum, weight_decay=wd)
    if solver == "nesterov":
        return opt.SGD(learning_rate, momentum=momentum, nesterov=True, weight_decay=wd)
    if solver == "adam":
        return opt.Adam(learning_rate, weight_decay=wd)
    if solver == "adamw":
        return opt.AdamW(learning_rate, weight_decay=float(weight_decay))
    if solver == "rmsprop":
        return opt.RMSprop(learning_rate, weight_decay=wd)
    if solver == "adagrad":
        return opt.Adagrad(learning_rate, weight_decay=wd)
    if solver == "adadelta":
        return opt.Adadelta(learning_rate, weight_decay=wd)
    raise FormValidationError({"solver": [f'unknown solver "{solver}"; choose one of {", ".join(SOLVERS)}']},
                              "training options")


def optimizer_for(options, total_steps: int):
    """Build the optimizer of a :class:`~digits_core.engine.options.TrainingOptions` with its LR schedule."""
    warmup = float(options.lr_warmup_epochs or 0) * total_steps / max(float(options.epochs or 1), 1e-9)
    schedule = keras_schedule(options.learning_rate, options.lr_policy_params(), total_steps,
                              warmup_steps=int(round(warmup)))
    return build_optimizer(options.solver, schedule, momentum=options.momentum, weight_decay=options.weight_decay)
