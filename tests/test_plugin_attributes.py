"""Plugin forms and templates as class attributes (``dataset_form = MyForm``, ``view_template = "templates/x.html"``)
give the DIGITS 6 getters; getters written out keep working and win over an attribute of their own class.
"""

from __future__ import annotations

import sys

import pytest
from wtforms import Form, IntegerField, StringField

from digits_core import DataIngestion, View
from digits_core.plugins.contract import check_at_load


class SizeForm(Form):
    size = IntegerField("Size", default=4)


class QueryForm(Form):
    query = StringField("Query", default="all")


@pytest.fixture
def templates_package(tmp_path, monkeypatch):
    """A real package with template files, as a plugin ships them."""
    package = tmp_path / "attr_plugin_pkg"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "templates" / "dataset.html").write_text("size {{ form.size.data }}", encoding="utf-8")
    (package / "templates" / "inference.html").write_text("query {{ form.query.data }}", encoding="utf-8")
    (package / "templates" / "sample.html").write_text("{{ label }}: {{ score }}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "attr_plugin_pkg"
    sys.modules.pop("attr_plugin_pkg", None)


def _data_plugin(package: str) -> type[DataIngestion]:
    class AttributeData(DataIngestion):
        plugin_id = "attribute-data"
        template_package = package
        dataset_form = SizeForm
        dataset_template = "templates/dataset.html"
        inference_form = QueryForm
        inference_template = "templates/inference.html"

        def itemize_entries(self, stage):
            return []

        def encode_entry(self, entry):
            raise AssertionError("not called")

    return AttributeData


def test_a_data_plugin_with_attributes_only_has_the_getters_and_passes_the_contract(templates_package):
    cls = _data_plugin(templates_package)
    assert cls.get_dataset_form() is SizeForm and cls.get_inference_form() is QueryForm
    form = SizeForm(data={"size": 7})
    source, context = cls.get_dataset_template(form)
    assert source == "size {{ form.size.data }}" and context == {"form": form}
    assert cls.get_inference_template(QueryForm())[0] == "query {{ form.query.data }}"
    assert check_at_load("data", cls) is None
    cls(size=3)  # not abstract: the attributes implement the abstract getters


def test_a_getter_written_out_wins_over_the_attribute_and_digits6_getters_still_work(templates_package):
    class Digits6Style(DataIngestion):
        plugin_id = "digits6-style"
        dataset_form = SizeForm  # ignored: the class writes its getter out

        @staticmethod
        def get_dataset_form():
            return QueryForm

        @staticmethod
        def get_dataset_template(form):
            return "{{ form.query.data }}", {"form": form}

        def itemize_entries(self, stage):
            return []

        def encode_entry(self, entry):
            return None

    assert Digits6Style.get_dataset_form() is QueryForm
    assert Digits6Style.get_inference_form() is None and Digits6Style.get_inference_template(None) == (None, None)
    assert check_at_load("data", Digits6Style) is None
    child = type("Child", (_data_plugin(templates_package),), {"dataset_form": QueryForm})
    assert child.get_dataset_form() is QueryForm, "a subclass's own attribute gives its own getter"


def test_a_data_plugin_with_neither_attribute_nor_getter_stays_abstract():
    class Incomplete(DataIngestion):
        plugin_id = "incomplete"
        dataset_form = SizeForm  # no template: get_dataset_template is still missing

        def itemize_entries(self, stage):
            return []

        def encode_entry(self, entry):
            return None

    with pytest.raises(TypeError, match="get_dataset_template"):
        Incomplete()


def test_a_view_with_attributes_renders_its_sample_template_with_the_data_keys(templates_package):
    class AttributeView(View):
        plugin_id = "attribute-view"
        template_package = templates_package
        config_form = SizeForm
        config_template = "templates/dataset.html"
        view_template = "templates/sample.html"

        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return {"label": "cat", "score": 0.5}

    view = AttributeView(dataset=None, size=4)
    source, context = view.get_view_template(view.process_data("x", None, None))
    assert source == "{{ label }}: {{ score }}" and context == {"label": "cat", "score": 0.5}
    assert AttributeView.get_config_form() is SizeForm
    assert AttributeView.get_config_template(SizeForm())[0] == "size {{ form.size.data }}"
    assert check_at_load("view", AttributeView) is None
