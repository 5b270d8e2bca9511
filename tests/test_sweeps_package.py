"""The sweeps are one package (``digits_core.sweeps``) above the engine and the executors, below the front doors.

The former module names (``digits_core.sweep``, ``.tuning``, ``.search_space``, ``.sweep_report``,
``.executors.tune_trials``, ``.jobs.sweep``) keep their names working, with a warning, until plugin API 2.0.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from import_graph import read_graph

from digits_core.deprecated import MOVED_MODULES, DigitsDeprecationWarning

#: Each former module and the names code outside it imported from it.
FORMER_NAMES = {
    "digits_core.sweep": (
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
    ),
    "digits_core.tuning": (
        "MAX_CONCURRENT",
        "MAX_EPOCHS",
        "SCHEDULERS",
        "TuneHandle",
        "TuneSettings",
        "abort_sweep",
        "list_sweeps",
        "plan_sweep",
        "read_sweep",
        "reap_sweep_record",
        "resume_sweep",
        "sweeps_root",
        "tune",
    ),
    "digits_core.search_space": (
        "MAX_TRIALS",
        "Space",
        "check_networks",
        "grid_size",
        "grid_trials",
        "make_space",
        "parse_search",
        "parse_spaces",
        "random_trials",
    ),
    "digits_core.sweep_report": (
        "budget_line",
        "compare_models",
        "index_row",
        "promote",
        "sweep_index",
        "sweep_summary",
        "trial_row",
    ),
    "digits_core.executors.tune_trials": ("_release_ray", "_start_ray", "pruning_asha", "run_sweep", "run_trial"),
    "digits_core.jobs.sweep": (
        "SWEEP_FILE",
        "SWEEPS_DIR",
        "read_sweep",
        "read_sweep_record",
        "reap_sweep_record",
        "sweep_groups",
        "sweep_of_job",
        "sweeps_root",
        "update_sweep_record",
        "write_sweep_record",
    ),
}


@pytest.mark.parametrize("old", sorted(FORMER_NAMES))
def test_a_former_sweep_module_still_gives_its_names_and_warns(old, monkeypatch):
    new = MOVED_MODULES[old]
    assert new.startswith("digits_core.sweeps"), f"{old} moved into the sweeps package, not to {new}"
    monkeypatch.delitem(sys.modules, old, raising=False)
    parent, _, child = old.rpartition(".")
    monkeypatch.delattr(importlib.import_module(parent), child, raising=False)
    namespace: dict = {}
    names = ", ".join(FORMER_NAMES[old])
    with pytest.warns(DigitsDeprecationWarning, match=rf"{old} moved to {new}"):
        exec(compile(f"from {old} import {names}", __file__, "exec"), namespace)
    moved = importlib.import_module(new)
    for name in FORMER_NAMES[old]:
        assert namespace[name] is getattr(moved, name), f"{old}.{name} is not {new}.{name}"


def test_the_former_parse_values_takes_an_option_name_and_checks_as_the_spec_does():
    from digits_core.engine.option_specs import BY_NAME
    from digits_core.errors import FormValidationError
    from digits_core.option_spec import parse_values as parse_spec_values
    from digits_core.sweeps import parse_values

    assert parse_values("batch_size", "32, 64,32") == [32, 64] == parse_spec_values(BY_NAME["batch_size"], [32, "64"])
    with pytest.raises(FormValidationError) as caught:
        parse_values("learning_rate", "0.1,-1")
    assert list(caught.value.errors) == ["learning_rate"] and "above 0" in caught.value.errors["learning_rate"][0]


def test_nothing_below_the_front_doors_and_the_submission_layer_imports_the_sweeps():
    allowed = ("digits_core.sweeps", "digits_core.web", "digits_core.cli", "digits_core.submit")
    edges, _ = read_graph()
    uphill = sorted(
        f"{e.source}:{e.line}"
        for e in edges
        if e.target.startswith("digits_core.sweeps") and not e.source.startswith(allowed)
    )
    assert not uphill, f"imports of digits_core.sweeps from below it (even inside functions): {uphill}"


def test_the_sweeps_package_loads_neither_tensorflow_nor_ray():
    code = (
        "import sys, digits_core.sweeps, digits_core.sweeps.tune, digits_core.sweeps.space, "
        "digits_core.sweeps.report, digits_core.sweeps.record\n"
        "print(sorted(m for m in ('tensorflow', 'keras', 'ray') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
