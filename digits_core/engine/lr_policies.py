"""Learning-rate policies of Caffe/DIGITS, as formulas and as Keras schedules.

The unit of ``it``
------------------
DIGITS expressed step positions as a percentage of the whole training; we
use that unit **everywhere**: ``it`` is the training progress in percent,
``it = 100 * step / total_steps`` (a float, updated at every optimizer
step), so ``it`` runs from 0 to 100 whatever the dataset size, batch size
or number of epochs. The parameters therefore mean:

===========  =========================================  ==========================
policy       formula                                    defaults
===========  =========================================  ==========================
fixed        ``lr``
step         ``lr * gamma ** floor(it / step_size)``    step_size 33 (%), gamma 0.1
multistep    ``lr * gamma ** k``, k = number of          step_values "50,85" (%),
             ``step_values`` that ``it`` has reached     gamma 0.5
exp          ``lr * gamma ** it``                       gamma 0.95
inv          ``lr * (1 + gamma * it) ** -power``        gamma 0.1, power 0.5
poly         ``lr * (1 - it / 100) ** power``           power 3
sigmoid      ``lr / (1 + exp(gamma * (it - step_size)))``  step_size 50 (%), gamma 0.1
===========  =========================================  ==========================

Sigmoid is a *decay* with a positive gamma: ``+gamma`` is what DIGITS 6
computed, both in its LR preview (``digits/model/views.py``) and in its
TensorFlow backend (``digits/tools/tensorflow/lr_policy.py``). Caffe's and
DIGITS's docstrings write ``-gamma``, which with the default gamma 0.1 makes
the rate *rise* from ~0 to ``lr``; a negative gamma gives that rising curve.

:func:`lr_schedule_preview` evaluates the very function the optimizer uses
(:func:`learning_rate_at`), so the preview is the real schedule. This module
imports numpy only; :func:`keras_schedule` imports Keras when called.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import FormValidationError

POLICIES = ("fixed", "step", "multistep", "exp", "inv", "poly", "sigmoid")

#: DIGITS's defaults for each policy's parameters.
DEFAULTS: dict[str, dict[str, Any]] = {
    "fixed": {},
    "step": {"step_size": 33.0, "gamma": 0.1},
    "multistep": {"step_values": (50.0, 85.0), "gamma": 0.5},
    "exp": {"gamma": 0.95},
    "inv": {"gamma": 0.1, "power": 0.5},
    "poly": {"power": 3.0},
    "sigmoid": {"step_size": 50.0, "gamma": 0.1},
}

#: Every policy parameter, in the order the policies above name them; the training option of
#: parameter ``p`` is ``lr_<p>``, and it applies to :func:`policies_using` ``p`` (said here only).
PARAMETERS: tuple[str, ...] = tuple(dict.fromkeys(name for params in DEFAULTS.values() for name in params))


def policies_using(parameter: str) -> tuple[str, ...]:
    """The policies that take ``parameter`` (``"gamma"``, ``"step_size"``...), in :data:`POLICIES` order."""
    return tuple(policy for policy in POLICIES if parameter in DEFAULTS[policy])


def defaults_text(parameter: str, *, named: bool = True) -> str:
    """The policies' defaults of ``parameter`` for help texts: ``step 0.1, exp 0.95`` (or ``33 / 50``)."""

    def shown(value: Any) -> str:
        return ",".join(f"{v:g}" for v in value) if isinstance(value, tuple) else f"{value:g}"

    values = [(policy, shown(DEFAULTS[policy][parameter])) for policy in policies_using(parameter)]
    return ", ".join(f"{p} {v}" for p, v in values) if named else " / ".join(v for _, v in values)


def _parse_step_values(value) -> tuple[float, ...]:
    parts = [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else list(value)
    try:
        values = tuple(sorted(float(p) for p in parts))
        if not all(0 <= v <= 100 for v in values):  # also refuses nan and inf
            raise FormValidationError(
                {"lr_step_values": [f'{value!r}: step values are percentages of training, 0 to 100, e.g. "50,85"']},
                "training options",
            )
    except (TypeError, ValueError):
        raise FormValidationError(
            {"lr_step_values": [f'{value!r} is not a comma-separated list of percentages, e.g. "50,85"']},
            "training options",
        ) from None
    if not values:
        raise FormValidationError(
            {"lr_step_values": ['give at least one percentage, e.g. "50,85"']}, "training options"
        )
    return values


def resolve_policy(policy: str = "step", **params: Any) -> dict[str, Any]:
    """Validate a policy and its parameters, filling DIGITS's defaults.

    Args:
        policy: One of :data:`POLICIES`.
        **params: ``step_size`` (percent), ``gamma``, ``power`` or
            ``step_values`` (percentages, list or ``"50,85"``). ``None``
            values take the default; parameters the policy does not use are
            ignored.

    Returns:
        ``{"policy": ..., <parameters>}`` with floats (``step_values`` a list).

    Raises:
        FormValidationError: Unknown policy or a bad parameter value.
    """
    policy = (policy or "step").lower()
    if policy not in POLICIES:
        raise FormValidationError(
            {"lr_policy": [f'unknown policy "{policy}"; choose one of {", ".join(POLICIES)}']}, "training options"
        )
    resolved: dict[str, Any] = {"policy": policy}
    for key, default in DEFAULTS[policy].items():
        value = params.get(key)
        if value is None:
            value = default
        if key == "step_values":
            resolved[key] = list(_parse_step_values(value))
            continue
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise FormValidationError({f"lr_{key}": [f"{value!r} is not a number"]}, "training options") from None
        if not math.isfinite(value):
            raise FormValidationError({f"lr_{key}": [f"{value!r} is not a finite number"]}, "training options")
        if key == "step_size" and value <= 0:
            raise FormValidationError({"lr_step_size": ["must be a positive percentage"]}, "training options")
        rule = _RULES.get((policy, key))
        if rule is not None and not rule[0](value):
            raise FormValidationError({f"lr_{key}": [f"{policy}: {key} {value:g} {rule[1]}"]}, "training options")
        resolved[key] = value
    return resolved


#: (policy, parameter) -> (test, what it must be): values that would make the rate negative,
#: NaN or infinite during the run are refused (a sigmoid's gamma may be negative: it then rises).
_RULES = {
    ("step", "gamma"): (lambda v: v > 0, "must be above 0, e.g. 0.1 (the rate is multiplied by it at each step)"),
    ("multistep", "gamma"): (
        lambda v: v > 0,
        "must be above 0, e.g. 0.5 (the rate is multiplied by it at each step value)",
    ),
    ("exp", "gamma"): (
        lambda v: v > 0,
        "must be above 0, e.g. 0.95 (the rate is multiplied by it at each % of training)",
    ),
    ("inv", "gamma"): (lambda v: v >= 0, "must be 0 or more, e.g. 0.1 (1 + gamma × progress must stay above 0)"),
    ("poly", "power"): (
        lambda v: v >= 0,
        "must be 0 or more, e.g. 3 (a negative power makes the rate infinite at the end)",
    ),
}


def learning_rate_at(progress_percent, base_lr: float, policy: dict[str, Any], xp=np):
    """Return the learning rate at a training progress (in percent, 0-100).

    Args:
        progress_percent: ``it``: scalar or array of progress in percent.
        base_lr: The base learning rate.
        policy: A dict from :func:`resolve_policy`.
        xp: The array module: ``numpy``, or ``tensorflow.math``-compatible
            functions passed by :func:`keras_schedule`.

    Returns:
        The learning rate(s), same shape as ``progress_percent``.
    """
    it = progress_percent
    name = policy["policy"]
    if name == "fixed":
        return base_lr * xp.ones_like(it)
    if name == "step":
        return base_lr * policy["gamma"] ** xp.floor(it / policy["step_size"])
    if name == "multistep":
        k = 0.0
        for value in policy["step_values"]:
            k = k + xp.where(it >= value, 1.0, 0.0)
        return base_lr * policy["gamma"] ** k
    if name == "exp":
        return base_lr * policy["gamma"] ** it
    if name == "inv":
        return base_lr * (1.0 + policy["gamma"] * it) ** (-policy["power"])
    if name == "poly":
        return base_lr * xp.maximum(1.0 - it / 100.0, 0.0) ** policy["power"]
    if name == "sigmoid":
        return base_lr / (1.0 + xp.exp(policy["gamma"] * (it - policy["step_size"])))
    raise ValueError(name)


def lr_schedule_preview(
    total_steps: int = 100,
    *,
    learning_rate: float = 0.01,
    lr_policy: str = "step",
    points: int = 101,
    plot: str | None = None,
    **params: Any,
) -> list[dict]:
    """Return (and optionally plot) the learning rate over a whole training run.

    Args:
        total_steps: Optimizer steps of the run (epochs x steps per epoch).
        learning_rate: Base learning rate.
        lr_policy: Policy name (see module docstring).
        points: How many evenly spaced steps to evaluate (first and last included).
        plot: Write a PNG plot of the schedule to this path (uses Pillow).
        **params: Policy parameters (``step_size``, ``gamma``, ``power``, ``step_values``).

    Returns:
        ``[{"step": int, "progress": percent, "lr": float}, ...]``.
    """
    policy = resolve_policy(lr_policy, **params)
    total_steps = max(int(total_steps), 1)
    steps = np.unique(np.linspace(0, total_steps, max(int(points), 2)).round().astype(np.int64))
    progress = 100.0 * steps.astype(np.float64) / total_steps
    lrs = learning_rate_at(progress, float(learning_rate), policy)
    rows = [{"step": int(s), "progress": float(p), "lr": float(v)} for s, p, v in zip(steps, progress, lrs)]
    if plot:
        plot_schedule(
            dense_schedule(total_steps, float(learning_rate), policy),
            plot,
            title=f"{policy['policy']} (base lr {learning_rate:g})",
        )
    return rows


#: The plot evaluates every step up to this many steps, else this many evenly spaced ones.
PLOT_SAMPLES = 4096


def dense_schedule(total_steps: int, learning_rate: float, policy: dict[str, Any]) -> list[dict]:
    """The rate the optimizer uses at every step (or :data:`PLOT_SAMPLES` evenly spaced steps of long runs).

    Rows are ``{"step", "progress", "lr"}`` like :func:`lr_schedule_preview`'s.
    """
    total_steps = max(int(total_steps), 1)
    steps = np.unique(np.linspace(0, total_steps, min(total_steps + 1, PLOT_SAMPLES)).round().astype(np.int64))
    progress = 100.0 * steps.astype(np.float64) / total_steps
    lrs = learning_rate_at(progress, learning_rate, policy)
    return [{"step": int(s), "progress": float(p), "lr": float(v)} for s, p, v in zip(steps, progress, lrs)]


def plot_schedule(rows: Sequence[dict], path: str, title: str = "") -> None:
    """Draw a learning-rate schedule as a PNG plot (Pillow only, no matplotlib).

    The rate is held from one row to the next and changes vertically (a
    staircase), as the optimizer applies it per step: a multistep drop is a
    step, never a ramp. Pass dense rows (:func:`dense_schedule`).
    """
    from PIL import Image, ImageDraw

    width, height, margin = 640, 360, 50
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    xs = [r["progress"] for r in rows]
    ys = [r["lr"] for r in rows]
    top = max(ys) or 1.0

    def to_px(x, y):
        return (margin + (width - 2 * margin) * x / 100.0, height - margin - (height - 2 * margin) * (y / top))

    draw.rectangle([margin, margin, width - margin, height - margin], outline="black")
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        x, _ = to_px(100 * frac, 0)
        draw.text((x - 10, height - margin + 5), f"{int(100 * frac)}%", fill="black")
        _, y = to_px(0, top * frac)
        draw.text((2, y - 6), f"{top * frac:.2g}", fill="black")
    stairs = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        if i:
            stairs.append(to_px(x, ys[i - 1]))  # hold the previous rate up to this step
        stairs.append(to_px(x, y))
    draw.line(stairs, fill=(31, 119, 180), width=2)
    draw.text((margin, 15), f"learning rate: {title}", fill="black")
    draw.text((width // 2 - 60, height - 20), "training progress", fill="black")
    image.save(path, format="PNG")


def keras_schedule(base_lr: float, policy: dict[str, Any], total_steps: int, warmup_steps: int = 0):
    """Return a ``keras.optimizers.schedules.LearningRateSchedule`` for the policy.

    The optimizer's iteration counter is the step; ``it = 100 * step / total_steps``.
    ``warmup_steps`` > 0: the rate is multiplied by ``(step + 1) / warmup_steps`` until it reaches 1.
    """
    import keras
    import tensorflow as tf

    class _TFMath:
        ones_like = staticmethod(tf.ones_like)
        floor = staticmethod(tf.floor)
        exp = staticmethod(tf.exp)
        maximum = staticmethod(tf.maximum)

        @staticmethod
        def where(cond, a, b):
            return tf.where(cond, tf.constant(a, tf.float32), tf.constant(b, tf.float32))

    class DigitsLRSchedule(keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self, base_lr, policy, total_steps, warmup_steps=0):
            self.base_lr = float(base_lr)
            self.policy = dict(policy)
            self.total_steps = int(total_steps)
            self.warmup_steps = int(warmup_steps)

        def __call__(self, step):
            step = tf.cast(step, tf.float32)
            it = 100.0 * step / float(max(self.total_steps, 1))
            rate = tf.cast(learning_rate_at(it, self.base_lr, self.policy, xp=_TFMath), tf.float32)
            if self.warmup_steps > 0:
                rate = rate * tf.minimum(1.0, (step + 1.0) / float(self.warmup_steps))
            return rate

        def get_config(self):
            return {
                "base_lr": self.base_lr,
                "policy": self.policy,
                "total_steps": self.total_steps,
                "warmup_steps": self.warmup_steps,
            }

    return DigitsLRSchedule(base_lr, policy, total_steps, warmup_steps)


def describe(policy: dict[str, Any]) -> str:
    """One-line description of a resolved policy, for logs."""
    params = ", ".join(f"{k}={v}" for k, v in policy.items() if k != "policy")
    return f"{policy['policy']}({params})" if params else policy["policy"]


__all__ = [
    "POLICIES",
    "DEFAULTS",
    "PARAMETERS",
    "policies_using",
    "defaults_text",
    "resolve_policy",
    "learning_rate_at",
    "lr_schedule_preview",
    "dense_schedule",
    "keras_schedule",
    "plot_schedule",
    "describe",
]
