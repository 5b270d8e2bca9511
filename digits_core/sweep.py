"""Hyper-parameter sweeps: several values of an option make one training job per combination.

DIGITS 6 let a user type several comma-separated learning rates or batch
sizes in the New Model form and queued one model per combination. Here the
options that may be swept are declared in
:mod:`digits_core.engine.option_specs` (``OptionSpec.sweep``: the learning
rate and the batch size); every front door expands them with
:func:`expand_sweep`:

* the web form and ``POST /api/models`` queue one job per point through the
  server's scheduler, all in one group;
* ``digits train --learning-rate 0.1,0.01 --batch-size 32,64`` and
  :func:`train_sweep` train the points one after the other in the calling
  process;
* an executor that runs jobs elsewhere (e.g. on a Ray cluster) calls
  :func:`expand_sweep` and submits each :class:`SweepPoint` as it would a
  single job (``point.name``, ``point.options``, group :func:`sweep_group`).

Every point of a sweep joins the same job group (``job.json`` key
``group``): the one the user gave, else the sweep's name. No TensorFlow
here (:func:`train_sweep` imports the engine when it runs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import FormValidationError
from .groups import normalize_group

if TYPE_CHECKING:
    from .jobs import Job
    from .option_spec import OptionSpec

#: Most jobs one sweep may create (a typo such as a stray comma list should not queue hundreds).
MAX_SWEEP_JOBS = 64
#: How a swept option appears in the job names of a sweep.
SHORT_NAMES = {"learning_rate": "lr", "batch_size": "batch"}
_FORM = "training options"


@dataclass(frozen=True)
class SweepPoint:
    """One combination of a sweep: what one training job gets.

    Attributes:
        index: Position in the sweep (0-based; the order jobs are created in).
        name: The job name: the sweep's name plus the swept values, e.g. ``"mnist lr=0.1 batch=32"``.
        options: Every training option of the job, each swept option set to one value.
        values: Just the swept options and their values for this point, e.g.
            ``{"learning_rate": 0.1, "batch_size": 32}`` (empty for a run that is not a sweep).
    """

    index: int
    name: str
    options: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)


def sweep_option_names() -> tuple[str, ...]:
    """The options that accept several values, in the order they vary (outermost first)."""
    from .engine.option_specs import TRAINING_OPTIONS

    rank = {name: i for i, name in enumerate(SHORT_NAMES)}  # learning rate, then batch size, then the rest
    return tuple(sorted((spec.name for spec in TRAINING_OPTIONS if spec.sweep), key=lambda n: rank.get(n, len(rank))))


def parse_values(name: str, raw: Any) -> list[Any]:
    """The values given for a sweepable option, converted and checked.

    Args:
        name: The option (``learning_rate`` or ``batch_size``).
        raw: A number, a comma-separated string (``"0.1, 0.01"``), or a list of numbers or
            numeric strings. Repeated values count once; order is kept.

    Returns:
        The values (at least one), as ``int`` or ``float`` as the option declares.

    Raises:
        FormValidationError: Naming ``name``: an empty item, something that is not a number,
            or a value outside the option's declared range.
    """
    from .engine.option_specs import BY_NAME

    spec = BY_NAME[name]
    if isinstance(raw, str):
        items: list[Any] = raw.split(",")
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
    else:
        items = [raw]
    if not items:
        raise FormValidationError({name: ["give at least one value"]}, _FORM)
    if len(items) > MAX_SWEEP_JOBS:  # before any per-value work: a huge list costs one split, nothing more
        raise FormValidationError(
            {name: [f"{len(items)} values; a sweep may create at most {MAX_SWEEP_JOBS} jobs"]}, _FORM
        )
    values: list[Any] = []
    seen: set[Any] = set()
    for item in items:
        text = str(item).strip()
        if text == "" or isinstance(item, bool):
            raise FormValidationError(
                {name: [f'"{str(raw)[:80]}": every comma-separated item must be a number']}, _FORM
            )
        shown = text[:80]  # a number is short: anything longer is cut in messages, never echoed whole
        try:
            number = float(text)
            value: Any = number
            if spec.kind == "int":
                if not number.is_integer():
                    raise ValueError
                value = int(number)
        except (ValueError, OverflowError):
            kind = "a whole number" if spec.kind == "int" else "a number"
            raise FormValidationError({name: [f'"{shown}" is not {kind}']}, _FORM) from None
        problem = out_of_range(spec, value)
        if problem:
            raise FormValidationError({name: [f"{shown}: {problem}"]}, _FORM)
        if value not in seen:
            seen.add(value)
            values.append(value)
    return values


def out_of_range(spec: OptionSpec, value: float) -> str | None:
    """Why ``value`` is outside the option's declared range (``"must be above 0"``), or ``None`` when it is inside."""
    if not math.isfinite(value):
        return "must be a finite number"
    low, high = spec.minimum, spec.maximum
    if low is not None and (value <= low if spec.exclusive_min else value < low):
        return f"must be {'above' if spec.exclusive_min else 'at least'} {low:g}"
    if high is not None and value > high:
        return f"must be at most {high:g}"
    return None


def is_sweep(options: Mapping[str, Any]) -> bool:
    """True when a sweepable option holds several values (a list, or a string with a comma)."""
    for name in sweep_option_names():
        raw = options.get(name)
        if isinstance(raw, (list, tuple)) and len(raw) != 1:
            return True
        if isinstance(raw, str) and "," in raw:
            return True
    return False


def refuse_sweep(options: Mapping[str, Any]) -> None:
    """Raise when ``options`` hold a sweep (for the calls that train exactly one job).

    Raises:
        FormValidationError: Naming the first option with several values.
    """
    if is_sweep(options):
        name = next(n for n in sweep_option_names() if n in options and is_sweep({n: options[n]}))
        raise FormValidationError(
            {
                name: [
                    "several values make a sweep (one job per combination): use digits_core.sweep.train_sweep(), "
                    "`digits train` or the web form"
                ]
            },
            "training options",
        )


def _format(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def expand_sweep(options: Mapping[str, Any], name: str | None = None) -> list[SweepPoint]:
    """Expand training options with several values into one :class:`SweepPoint` per combination.

    This is the one expansion every front door and executor uses: the web form,
    ``POST /api/models``, ``digits train`` and :func:`train_sweep` call it, and so
    can an executor that runs the points elsewhere (submit each ``point.options``
    as one training job named ``point.name`` in group :func:`sweep_group`).

    Combinations vary the options in declaration order (learning rate outermost,
    batch size innermost), so ``learning_rate="0.1,0.01", batch_size="32,64"`` gives
    (0.1, 32), (0.1, 64), (0.01, 32), (0.01, 64). Options that are not swept are
    copied to every point unchanged. Options without several values give a single
    point whose ``options`` equal the input (a sweepable option given as a
    one-item list or string is turned into its one number).

    Args:
        options: Training options (as for :func:`digits_core.engine.train`); ``learning_rate``
            and ``batch_size`` may be lists or comma-separated strings.
        name: The sweep's name, the start of every job name (default ``"sweep"``).

    Returns:
        The points, in order; one point when nothing is swept.

    Raises:
        FormValidationError: A swept value is not a number or out of range (the error
            names the option), or the sweep would create more than :data:`MAX_SWEEP_JOBS` jobs.
    """
    base = dict(options)
    swept: dict[str, list[Any]] = {}
    for option in sweep_option_names():
        raw = base.get(option)
        if isinstance(raw, str) and raw.strip() == "":
            del base[option]  # an empty form field: not given
            continue
        if raw is None:
            continue
        if isinstance(raw, (list, tuple, str)):
            values = parse_values(option, raw)
            if len(values) == 1:
                base[option] = values[0]
            else:
                swept[option] = values
    label = (name or "").strip() or "sweep"
    if not swept:
        return [SweepPoint(0, label, base, {})]
    total = math.prod(len(v) for v in swept.values())
    if total > MAX_SWEEP_JOBS:
        sizes = " × ".join(f"{len(v)} {k}" for k, v in swept.items())
        raise FormValidationError(
            {next(iter(swept)): [f"{sizes} values make {total} jobs; a sweep may create at most {MAX_SWEEP_JOBS}"]},
            _FORM,
        )
    points = []
    for index, combo in enumerate(itertools.product(*swept.values())):
        chosen = dict(zip(swept, combo))
        suffix = " ".join(f"{SHORT_NAMES.get(k, k)}={_format(v)}" for k, v in chosen.items())
        points.append(SweepPoint(index, f"{label} {suffix}", {**base, **chosen}, chosen))
    return points


def sweep_group(name: str | None, group: str | None = None) -> str:
    """The group every job of a sweep joins: ``group`` when given, else the sweep's name."""
    return normalize_group(group) or normalize_group(name) or "sweep"


def train_sweep(
    dataset: Any,
    network: Any = None,
    name: str | None = None,
    *,
    group: str | None = None,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
    on_job: Callable[[Job], None] | None = None,
    stop_on_abort: bool = True,
    **options: Any,
) -> list[Job]:
    """Train every point of a sweep, one after the other, in this process.

    All points are checked before the first job is created (a bad value
    creates nothing). A point whose training fails (status Error) does not stop
    the others; an aborted point (Ctrl-C, ``digits model abort``) stops the
    sweep when ``stop_on_abort`` is set, and the points not started are not
    created.

    Args:
        dataset, network, jobs_dir, progress, on_job: As for :func:`digits_core.engine.train`
            (``progress`` events get ``sweep_index`` and ``sweep_size`` added).
        name: The sweep's name (job names are ``"NAME lr=… batch=…"``; default: the network and dataset).
        group: The group of every job (default: ``name``).
        stop_on_abort: Do not start the remaining points after one was aborted.
        **options: Training options; ``learning_rate`` and ``batch_size`` may hold several values.

    Returns:
        The model :class:`~digits_core.Job` of every point that ran, in order (status Done,
        Error or Aborted).

    Raises:
        FormValidationError: A value is invalid (nothing is created).
    """
    from .engine.options import TrainingOptions
    from .engine.trainer import train
    from .errors import DigitsError

    label = name or f"{network if isinstance(network, str) else 'model'}-sweep"
    points = expand_sweep(options, label)
    for point in points:
        TrainingOptions.from_kwargs(**point.options)
    group_name = sweep_group(label, group)
    jobs: list[Job] = []
    for point in points:
        created: list[Job] = []

        def keep(job: Job, _created: list[Job] = created) -> None:
            _created.append(job)
            if on_job is not None:
                on_job(job)

        def report(event: dict, _point: SweepPoint = point) -> None:
            if progress is not None:
                progress({**event, "sweep_index": _point.index, "sweep_size": len(points)})

        try:
            job = train(
                dataset,
                network,
                point.name,
                jobs_dir=jobs_dir,
                progress=report,
                on_job=keep,
                group=group_name,
                sweep=point.values or None,
                **point.options,
            )
        except FormValidationError:
            if not created:
                raise
            job = created[0].reload()
        except DigitsError:
            if not created:
                raise
            job = created[0].reload()  # ended in Error; the next point still runs
        jobs.append(job)
        if stop_on_abort and job.status.value == "Aborted":
            break
    return jobs
