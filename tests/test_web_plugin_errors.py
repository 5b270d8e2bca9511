"""Web UI and plugin mistakes: DIGITS 6 helper macros and form instances work, a plugin's bug is an inline error."""

from __future__ import annotations

import numpy as np
import pytest
from wtforms import Form, StringField

from digits_core import DataIngestion, registry
from digits_core.web import create_app


class FolderForm(Form):
    folder = StringField("Folder", description="where the files are")


class Digits6Style(DataIngestion):
    """A form INSTANCE and a template importing every macro of DIGITS 6's helper.html."""

    plugin_id = "web-digits6-style"

    @staticmethod
    def get_dataset_form():
        return FolderForm()

    @staticmethod
    def get_dataset_template(form):
        return (
            '{% from "helper.html" import print_flashes, print_errors, mark_errors, serve_file %}'
            "{{ print_flashes() }}{{ print_errors(form) }}"
            '<div class="form-group{{ mark_errors([form.folder]) }}" id="d6">{{ form.folder.label }}'
            '{{ form.folder() }}</div><p id="served">{{ serve_file(none, "notes/a.txt") }}</p>'
        ), {}

    def itemize_entries(self, stage):
        return []

    def encode_entry(self, entry):
        return np.zeros((2, 2, 1), np.uint8), 0


class TemplateBug(Digits6Style):
    """Its template compiles (the load-time check passes) but fails when rendered."""

    plugin_id = "web-template-bug"

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.folder() }}{{ form.no_such_field() }}", {}


@pytest.fixture
def client(tmp_path):
    registry.register(Digits6Style)
    registry.register(TemplateBug)
    try:
        yield create_app(tmp_path / "jobs", start_scheduler=False, testing=True).test_client()
    finally:
        registry.unregister(Digits6Style)
        registry.unregister(TemplateBug)


def test_digits6_helper_macros_and_form_instances_render(client):
    page = client.get("/datasets/new/web-digits6-style")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="d6"' in html and 'name="folder"' in html and "notes/a.txt" in html


def test_a_plugin_template_error_is_shown_inline_not_as_http_500(client):
    page = client.get("/datasets/new/web-template-bug")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'class="alert alert-bad plugin-error"' in html
    assert "error: plugin &#34;web-template-bug&#34; failed in get_dataset_template: UndefinedError" in html
