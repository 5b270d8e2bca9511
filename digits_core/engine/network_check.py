"""The network plugin contract checked on a registered network (``digits plugin check NAME``).

A network plugin registers ``build_model(input_shape, num_outputs, **params)`` callables through the
``digits_register_networks`` hook, their metadata declared as attributes (read without TensorFlow by
:func:`digits_core.engine.networks.plugin_networks`). The check:

* **metadata**: declared tasks are known tasks, layouts are ``image`` or ``volume``, ``min_size`` and
  ``batch_size`` are sensible numbers, every ``defaults`` key (and ``by_task`` entry) is a training option
  of a declared task, and every ``weights`` entry names a file and a hash (MD5 or SHA-256);
* **builds**: for each declared task (or the one asked for), the model built for the given shape (default:
  the declared minimum, at least 32×32, 3 channels) is a Keras model whose input is that shape and whose
  output is the task's (the engine's own rule, as when training); with one channel too;
* **minimum size honoured**: a network declaring ``min_size`` builds at exactly that size, and below it
  with the network parameter ``input_size`` (resized in the graph) when it accepts one; a network
  declaring none builds at 8×8, or is told to declare its minimum.

Models are built with random weights (no file is read or downloaded). TensorFlow loads here.
"""

from __future__ import annotations

import re
import traceback
from typing import Any

from ..plugins.check import FAILED, OK, SKIPPED, WARNING, CheckReport
from .networks import NetworkSpec, resolve_network
from .networks.custom import call_builder
from .option_specs import BY_NAME
from .tasks import TASKS, task_named

#: The outputs the check asks for (classes, regression values).
NUM_OUTPUTS = 3
#: Size a network declaring no minimum must build at.
SMALL = 8
_HASH = re.compile(r"^([0-9a-f]{32}|[0-9a-f]{64})$")
#: Option names a network's defaults may also set (not training options of the form).
_EXTRA_DEFAULTS = ("by_task",)


def _metadata(spec: NetworkSpec, report: CheckReport) -> None:
    unknown = [t for t in spec.tasks if t not in TASKS]
    report.add(
        "tasks",
        FAILED if unknown or not spec.tasks else OK,
        f"unknown task(s) {', '.join(unknown)}; known: {', '.join(sorted(TASKS))}"
        if unknown
        else ("declares no tasks: set build_model.tasks" if not spec.tasks else ", ".join(spec.tasks)),
    )
    bad_layouts = [x for x in spec.layouts if x not in ("image", "volume")]
    report.add("layouts", FAILED if bad_layouts else OK, f"unknown layout(s) {bad_layouts}" if bad_layouts else "")
    numbers = []
    if spec.min_size < 0:
        numbers.append(f"min_size {spec.min_size} is negative")
    if spec.batch_size < 1:
        numbers.append(f"batch_size {spec.batch_size} is not positive")
    report.add("min_size and batch_size", FAILED if numbers else OK, "; ".join(numbers))
    problems = [
        f"defaults: {k} is not a training option" for k in spec.defaults if k not in (*BY_NAME, *_EXTRA_DEFAULTS)
    ]
    by_task = spec.defaults.get("by_task") or {}
    for task, values in by_task.items() if isinstance(by_task, dict) else ():
        if task not in spec.tasks:
            problems.append(f"defaults.by_task: {task} is not one of its tasks")
        problems += [f"defaults.by_task.{task}: {k} is not a training option" for k in values or {} if k not in BY_NAME]
    report.add("defaults", FAILED if problems else OK, "; ".join(problems))
    bad = [
        name
        for name, entry in spec.weights.items()
        if not isinstance(entry, dict) or not entry.get("file") or not _HASH.match(str(entry.get("hash") or ""))
    ]
    report.add(
        "weights table",
        FAILED if bad else OK,
        f"entries {', '.join(bad)} need a file name and its MD5 or SHA-256 hash" if bad else "",
    )


def _build(spec: NetworkSpec, task: str, shape: tuple, params: dict) -> tuple[Any, str | None]:
    """The model built for ``task`` at ``shape``, and the problem with it (``None``: fits the task)."""
    import keras

    keras.backend.clear_session()  # models of the earlier checks would pile up in memory
    if len(spec.tasks) > 1:
        params = {"task": task, **params}
    model, loss, _ = call_builder(spec.build, shape, NUM_OUTPUTS, params, origin=spec.name)
    got_in = tuple(model.inputs[0].shape[1:])
    if got_in != tuple(shape):
        return model, f"input {got_in}, not the {shape} it was asked for"
    expected = tuple(task_named(task).output_shape(tuple(shape), NUM_OUTPUTS))
    got = tuple(model.outputs[0].shape[1:])
    if got != expected and loss is None:
        return model, f"output {got}; {task} with {NUM_OUTPUTS} outputs expects {expected} (or return its own loss)"
    return model, None


def _try(report: CheckReport, name: str, spec: NetworkSpec, task: str, shape: tuple, params: dict) -> str:
    """Build and record the outcome: ``"ok"``, ``"wrong"`` (built, but not the task's shapes) or ``"raised"``."""
    try:
        model, problem = _build(spec, task, shape, params)
    except Exception as exc:  # noqa: BLE001 - a plugin's builder may raise anything: reported
        report.add(
            name,
            FAILED,
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
            traceback.format_exc(limit=6),
        )
        return "raised"
    report.add(name, FAILED if problem else OK, problem or f"{model.count_params():,} parameters")
    return "wrong" if problem else "ok"


def check_network(name: str, *, shape: tuple[int, ...] | None = None, task: str | None = None) -> CheckReport:
    """Run the network plugin contract on the registered network ``name``.

    Args:
        name: A network name (``digits networks`` lists them).
        shape: ``(H, W, C)`` to build for (default: the declared minimum, at least 32, square, 3 channels).
        task: Check this task only (default: every declared task).

    Returns:
        A :class:`~digits_core.plugins.check.CheckReport` of kind ``"network"``.

    Raises:
        TrainingError: No network of that name.
    """
    spec = resolve_network(name)
    report = CheckReport(spec.name, "network")
    _metadata(spec, report)
    if "image" not in spec.layouts:
        report.add("builds", SKIPPED, "volume networks are checked by training them (digits train)")
        return report
    tasks = [task] if task else [t for t in spec.tasks if t in TASKS]
    if task and spec.tasks and task not in spec.tasks:
        report.add("task", FAILED, f"{spec.name} does not declare {task} (declared: {', '.join(spec.tasks)})")
        return report
    side = max(spec.min_size, 32)
    size: tuple[int, ...] = tuple(shape) if shape else (side, side, 3)
    built = []
    for t in tasks:
        if _try(report, f"builds for {t} at {'x'.join(map(str, size))}", spec, t, size, {}) == "ok":
            built.append(t)
            _try(report, f"builds for {t} with 1 channel", spec, t, (*size[:2], 1), {})
    first = built[0] if built else None
    if first is None:
        report.add("minimum size", SKIPPED, "no task it builds for at the given size")
    elif spec.min_size:
        at_min = (spec.min_size, spec.min_size, size[2])
        _try(report, f"builds at its declared minimum {spec.min_size}x{spec.min_size}", spec, first, at_min, {})
        below = (max(1, spec.min_size // 2), max(1, spec.min_size // 2), size[2])
        if (
            _try(report, "resizes a smaller input with input_size", spec, first, below, {"input_size": spec.min_size})
            != "ok"
        ):
            report.checks[-1].status = WARNING
            report.checks[-1].message += (
                " (optional: accept the network parameter input_size to resize in the graph; users then get "
                "the advice the engine gives for small images)"
            )
    else:
        small = (SMALL, SMALL, size[2])
        if _try(report, f"builds at {SMALL}x{SMALL} (no min_size declared)", spec, first, small, {}) == "raised":
            report.checks[-1].message += "; declare the smallest size it takes: build_model.min_size = N"
    return report
