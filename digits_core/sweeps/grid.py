"""Grid sweeps: several values of an option make one training job per combination.

DIGITS 6 let a user type several comma-separated learning rates or batch
sizes in the New Model form and queued one model per combination. Here the
options that may be swept are declared in
:mod:`digits_core.engine.option_specs` (``OptionSpec.sweep``: the learning
rate and the batch size); every front door expands them with
:func:`expand_sweep`:

* the web form and ``POST /api/models`` queue one job per point through the
  submission layer (:mod:`digits_core.submit`), all in one group;
* ``digits train --learning-rate 0.1,0.01 --batch-size 32,64`` and
  :func:`digits_core.sweeps.run.train_sweep` train the points one after the other in the calling
  process;
* an executor that runs jobs elsewhere (e.g. on a Ray cluster) calls
  :func:`expand_sweep` and submits each :class:`SweepPoint` as it would a
  single job (``point.name``, ``point.options``, group :func:`sweep_group`).

Every point of a sweep joins the same job group (``job.json`` key
``group``): the one the user gave, else the sweep's name. The values of one
option are parsed and checked by :func:`digits_core.option_spec.parse_values`
(below the engine, which parses its sweep flags with it). No TensorFlow here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import option_spec
from ..engine.option_specs import BY_NAME, SHORT_NAMES, is_sweep, refuse_sweep, sweep_option_names
from ..errors import FormValidationError
from ..groups import normalize_group
from ..option_spec import MAX_SWEEP_JOBS, out_of_range

__all__ = [
    "MAX_SWEEP_JOBS",
    "SHORT_NAMES",
    "SweepPoint",
    "expand_sweep",
    "is_sweep",
    "out_of_range",
    "parse_values",
    "refuse_sweep",
    "sweep_group",
    "sweep_option_names",
]

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


def parse_values(name: str, raw: Any) -> list[Any]:
    """The values given for a sweepable training option, converted and checked.

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
    return option_spec.parse_values(BY_NAME[name], raw)


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
