"""Start-up of `digits dataset create`: a lookup by id compiles no plugin template, listing and the web server
do; the CLI imports the command modules only up to the one it runs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from wtforms import Form, IntegerField

from digits_core import DataIngestion, PluginRegistry


class CountForm(Form):
    count = IntegerField("Count", default=2)


class BrokenTemplate(DataIngestion):
    """Works for building datasets; its dataset template does not compile."""

    plugin_id = "startup-broken-template"

    @staticmethod
    def get_dataset_form():
        return CountForm

    @staticmethod
    def get_dataset_template(form):
        return "{% if %}", {}

    def itemize_entries(self, stage):
        return list(range(self.count)) if stage == "train" else []

    def encode_entry(self, entry):
        return np.full((2, 2, 1), entry, np.uint8), entry


@pytest.fixture
def compiled(monkeypatch):
    """The sources ``template_problem`` compiled, in order."""
    import digits_core.templating as templating

    seen: list[str] = []
    original = templating.template_problem

    def recording(source):
        seen.append(source)
        return original(source)

    monkeypatch.setattr(templating, "template_problem", recording)
    return seen


def test_a_lookup_compiles_no_template_and_listing_fails_the_broken_one(monkeypatch, compiled):
    for name in ("DIGITS_LOAD_PLUGINS", "DIGITS_DISABLE_PLUGINS", "DIGITS_STRICT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    registry = PluginRegistry(use_entry_points=False)
    registry.register(BrokenTemplate)
    assert registry.get_data_ingestion("startup-broken-template") is BrokenTemplate
    assert compiled == []  # forms were checked, templates were not
    (record,) = registry.records()
    assert record.status == "failed"
    assert record.error.startswith("get_dataset_template(): template syntax error on line 1")
    assert compiled == ["{% if %}"]
    assert "startup-broken-template" not in registry.data_ingestions()
    registry.records()
    assert compiled == ["{% if %}"]  # once per discovery


def test_the_web_server_checks_templates_when_it_starts(tmp_path, compiled):
    from digits_core import registry
    from digits_core.web import create_app

    registry.register(BrokenTemplate)
    try:
        assert "startup-broken-template" in registry.data_ingestions()
        create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
        assert "{% if %}" in compiled
        assert "startup-broken-template" not in registry.data_ingestions()
    finally:
        registry.unregister(BrokenTemplate)
    assert "startup-broken-template" not in registry.data_ingestions()


def test_a_broken_template_does_not_stop_a_dataset_build(tmp_path):
    from digits_core import registry
    from digits_core.datasets import create_dataset, open_dataset

    registry.register(BrokenTemplate)
    try:
        job = create_dataset("startup-broken-template", {"count": 3}, workers=1, jobs_dir=tmp_path)
    finally:
        registry.unregister(BrokenTemplate)
    assert open_dataset(job.path).count("train") == 3


def test_the_cli_imports_command_modules_only_up_to_the_one_it_runs():
    code = (
        "import sys; from digits_core.cli import build_parser, _command_of; "
        "assert _command_of(['--jobs-dir', 'train', '-v', 'dataset', 'create']) == 'dataset'; "
        "assert _command_of(['--version']) is None; "
        "build_parser('dataset'); print(sorted(m for m in sys.modules if m.endswith('_cmd'))); "
        "build_parser('no-such-command'); print('digits_core.cli.train_cmd' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, everything = out.strip().splitlines()[-2:]
    assert "dataset_cmd" in first and "train_cmd" not in first and "download_cmd" not in first
    assert everything == "True"
