"""In-process registration, hooks and lookups of the plugin registry."""

from __future__ import annotations

import types

import numpy as np
import pytest
from wtforms import Form, StringField

from digits_core import DataIngestion, PluginLoadError, PluginNotFoundError, PluginRegistry, View, hookimpl
from digits_core.plugins import hookspecs


class _Form(Form):
    folder = StringField("Folder")


class Squares(DataIngestion):
    plugin_id = "squares"
    title = "Squares"
    category = "Test"

    @staticmethod
    def get_dataset_form():
        return _Form

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.folder() }}", {}

    def itemize_entries(self, stage):
        return [1, 2]

    def encode_entry(self, entry):
        return np.zeros((2, 2, 1), np.uint8), entry


class OtherSquares(Squares):
    title = "Other squares"


class ArgmaxView(View):
    plugin_id = "argmax"

    def process_data(self, input_id, input_data, output_data, ground_truth=None):
        return int(np.argmax(output_data))

    def get_view_template(self, data):
        return "{{ value }}", {"value": data}


@pytest.fixture
def registry(monkeypatch):
    for name in ("DIGITS_LOAD_PLUGINS", "DIGITS_DISABLE_PLUGINS", "DIGITS_STRICT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return PluginRegistry(use_entry_points=False)


def test_in_process_registration_and_unregistration(registry):
    registry.register(Squares)
    registry.register(ArgmaxView)
    assert registry.get_data_ingestion("squares") is Squares
    assert registry.get_view("argmax") is ArgmaxView
    record = next(r for r in registry.records() if r.id == "squares")
    assert (record.source, record.distribution, record.status, record.category) == (
        "in-process",
        None,
        "loaded",
        "Test",
    )
    registry.unregister(Squares)
    with pytest.raises(PluginNotFoundError, match='No data plugin with id "squares"'):
        registry.get_data_ingestion("squares")
    assert registry.get_view("argmax") is ArgmaxView


def test_register_works_as_a_decorator(registry):
    @registry.register
    class Decorated(Squares):
        plugin_id = "decorated"

    assert registry.data_ingestions()["decorated"] is Decorated


def test_clashing_id_fails_unless_replace(registry):
    registry.register(Squares)
    with pytest.raises(PluginLoadError, match='"squares".*already registered in this process by Squares.*replace=True'):
        registry.register(OtherSquares)  # e.g. an edited notebook cell run again
    assert registry.get_data_ingestion("squares") is Squares
    registry.register(OtherSquares, check=False)  # unchecked: the build reports the clash, as for installed plugins
    assert registry.get_data_ingestion("squares") is Squares
    failed = [r for r in registry.records() if r.status == "failed"]
    assert len(failed) == 1 and "already used" in failed[0].error
    registry.unregister(OtherSquares)
    registry.register(OtherSquares, replace=True)
    assert registry.get_data_ingestion("squares") is OtherSquares
    assert [r.obj for r in registry.records() if r.id == "squares"] == [OtherSquares]  # the old class is gone
    registry.register(OtherSquares)  # the same class again: nothing changes
    with pytest.raises(PluginLoadError, match="already registered in this process by OtherSquares"):
        registry.register(Squares)


def test_class_of_wrong_kind_from_a_hook_is_reported(registry):
    hooks = types.SimpleNamespace()

    @hookimpl
    def digits_register_views():
        return [Squares]  # a DataIngestion handed out as a view

    hooks.digits_register_views = digits_register_views
    registry.register(hooks)
    failed = [r for r in registry.records() if r.status == "failed"]
    assert failed and "not a subclass of digits_core.View" in failed[0].error
    assert registry.views() == {}


def test_hook_module_can_register_classes_and_networks(registry):
    module = types.ModuleType("my_hooks")

    @hookimpl
    def digits_register_data_ingestions():
        return [Squares]

    @hookimpl
    def digits_register_networks():
        return {"tiny": lambda input_shape, num_outputs: None}

    module.digits_register_data_ingestions = digits_register_data_ingestions
    module.digits_register_networks = digits_register_networks
    registry.register(module)
    assert registry.get_data_ingestion("squares") is Squares
    assert set(registry.networks()) == {"tiny"}
    record = next(r for r in registry.records() if r.kind == "hooks")
    assert record.hooks == ["digits_register_data_ingestions", "digits_register_networks"]


def _hook_module(name, **functions):
    module = types.ModuleType(name)
    for hook_name, function in functions.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def test_call_hook_contains_a_failing_plugin(registry, caplog):
    def finished_with_fewer_arguments(status):
        return f"good saw {status}"

    def finished_with_a_bug(job, status, logs):
        raise ValueError("plugin bug")

    registry.register(_hook_module("good_hooks", digits_training_finished=finished_with_fewer_arguments))
    registry.register(_hook_module("bad_hooks", digits_training_finished=finished_with_a_bug))
    results = registry.call_hook("digits_training_finished", job=None, status="Done", logs={})
    assert results == ["good saw Done"]
    assert "bad_hooks" in caplog.text and "plugin bug" in caplog.text


def test_missing_view_message_names_the_id_and_alternatives(registry):
    registry.register(ArgmaxView)
    with pytest.raises(PluginNotFoundError) as info:
        registry.get_view("heatmap")
    assert '"heatmap"' in str(info.value) and "argmax" in str(info.value)


def test_every_hook_is_documented_and_listed_in_the_plugins_page():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "plugins.md").read_text()
    names = [n for n in dir(hookspecs) if n.startswith("digits_")]
    assert len(names) >= 8
    for name in names:
        function = getattr(hookspecs, name)
        assert function.__doc__ and function.__doc__.strip(), f"hook {name} has no docstring"
        assert f"`{name}(" in page, f"hook {name} is not documented in docs/plugins.md"
