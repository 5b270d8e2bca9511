"""Hooks go through pluggy: wrappers, firstresult, unknown hook names, caller bugs, kinds in env lists."""

from __future__ import annotations

import types

import pytest

from digits_core import PluginRegistry, hookimpl
from digits_core.plugins.hookspecs import hookspec


@pytest.fixture
def registry(monkeypatch):
    for name in ("DIGITS_LOAD_PLUGINS", "DIGITS_DISABLE_PLUGINS", "DIGITS_STRICT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return PluginRegistry(use_entry_points=False)


def _module(name, **functions):
    module = types.ModuleType(name)
    for hook_name, function in functions.items():
        setattr(module, hook_name, function)
    return module


def test_new_style_and_old_style_wrappers_see_every_result(registry):
    seen = {}

    @hookimpl(wrapper=True)
    def digits_register_networks():
        results = yield
        seen["wrapper"] = [sorted(r) for r in results]
        return results + [{"added-by-wrapper": None}]

    @hookimpl(hookwrapper=True)
    def old_style():
        outcome = yield
        seen["old"] = len(outcome.get_result())

    old = _module("old_wrapper")
    old.digits_register_networks = old_style
    old.digits_register_networks.__name__ = "digits_register_networks"
    registry.register(_module("plain", digits_register_networks=hookimpl(lambda: {"tiny": None})))
    registry.register(_module("wrapping", digits_register_networks=digits_register_networks))
    registry.register(old)
    assert set(registry.networks()) == {"tiny", "added-by-wrapper"}
    assert seen == {"wrapper": [["tiny"]], "old": 2}


def test_firstresult_spec_stops_at_the_first_answer(registry):
    class Specs:
        @hookspec(firstresult=True)
        def digits_pick_colour(self, name):
            """Return a colour for ``name``."""

    calls = []

    @hookimpl(tryfirst=True)
    def digits_pick_colour(name):
        calls.append("first")
        return f"red for {name}"

    @hookimpl
    def later(name):
        calls.append("later")
        return "blue"

    registry.add_hookspecs(Specs)
    registry.register(_module("first", digits_pick_colour=digits_pick_colour))
    registry.register(_module("second", digits_pick_colour=later))
    assert registry.call_hook("digits_pick_colour", name="sky") == "red for sky"
    assert calls == ["first"]


def test_a_raising_implementation_is_contained_but_the_others_run(registry, caplog):
    @hookimpl
    def broken(job, status, logs):
        raise ValueError("plugin bug")

    @hookimpl
    def fewer_arguments(status):  # fewer arguments than the spec: allowed
        return f"saw {status}"

    registry.register(_module("bad_hooks", digits_training_finished=broken))
    registry.register(_module("good_hooks", digits_training_finished=fewer_arguments))
    assert registry.call_hook("digits_training_finished", job=None, status="Done", logs={}) == ["saw Done"]
    assert registry.hook.digits_training_finished(job=None, status="Done", logs={}) == ["saw Done"]
    assert 'Plugin "bad_hooks" failed in hook digits_training_finished: ValueError: plugin bug' in caplog.text


def test_a_callers_mistake_is_not_blamed_on_a_plugin(registry, caplog):
    @hookimpl
    def finished(job, status, logs):
        return status

    registry.register(_module("innocent", digits_training_finished=finished))
    with pytest.raises(TypeError, match=r"missing \['logs'\]"):
        registry.call_hook("digits_training_finished", job=None, status="Done")
    with pytest.raises(TypeError, match="unexpected \\['colour'\\]"):
        registry.call_hook("digits_training_finished", job=None, status="Done", logs={}, colour=1)
    with pytest.raises(TypeError, match="no hook named 'digits_trainig_finished'"):
        registry.call_hook("digits_trainig_finished", job=None)
    assert "innocent" not in caplog.text


def test_a_misspelled_hook_marks_the_plugin_failed_naming_the_hook(registry):
    @hookimpl
    def digits_traning_finished(job, status, logs):
        pass

    @hookimpl
    def digits_dataset_created(dataset):
        pass

    registry.register(
        _module(
            "typo_hooks", digits_traning_finished=digits_traning_finished, digits_dataset_created=digits_dataset_created
        )
    )
    record = next(r for r in registry.records() if r.name == "typo_hooks")
    assert record.status == "failed"
    assert "unknown hook digits_traning_finished (did you mean digits_training_finished?)" in record.error
    # The failed plugin's other hooks are not called either.
    assert registry.call_hook("digits_dataset_created", dataset=None) == []


def test_an_implementation_with_an_argument_the_spec_lacks_fails_to_load(registry):
    @hookimpl
    def digits_dataset_created(dataset, colour):
        pass

    registry.register(_module("extra_arg", digits_dataset_created=digits_dataset_created))
    record = next(r for r in registry.records() if r.name == "extra_arg")
    assert record.status == "failed" and "colour" in record.error


def test_plugin_api_version_and_deprecations_are_declared():
    import digits_core
    import digits_core.deprecated as deprecated

    major, minor = digits_core.PLUGIN_API_VERSION
    assert (major, minor) >= (1, 0)
    assert deprecated.DEPRECATIONS, "every deprecation is declared in digits_core.deprecated"
    for item in deprecated.DEPRECATIONS:
        assert item.removal > digits_core.PLUGIN_API_VERSION
        assert str(item.removal[0]) in item.message
