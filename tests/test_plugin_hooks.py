"""Every hook of the pip-installed sample plugin is called, with the arguments its hookspec documents.

The sample plugin's hooks module (``tests/sample_plugins/basic/digits_sample_basic/hooks.py``)
implements every hook of ``digits_core/plugins/hookspecs.py``, each accepting every
documented argument and recording its calls. :data:`HOOK_TESTS` maps each
hook to the test proving it called; the meta-tests at the bottom fail when a
hookspec is added without a test here or without documentation (as
datasette's ``test_plugin_hooks_are_documented``).
"""

from __future__ import annotations

import inspect
import math
import os
import re
from pathlib import Path

import pytest

from digits_core import registry
from digits_core.jobs import Job, JobStatus
from digits_core.plugins import hookspecs

REPO = Path(__file__).resolve().parent.parent

#: hook name -> the test below that proves DIGITS calls it with its documented arguments.
HOOK_TESTS = {
    "digits_register_data_ingestions": "test_register_hooks_add_data_view_and_network_plugins",
    "digits_register_views": "test_register_hooks_add_data_view_and_network_plugins",
    "digits_register_networks": "test_register_hooks_add_data_view_and_network_plugins",
    "digits_register_routes": "test_register_routes_receives_the_app_being_built",
    "digits_dataset_created": "test_dataset_job_calls_status_and_created_hooks",
    "digits_job_status_changed": "test_dataset_job_calls_status_and_created_hooks",
    "digits_training_callbacks": "test_training_calls_callbacks_finished_and_status_hooks",
    "digits_training_finished": "test_training_calls_callbacks_finished_and_status_hooks",
}


def hookspec_names() -> list[str]:
    """Names of the hooks declared in ``digits_core/plugins/hookspecs.py``."""
    return sorted(
        name
        for name, obj in vars(hookspecs).items()
        if name.startswith("digits_") and callable(obj) and hasattr(obj, f"{hookspecs.PROJECT_NAME}_spec")
    )


def spec_arguments(name: str) -> set[str]:
    return set(inspect.signature(getattr(hookspecs, name)).parameters)


@pytest.fixture
def sample_hooks(sample_plugin_paths, monkeypatch, tmp_path):
    """The pip-installed sample plugin loaded in this process; yields its hooks module (calls cleared)."""
    path = str(sample_plugin_paths["basic"])
    monkeypatch.syspath_prepend(path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("DIGITS_JOBS_DIR", str(tmp_path / "jobs"))
    monkeypatch.delenv("DIGITS_SAMPLE_HOOK_LOG", raising=False)
    monkeypatch.delenv("DIGITS_SAMPLE_GATE", raising=False)
    import digits_sample_basic.hooks as hooks

    hooks.CALLS.clear()
    registry.reload()
    yield hooks
    monkeypatch.undo()
    registry.reload()


def calls_of(hooks, name: str) -> list[dict]:
    found = [args for hook, args in hooks.CALLS if hook == name]
    for args in found:
        if name in HOOK_TESTS:  # an implementation taking every documented argument got them all
            assert set(args) == spec_arguments(name), (name, sorted(args))
    return found


def test_register_hooks_add_data_view_and_network_plugins(sample_hooks):
    from digits_core.engine.networks import list_networks

    data, views = registry.data_ingestions(), registry.views()
    assert data["sample-hook-numbers"] is sample_hooks.HookNumbersIngestion
    assert views["sample-hook-text"] is sample_hooks.HookTextView
    assert "sample-numbers" in data and "sample-text" in views  # the entry-point plugins still load
    assert calls_of(sample_hooks, "digits_register_data_ingestions") == [{}]
    assert calls_of(sample_hooks, "digits_register_views") == [{}]
    spec = {s.name: s for s in list_networks()}["sample-net"]
    assert spec.source == "plugin" and spec.build is sample_hooks.build_sample_net
    assert spec.description.startswith("Sample plugin network")
    assert calls_of(sample_hooks, "digits_register_networks")


def test_register_routes_receives_the_app_being_built(sample_hooks, tmp_path):
    from digits_core.web import create_app

    app = create_app(tmp_path / "jobs", testing=True, start_scheduler=False)
    try:
        [args] = calls_of(sample_hooks, "digits_register_routes")
        assert args["app"] is app
        resp = app.test_client().get(sample_hooks.ROUTE)
        assert resp.status_code == 200 and resp.get_data(as_text=True) == "hello from the sample plugin"
    finally:
        app.extensions["digits"]["inference_worker"].close()


def _status_changes(hooks, job_id: str) -> list[tuple[str, str]]:
    changes = []
    for args in calls_of(hooks, "digits_job_status_changed"):
        assert isinstance(args["job"], Job)
        if args["job"].id == job_id:
            changes.append((args["old_status"], args["new_status"]))
    return changes


def _assert_status_walk(changes: list[tuple[str, str]], final: str) -> None:
    """Each change starts where the previous one ended; the walk goes through Running and ends at ``final``."""
    assert changes, "digits_job_status_changed was never called for the job"
    for (_old, new), (next_old, _next_new) in zip(changes, changes[1:]):
        assert next_old == new, changes
    assert all(old != new for old, new in changes), changes
    assert "Running" in {new for _old, new in changes} and changes[-1][1] == final, changes
    for old, new in changes:  # plain status names, as documented
        assert isinstance(old, str) and isinstance(new, str) and JobStatus(new).value == new, (old, new)


def test_dataset_job_calls_status_and_created_hooks(sample_hooks, tmp_path):
    from digits_core.datasets import Dataset, create_dataset

    job = create_dataset("sample-hook-numbers", {"count": 3}, name="hooked", workers=1, jobs_dir=tmp_path / "jobs")
    assert job.status is JobStatus.DONE
    _assert_status_walk(_status_changes(sample_hooks, job.id), "Done")
    [args] = calls_of(sample_hooks, "digits_dataset_created")
    dataset = args["dataset"]
    assert isinstance(dataset, Dataset) and Path(dataset.job_path) == job.path
    assert calls_of(sample_hooks, "digits_job_status_changed")[-1]["new_status"] == "Done"
    # The dataset handed to the hook is the published one, readable as it stands.
    features, labels = dataset.read_batch("train", 0, 3)
    assert features.shape == (3, 4, 4, 1) and sorted(int(v) for v in features[:, 0, 0, 0]) == [0, 1, 2]
    assert [int(f[0, 0, 0]) % 2 for f in features] == [int(v) for v in labels]


@pytest.mark.slow
def test_training_calls_callbacks_finished_and_status_hooks(sample_hooks, tmp_path):
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    dataset = create_dataset("sample-numbers", {"count": 8}, name="nums", workers=1, jobs_dir=tmp_path / "jobs")
    sample_hooks.CALLS.clear()
    job = train(
        dataset.id, "sample-net", name="hooked model", jobs_dir=tmp_path / "jobs", epochs=2, batch_size=4, seed=1
    )
    assert job.status is JobStatus.DONE, job.error

    [args] = calls_of(sample_hooks, "digits_training_callbacks")
    assert isinstance(args["job"], Job) and args["job"].id == job.id and args["job"].kind == "model"
    # The callback it returned was attached to the Keras run: once per epoch, with the run's logs.
    epochs = [a for hook, a in sample_hooks.CALLS if hook == "sample-callback.on_epoch_end"]
    assert [a["epoch"] for a in epochs] == [0, 1] and all(math.isfinite(a["logs"]["loss"]) for a in epochs)

    [args] = calls_of(sample_hooks, "digits_training_finished")
    assert args["job"].id == job.id and args["status"] == "Done"
    logs = args["logs"]
    assert isinstance(logs, dict) and {"loss", "accuracy"} <= set(logs) and math.isfinite(float(logs["loss"]))
    _assert_status_walk(_status_changes(sample_hooks, job.id), "Done")


# -- meta-tests ------------------------------------------------------------------------


@pytest.mark.parametrize("name", hookspec_names())
def test_every_hookspec_is_implemented_and_tested(name):
    assert name in HOOK_TESTS, f"hookspec {name} has no test proving it is called: add one to {__file__}"
    assert callable(globals().get(HOOK_TESTS[name])), HOOK_TESTS[name]
    source = (REPO / "tests/sample_plugins/basic/digits_sample_basic/hooks.py").read_text(encoding="utf-8")
    match = re.search(rf"^@hookimpl\ndef {name}\(([^)]*)\)", source, re.M)
    assert match, f"the sample plugin's hooks module does not implement {name}"
    implemented = {a.strip() for a in match.group(1).split(",") if a.strip()}
    assert implemented == spec_arguments(name), "the sample implementation must take every documented argument"


@pytest.mark.parametrize("name", hookspec_names())
def test_every_hookspec_is_documented_with_its_exact_signature(name):
    """The hook table of docs/plugins.md gives each hook as ``name(arguments)``, exactly as hookspecs.py declares it."""
    signature = f"{name}({', '.join(inspect.signature(getattr(hookspecs, name)).parameters)})"
    table = [
        line
        for line in (REPO / "docs" / "plugins.md").read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{name}(")
    ]
    assert table, f"hook {name} has no row in the hook table of docs/plugins.md"
    assert table == [f"| `{signature}` | {table[0].split('` | ', 1)[1]}"], (
        f"the row of docs/plugins.md for {name} must show its signature as declared: {signature}"
    )
    docstring = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert docstring.strip(), f"hook {name} has no docstring in hookspecs.py"


def test_hook_tests_name_only_real_hooks():
    assert set(HOOK_TESTS) == set(hookspec_names())
