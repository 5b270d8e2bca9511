"""Sweeps and hyper-parameter search: one package, above the engine and the executors, below the front doors.

* :mod:`.grid`: several values of an option make one training job per combination
  (:func:`expand_sweep`, :class:`SweepPoint`, :func:`sweep_group`);
* :mod:`.run`: :func:`train_sweep`, the points of a grid sweep trained one after the other in this process;
* :mod:`.space`: search spaces (``OPTION=EXPR``: a grid, ``choice``, ``uniform``, ``loguniform``) and their trials;
* :mod:`.tune`: a search on Ray Tune (:func:`~.tune.tune`, :func:`~.tune.resume_sweep`,
  :func:`~.tune.abort_sweep`, :class:`~.tune.TuneHandle`);
* :mod:`.trials`: the Ray Tune side (the trial function, its reporter, the pruning scheduler, Ray started once
  per process);
* :mod:`.report`: what a sweep did (:func:`~.report.sweep_summary`, :func:`~.report.compare_models`,
  :func:`~.report.promote`);
* :mod:`.record`: a sweep's files under ``JOBS_DIR/.sweeps/SWEEP_ID/`` (``sweep.json`` written under the
  folder's record lock, the trials it started).

The values of one sweepable option are parsed by :func:`digits_core.option_spec.parse_values` and the engine
refuses a sweep where it trains one job (:func:`digits_core.engine.option_specs.refuse_sweep`): both sit below
this package, so nothing below imports it. The former modules (``digits_core.sweep``, ``digits_core.tuning``,
``digits_core.search_space``, ``digits_core.sweep_report``, ``digits_core.executors.tune_trials``,
``digits_core.jobs.sweep``) still import, with a warning, until plugin API 2.0. Importing this package imports
neither TensorFlow nor Ray; it gives the names of the former ``digits_core.sweep``.
"""

from __future__ import annotations

from .grid import (
    MAX_SWEEP_JOBS,
    SHORT_NAMES,
    SweepPoint,
    expand_sweep,
    is_sweep,
    out_of_range,
    parse_values,
    refuse_sweep,
    sweep_group,
    sweep_option_names,
)
from .run import train_sweep

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
    "train_sweep",
]
