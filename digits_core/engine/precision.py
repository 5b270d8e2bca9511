"""The ``precision`` training option: float32, or bfloat16 compute where the hardware has it.

``precision="bfloat16"`` builds the network under Keras's ``mixed_bfloat16`` policy (bfloat16
compute, float32 variables) with the layers that produce the model's outputs in float32, as Keras's
mixed-precision guide asks; the train step computes the loss on float32 predictions. No loss
scaling: bfloat16 has float32's exponent range.

It is refused on hardware without native bfloat16 (TensorFlow emulates it there, up to 60 times
slower than float32, tensorflow#45441): a CPU needs ``avx512_bf16`` or ``amx_bf16`` among its flags
(``/proc/cpuinfo``), GPUs compute capability 8.0 or later (Ampere). :data:`FORCE_ENV` set to ``1`` in
the environment of the process that trains lets it run anyway (to check the numbers, not for speed).
The check runs where the job trains, so a job queued on another machine is judged by that machine.

The policy is set only while the model is built and restored afterwards (:func:`policy_scope`): a
process that runs several jobs (the web server's executors, the Python API) never carries one
job's policy into the next. Snapshots keep the trained layers' policies (a resumed run trains as it
started); :func:`as_float32` turns a loaded snapshot into a float32 model for inference and export
(the variables are float32 already, so nothing is rounded).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import FormValidationError

#: The values of the ``precision`` option, the default first.
PRECISIONS = ("float32", "bfloat16")
#: CPU flags (``/proc/cpuinfo``) that mean native bfloat16 arithmetic.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
#: Environment variable that lets ``precision=bfloat16`` run without native support (``1``).
FORCE_ENV = "DIGITS_FORCE_BF16"
#: The first GPU compute capability with bfloat16 arithmetic (Ampere).
BF16_GPU_CAPABILITY = (8, 0)


def cpu_flags(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags as the kernel lists them; empty where the file is missing (not Linux)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


def bf16_missing(flags: Iterable[str], gpu_capabilities: Sequence[tuple[int, int]] = ()) -> str | None:
    """Why bfloat16 would be emulated on this hardware, or ``None`` when it is native.

    Args:
        flags: The CPU's feature flags (:func:`cpu_flags`).
        gpu_capabilities: The compute capability of each GPU the job trains on (empty: it trains on the CPU).
    """
    if gpu_capabilities:
        old = [f"{major}.{minor}" for major, minor in gpu_capabilities if (major, minor) < BF16_GPU_CAPABILITY]
        if not old:
            return None
        return f"GPU compute capability {', '.join(old)} has no bfloat16 arithmetic (8.0 or later has)"
    if set(flags) & set(BF16_CPU_FLAGS):
        return None
    return f"this CPU has no native bfloat16 ({' or '.join(BF16_CPU_FLAGS)} not among its flags)"


def check_precision(
    precision: str,
    *,
    flags: Iterable[str] | None = None,
    gpu_capabilities: Sequence[tuple[int, int]] = (),
    environ: dict | None = None,
) -> None:
    """Refuse ``precision="bfloat16"`` on hardware that would emulate it, unless :data:`FORCE_ENV` is ``1``.

    Args:
        precision: The option's value.
        flags: CPU flags; ``None`` reads :func:`cpu_flags`.
        gpu_capabilities: Compute capabilities of the GPUs the job trains on.
        environ: The environment (``None``: ``os.environ``).

    Raises:
        FormValidationError: On the ``precision`` field, naming the reason and the way out.
    """
    if precision != "bfloat16":
        return
    reason = bf16_missing(cpu_flags() if flags is None else flags, gpu_capabilities)
    if reason is None or (os.environ if environ is None else environ).get(FORCE_ENV) == "1":
        return
    raise FormValidationError(
        {
            "precision": [
                f"bfloat16 needs native hardware support: {reason}, and emulated bfloat16 is many times slower than "
                f"float32 (tensorflow#45441). Use precision float32, or set {FORCE_ENV}=1 where the job trains to "
                "run it anyway."
            ]
        },
        "training options",
    )


def check_hardware(precision: str, mixed_float16: bool = False) -> None:
    """The hardware checks of a run's precision, where it trains: float16 needs a GPU, bfloat16 native support.

    Raises:
        FormValidationError: On ``mixed_precision`` or ``precision``.
    """
    if not mixed_float16 and precision == "float32":
        return
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if mixed_float16 and not gpus:
        raise FormValidationError(
            {"mixed_precision": ["needs a GPU (float16 on a CPU is slower than float32); this machine has none"]},
            "training options",
        )
    capabilities = []
    for device in gpus:  # a GPU that reports no capability counts as 0.0
        details = tf.config.experimental.get_device_details(device) or {}
        capabilities.append(tuple(details.get("compute_capability") or (0, 0)))
    check_precision(precision, gpu_capabilities=capabilities)


def policy_name(precision: str, mixed_float16: bool = False) -> str | None:
    """The Keras dtype policy a run builds its model under, or ``None`` for Keras's default (float32)."""
    if mixed_float16:
        return "mixed_float16"
    return "mixed_bfloat16" if precision == "bfloat16" else None


@contextmanager
def policy_scope(name: str | None) -> Iterator[None]:
    """Keras's global dtype policy set to ``name`` inside the block, the previous one restored after it (errors too).

    Keras keeps the policy per thread; a job builds its model in one thread, so restoring it there is enough.
    """
    if name is None:
        yield
        return
    import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def float32_outputs(model: Any) -> Any:
    """Make the layers that produce ``model``'s outputs compute in float32 (softmax and loss in float32).

    A functional model's output layers get the ``float32`` policy; the train step also casts predictions
    to float32, which covers a subclassed model.
    """
    import keras

    for tensor in keras.tree.flatten(getattr(model, "outputs", None) or []):
        history = getattr(tensor, "_keras_history", None)
        if history is not None and history[0].dtype_policy.compute_dtype != "float32":
            history[0].dtype_policy = "float32"
    return model


def as_float32(model: Any) -> Any:
    """Turn the bfloat16 layers of ``model`` (a loaded snapshot) to float32 compute, in place; returns ``model``.

    Other models are returned unchanged (a ``mixed_float16`` GPU run's snapshot keeps float16, as before).
    Mixed-precision variables are float32, so the weights are exact.
    """
    for layer in model._flatten_layers(include_self=True):
        policy = layer.dtype_policy
        if policy.compute_dtype == "bfloat16" and policy.variable_dtype == "float32" and not policy.quantization_mode:
            layer.dtype_policy = "float32"
    return model
