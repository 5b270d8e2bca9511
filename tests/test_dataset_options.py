"""Dataset job options are declared once (digits_core/datasets/options.py); docs and front doors follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synthetic_plugins import SyntheticShapes

from digits_core import registry
from digits_core.datasets.options import (
    DATASET_OPTIONS,
    DatasetOptionsError,
    check_dataset_options,
    markdown_table,
)
from digits_core.errors import DatasetError

PAGE = Path(__file__).resolve().parents[1] / "docs" / "datasets.md"


def test_docs_table_is_generated_from_the_declaration():
    text = PAGE.read_text(encoding="utf-8")
    begin, end = "<!-- dataset-options:begin -->\n", "<!-- dataset-options:end -->"
    assert begin in text and end in text
    assert text.split(begin, 1)[1].split(end, 1)[0] == markdown_table(), (
        "docs/datasets.md's dataset options table is stale: paste `python -m digits_core.datasets.options` between the markers"
    )


def test_values_are_normalized_and_empty_means_the_default():
    assert check_dataset_options({"name": "  digits ", "group": " a   b ", "workers": "2", "max_errors": "5%"}) == {
        "name": "digits",
        "group": "a b",
        "workers": 2,
        "max_errors": 0.05,
    }
    assert check_dataset_options({"name": "", "workers": "", "max_errors": " "}) == {
        "name": None,
        "group": None,
        "workers": None,
        "max_errors": None,
    }
    assert check_dataset_options({"max_errors": 10})["max_errors"] == 10


def test_bad_values_and_unknown_options_are_refused_per_option():
    with pytest.raises(DatasetOptionsError) as info:
        check_dataset_options({"workers": 0, "max_errors": "lots", "group": "a\x01b", "wokers": 2}, "new dataset")
    errors = info.value.errors
    assert set(errors) == {"workers", "max_errors", "group", "wokers"}
    assert "at least 1" in errors["workers"][0] and "lots" in errors["max_errors"][0]
    assert "control characters" in errors["group"][0] and "no such dataset job option" in errors["wokers"][0]
    assert isinstance(info.value, DatasetError) and "new dataset" in str(info.value)
    for bad in ("2.5", "-1", True, [2]):
        with pytest.raises(DatasetOptionsError, match="workers"):
            check_dataset_options({"workers": bad})
    with pytest.raises(DatasetOptionsError, match="at most 200"):
        check_dataset_options({"name": "x" * 201})


def test_every_option_is_a_job_record_key():
    from digits_core.jobs.record import JobRecord

    declared = set(JobRecord.__required_keys__) | set(JobRecord.__optional_keys__)
    assert {o.name for o in DATASET_OPTIONS} <= declared


@pytest.fixture
def plugin():
    registry.register(SyntheticShapes)
    yield SyntheticShapes
    registry.unregister(SyntheticShapes)


def test_cli_job_flags_are_the_declared_options(plugin):
    from digits_core.cli.dataset_cmd import plugin_create_parser

    parser, _names = plugin_create_parser(plugin.plugin_id, plugin)
    group = next(g for g in parser._action_groups if g.title == "job options")
    flags = {a.option_strings[0]: a.dest for a in group._group_actions}
    assert flags == {**{o.flag: o.name for o in DATASET_OPTIONS}, "--json": "json", "--quiet": "quiet"}


OPTION_VALUES = {"name": " parity ", "group": "g  1", "workers": "2", "max_errors": "5%"}


def _stored(job) -> dict:
    return {key: job.data.get(key) for key in ("name", "group", "workers", "max_errors")}


def test_cli_and_python_api_store_the_same_job_options(plugin, jobs_dir):
    from digits_core.cli.dataset_cmd import plugin_create_parser
    from digits_core.datasets import create_dataset_job
    from digits_core.datasets.options import options_from_cli

    parser, _names = plugin_create_parser(plugin.plugin_id, plugin)
    argv = [arg for o in DATASET_OPTIONS for arg in (o.flag, OPTION_VALUES[o.name])]
    from_cli = create_dataset_job(plugin.plugin_id, {}, jobs_dir=jobs_dir, **options_from_cli(parser.parse_args(argv)))
    from_api = create_dataset_job(plugin.plugin_id, {}, jobs_dir=jobs_dir, **OPTION_VALUES)
    expected = {"name": "parity", "group": "g 1", "workers": 2, "max_errors": 0.05}
    assert _stored(from_cli) == _stored(from_api) == expected
    default = create_dataset_job(plugin.plugin_id, {}, jobs_dir=jobs_dir)
    assert _stored(default) == {"name": plugin.plugin_id, "group": None, "workers": None, "max_errors": 0.05}


@pytest.fixture
def web(plugin, tmp_path, monkeypatch):
    """A test client whose jobs are created and left queued (the scheduler does not start them)."""
    from digits_core.web import create_app

    app = create_app(tmp_path / "jobs", testing=True)
    scheduler = app.extensions["digits"]["scheduler"]
    monkeypatch.setattr(scheduler, "submit", lambda job: None)
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    yield client, token, app.extensions["digits"]["store"]
    scheduler.shutdown()


def test_web_form_and_json_api_store_what_the_cli_stores(web):
    client, token, store = web
    page = client.get(f"/datasets/new/{SyntheticShapes.plugin_id}").get_data(as_text=True)
    for option in DATASET_OPTIONS:  # every declared option is a field of the page, with its default shown
        assert f'name="{option.web_field}"' in page and f'placeholder="{option.default_text}"' in page
    form = {"csrf_token": token, "count": "3", **{o.web_field: OPTION_VALUES[o.name] for o in DATASET_OPTIONS}}
    assert client.post(f"/datasets/new/{SyntheticShapes.plugin_id}", data=form).status_code == 302
    resp = client.post(
        "/api/datasets",
        json={"plugin_id": SyntheticShapes.plugin_id, "form_data": {}, **OPTION_VALUES},
        headers={"X-CSRFToken": token},
    )
    assert resp.status_code == 202, resp.get_data(as_text=True)
    jobs = store.list()
    assert len(jobs) == 2
    expected = {"name": "parity", "group": "g 1", "workers": 2, "max_errors": 0.05}
    assert [_stored(job) for job in jobs] == [expected, expected]
    clone = client.get(f"/datasets/new/{SyntheticShapes.plugin_id}?clone={jobs[0].id}").get_data(as_text=True)
    for field, value in (
        ("job_group", "g 1"),
        ("job_workers", "2"),
        ("job_max_errors", "0.05"),
        ("job_name", "parity (clone)"),
    ):  # a clone starts from the same options
        assert re.search(f'name="{field}"[^>]*value="{re.escape(value)}"', clone), field
    # Empty fields mean the declared defaults, as on the command line.
    blank = {"csrf_token": token, "count": "3", **{o.web_field: "" for o in DATASET_OPTIONS}}
    assert client.post(f"/datasets/new/{SyntheticShapes.plugin_id}", data=blank).status_code == 302
    (default,) = [job for job in store.list() if job.name != "parity"]
    assert _stored(default) == {"name": SyntheticShapes.plugin_id, "group": None, "workers": None, "max_errors": 0.05}


def test_web_and_api_refuse_bad_or_unknown_options_naming_them(web):
    client, token, store = web
    form = {"csrf_token": token, "count": "3", "job_workers": "0", "job_max_errors": "lots"}
    html = client.post(f"/datasets/new/{SyntheticShapes.plugin_id}", data=form).get_data(as_text=True)
    assert html.count('data-for="job_workers"') == 1 and html.count('data-for="job_max_errors"') == 1  # one message
    resp = client.post(
        "/api/datasets",
        json={"plugin_id": SyntheticShapes.plugin_id, "form_data": {}, "wokers": 2},
        headers={"X-CSRFToken": token},
    )
    assert resp.status_code == 400 and "wokers" in resp.get_json()["error"]["fields"]
    assert store.list() == []
