"""The plugin contract caught where mistakes are made: load-time checks, forms as class or instance,
reserved names, one-line errors from plugin code, `digits plugin check` / digits_core.plugins.testing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from wtforms import Form, IntegerField, StringField

from digits_core import DataIngestion, PluginCodeError, PluginLoadError, PluginRegistry, View
from digits_core.deprecated import DigitsDeprecationWarning
from digits_core.forms import add_form_arguments, validate_values
from digits_core.plugins.contract import create_view, inference_form, strip_reserved
from digits_core.plugins.testing import check_plugin


class CountForm(Form):
    count = IntegerField("Count", default=4)


class Squares(DataIngestion):
    """A correct plugin whose forms are INSTANCES (the DIGITS 6 habit) and whose inference form is an instance method."""

    plugin_id = "squares"

    @staticmethod
    def get_dataset_form():
        return CountForm()

    @staticmethod
    def get_dataset_template(form):
        return (
            '{% from "helper.html" import print_flashes, mark_errors, print_errors, serve_file %}'
            '{{ print_flashes() }}<div class="{{ mark_errors([form.count]) }}">{{ form.count() }}</div>'
            '{{ print_errors(form) }}{{ serve_file(none, "a.txt") }}'
        ), {}

    def get_inference_form(self):
        if not self.is_inference_db:
            raise AssertionError("the core creates the instance with is_inference_db=True")
        type(self).seen_count = self.count  # created from the dataset's userdata
        return CountForm()

    def itemize_entries(self, stage):
        return list(range(self.count)) if stage == "train" else []

    def encode_entry(self, entry):
        return np.full((4, 4, 1), entry, np.uint8), entry % 2


def _variant(name, **attributes):
    return type(name, (Squares,), {"plugin_id": name.lower(), **attributes})


@pytest.fixture
def registry(monkeypatch):
    for name in ("DIGITS_LOAD_PLUGINS", "DIGITS_DISABLE_PLUGINS", "DIGITS_STRICT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return PluginRegistry(use_entry_points=False)


def _record(registry, plugin_id):
    return next(r for r in registry.records() if r.id == plugin_id)


def test_form_instances_work_everywhere(registry):
    registry.register(Squares)
    assert _record(registry, "squares").status == "loaded"
    assert validate_values(Squares.get_dataset_form(), {"count": "3"}) == {"count": 3}
    import argparse

    parser = argparse.ArgumentParser()
    assert add_form_arguments(parser, Squares.get_dataset_form()) == ["count"]
    with pytest.warns(DigitsDeprecationWarning):
        assert inference_form(Squares, {"count": 7, "is_inference_db": False}) is CountForm
    assert Squares.seen_count == 7


@pytest.mark.parametrize(
    "attributes, message",
    [
        (
            {"get_dataset_form": staticmethod(lambda: type("F", (Form,), {"is_inference_db": StringField()}))},
            "get_dataset_form(): form field(s) is_inference_db use a name the framework owns",
        ),
        (
            {"get_dataset_form": staticmethod(lambda: type("F", (Form,), {"encode_entry": StringField()}))},
            "form field(s) encode_entry use a name the framework owns",
        ),
        (
            {"get_dataset_form": staticmethod(lambda: 42)},
            "get_dataset_form() failed: TypeError: expected a WTForms Form class or instance, got int",
        ),
        ({"get_dataset_form": staticmethod(lambda: 1 / 0)}, "get_dataset_form() failed: ZeroDivisionError"),
        (
            {"get_dataset_form": staticmethod(lambda: type("F", (Form,), {"__init__": lambda self, **kw: 1 / 0}))},
            "get_dataset_form(): the form cannot be constructed: ZeroDivisionError",
        ),
        (
            {"get_dataset_template": staticmethod(lambda form: ('{% from "digits_helper.html" import x %}', {}))},
            'get_dataset_template(): the template imports "digits_helper.html", which does not exist',
        ),
        (
            {"get_dataset_template": staticmethod(lambda form: ("{% if %}", {}))},
            "get_dataset_template(): template syntax error on line 1",
        ),
    ],
)
def test_load_time_contract_errors_name_the_method_and_reason(registry, attributes, message):
    plugin = _variant("Broken", **attributes)
    if message.startswith("get_dataset_template"):  # templates compile when plugins are listed, not on register
        registry.register(plugin)
    else:
        with pytest.raises(PluginLoadError) as info:  # refused where it is registered (a notebook cell, a script)
            registry.register(plugin)
        assert message in str(info.value) and "broken" in str(info.value)
        registry.register(plugin, check=False)  # registered anyway: listed failed, as an installed plugin would be
    record = _record(registry, "broken")
    assert record.status == "failed"
    assert message in record.error
    assert "broken" not in registry.data_ingestions()


def test_a_view_config_form_clash_and_a_view_init_error():
    class Shown(View):
        plugin_id = "shown"

        def __init__(self, dataset, **config):
            raise KeyError("palette")

        @staticmethod
        def get_config_form():
            return type("F", (Form,), {"dataset": StringField()})()

        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return None

        def get_view_template(self, data):
            return "", {}

    report = check_plugin(Shown)
    assert not report.ok
    assert "get_config_form(): form field(s) dataset use a name the framework owns" in str(report)
    with pytest.raises(PluginCodeError) as info:
        create_view(Shown, None, {})
    assert str(info.value) == "plugin \"shown\" failed in View.__init__: KeyError: 'palette'"


def test_persisted_reserved_userdata_keys_are_stripped_with_a_warning():
    with pytest.warns(DigitsDeprecationWarning, match='persisted the userdata key "is_inference_db"'):
        values = strip_reserved("data", {"is_inference_db": True, "count": 2}, "squares")
    assert values == {"count": 2}
    plugin = Squares(is_inference_db=True, **values)  # no "multiple values for keyword argument"
    assert plugin.is_inference_db


def test_check_plugin_passes_a_correct_plugin_and_names_channels_first():
    report = check_plugin(Squares)
    assert report.ok, report
    assert [c.name for c in report.checks if c.name.startswith("encode_entry")] == [
        "encode_entry(train: 0)",
        "encode_entry(train: 1)",
        "encode_entry(train: 2)",
    ]

    def channels_first(self, entry):
        return np.zeros((1, 32, 32), np.uint8), 0

    def float64(self, entry):
        return np.zeros((4, 4, 1), np.float64), 0

    report = check_plugin(_variant("Chw", encode_entry=channels_first))
    assert not report.ok
    assert 'Plugin "chw" returns features of shape (1, 32, 32), which looks channels-first' in str(report)
    assert "transpose(1, 2, 0)" in str(report)
    report = check_plugin(_variant("F64", encode_entry=float64))
    assert "feature dtype float64 is not one of uint8, uint16, int16, float32" in str(report)

    def digits6_userdata(self, stage):
        self.userdata["is_inference_db"] = self.is_inference_db  # the DIGITS 6 idiom
        return [1]

    report = check_plugin(_variant("D6", itemize_entries=digits6_userdata))
    assert "failed  userdata: itemize_entries stored userdata key(s) is_inference_db" in str(report)


def test_check_plugin_reports_a_label_contradicting_its_declared_kind():
    def story(self, entry):  # the bAbI habit: a story×sentence float label, 5 words a sentence
        return np.zeros((4, 4, 1), np.uint8), np.zeros((3, 5), np.float32)

    report = check_plugin(_variant("Story", encode_entry=story, label_kind="mask"))
    assert not report.ok
    assert (
        'encode_entry(train: 0): data plugin "story" declares label_kind "mask": a mask label must be an '
        "integer array" in str(report)
    )
    assert check_plugin(_variant("StoryRaw", encode_entry=story, label_kind="raw")).ok
    assert check_plugin(_variant("StoryUndeclared", encode_entry=story)).ok  # undeclared: raw, never boxes

    def boxes(self, entry):
        return np.zeros((4, 4, 1), np.uint8), np.zeros((1, 3, 5), np.float32)

    report = check_plugin(_variant("Boxes", encode_entry=boxes, label_kind="boxes"))
    assert (
        'encode_entry(train: 1): data plugin "boxes" declares label_kind "boxes": label declared as boxes '
        "must be an N×5 float array; got shape (1, 3, 5) float32"
    ) in str(report)


def test_testing_kit_builds_a_dataset_in_process(tmp_path):
    from digits_core.plugins.testing import build_dataset

    dataset = build_dataset(Squares, {"count": 5}, jobs_dir=tmp_path)
    assert dataset.count("train") == 5 and dataset.feature_shape() == (4, 4, 1)


PLUGIN_MODULE = """
import numpy as np
from wtforms import Form, StringField
from digits_core import DataIngestion

class F(Form):
    folder = StringField("Folder", default="x")

class Boom(DataIngestion):
    plugin_id = "boom"
    @staticmethod
    def get_dataset_form():
        return F
    @staticmethod
    def get_dataset_template(form):
        return "{{ form.folder() }}", {}
    def itemize_entries(self, stage):
        raise OSError("cannot list /data/boom")
    def encode_entry(self, entry):
        return np.zeros((2, 2, 1), np.uint8), 0
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_cli_reports_plugin_errors_as_one_line(tmp_path, verbose):
    (tmp_path / "boom_plugin.py").write_text(PLUGIN_MODULE)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from digits_core import registry
        import boom_plugin
        registry.register(boom_plugin.Boom)
        from digits_core.cli import main
        sys.exit(main({(["-v"] if verbose else []) + ["plugin", "check", "boom"]!r}))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert (
        "failed  itemize_entries(train): plugin \"boom\" failed in itemize_entries('train'): "
        "OSError: cannot list /data/boom" in result.stdout
    )
    assert ("Traceback" in result.stderr) is verbose
