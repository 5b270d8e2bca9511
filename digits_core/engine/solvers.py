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

from typing import Any

from ..errors import FormValidationError
from .lr_policies import keras_schedule

#: Stands for the ``momentum`` option's value in :data:`OPTIMIZERS`.
MOMENTUM = "momentum"

#: Each solver: the Keras optimizer class and its fixed arguments (the docstring's table). The one list of
#: solvers: the ``solver`` option's choices and the solvers ``momentum`` applies to come from it.
OPTIMIZERS: dict[str, tuple[str, dict[str, Any]]] = {
    "sgd": ("SGD", {"momentum": 0.0}),
    "momentum": ("SGD", {"momentum": MOMENTUM}),
    "nesterov": ("SGD", {"momentum": MOMENTUM, "nesterov": True}),
    "adam": ("Adam", {}),
    "adamw": ("AdamW", {}),
    "rmsprop": ("RMSprop", {}),
    "adagrad": ("Adagrad", {}),
    "adadelta": ("Adadelta", {}),
}
SOLVERS: tuple[str, ...] = tuple(OPTIMIZERS)
MOMENTUM_SOLVERS: tuple[str, ...] = tuple(
    name for name, (_, fixed) in OPTIMIZERS.items() if fixed.get("momentum") == MOMENTUM
)


def build_optimizer(solver: str, learning_rate, *, momentum: float = 0.9, weight_decay: float = 0.0):
    """Return a Keras optimizer.

    Args:
        solver: One of :data:`SOLVERS`.
        learning_rate: A float or a Keras ``LearningRateSchedule``.
        momentum: Momentum for the momentum solvers.
        weight_decay: Decoupled weight decay; ``0`` disables it.

    Raises:
        FormValidationError: Unknown solver.
    """
    import keras

    if solver not in OPTIMIZERS:
        raise FormValidationError(
            {"solver": [f'unknown solver "{solver}"; choose one of {", ".join(SOLVERS)}']}, "training options"
        )
    class_name, fixed = OPTIMIZERS[solver]
    kwargs = {key: (momentum if value == MOMENTUM else value) for key, value in fixed.items()}
    # AdamW's own default decay is 0.004: 0 must be passed as 0, where the others take None for "none"
    kwargs["weight_decay"] = float(weight_decay) if class_name == "AdamW" else (float(weight_decay) or None)
    return getattr(keras.optimizers, class_name)(learning_rate, **kwargs)


def optimizer_for(options, total_steps: int):
    """Build the optimizer of a :class:`~digits_core.engine.options.TrainingOptions` with its LR schedule."""
    warmup = float(options.lr_warmup_epochs or 0) * total_steps / max(float(options.epochs or 1), 1e-9)
    schedule = keras_schedule(
        options.learning_rate, options.lr_policy_params(), total_steps, warmup_steps=int(round(warmup))
    )
    return build_optimizer(options.solver, schedule, momentum=options.momentum, weight_decay=options.weight_decay)
