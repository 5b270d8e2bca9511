"""One declaration of the training options: CLI flags, web form, JSON API and docs agree (no TensorFlow)."""

from __future__ import annotations

import dataclasses
import html as htmllib
import re
from pathlib import Path

import pytest

from digits_core.engine.option_specs import BY_NAME, TRAINING_OPTIONS, effective_defaults, markdown_table
from digits_core.engine.options import Augmentation, TrainingOptions
from digits_core.jobs import Job, JobStatus
from digits_core.web import create_app

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_option_is_declared_once_and_docs_match():
    fields = {f.name for f in dataclasses.fields(TrainingOptions) if f.name != "augmentation"}
    fields |= {f"aug_{f.name}" for f in dataclasses.fields(Augmentation)}
    assert fields == set(BY_NAME), "TrainingOptions fields and option_specs differ"
    text = README.read_text(encoding="utf-8")
    begin, end = "<!-- training-options:begin -->\n", "<!-- training-options:end -->"
    assert begin in text and end in text
    documented = text.split(begin, 1)[1].split(end, 1)[0]
    assert documented == markdown_table(), \
        "README's options table is stale: paste `python -m digits_core.engine.option_specs` between the markers"


def test_declared_ranges_are_what_the_engine_enforces():
    for spec in TRAINING_OPTIONS:
        if spec.kind not in ("int", "float") or spec.minimum is None:
            continue
        bad = spec.minimum if spec.exclusive_min else spec.minimum - 1
        with pytest.raises(Exception) as err:
            TrainingOptions.from_kwargs(**{spec.name: bad})
        assert spec.name in str(err.value)


def _cli_options(argv):
    import argparse

    from digits_core.cli.train_cmd import _options_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return _options_from_args(parser.parse_args(["train", *argv]))


@pytest.fixture
def web(tmp_path):
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    ds = Job.create("dataset", "ds", jobs_dir=app.extensions["digits"]["jobs_dir"], plugin_id="image-classification")
    ds.set_status(JobStatus.DONE)
    return app, client, token, ds


def _shown_form(client, network):
    """What a browser without JavaScript submits: every field of the page as shown for ``network``."""
    page = client.get(f"/models/new?network={network}").get_data(as_text=True)
    values = {}
    for tag in re.findall(r"<(?:input|select|textarea)[^>]*>", page):
        name = re.search(r'name="([^"]+)"', tag)
        if not name or 'type="hidden"' in tag:
            continue
        value = re.search(r'value="([^"]*)"', tag)
        values[name.group(1)] = htmllib.unescape(value.group(1)) if value and "<input" in tag else ""
    for name, body in re.findall(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', page, re.S):
        chosen = re.search(r'<option selected value="([^"]*)"|<option value="([^"]*)" selected', body)
        values[name] = htmllib.unescape(next(g for g in chosen.groups() if g is not None)) if chosen else ""
    return page, values


@pytest.mark.parametrize("network,changes", [
    ("lenet", {"epochs": 5}),
    ("lenet", {"epochs": 3, "solver": "momentum", "learning_rate": 0.05, "aug_rot90": True}),
    ("unet", {"epochs": 2, "lr_policy": "step", "shuffle": False}),
])
def test_cli_web_and_api_give_identical_options(web, network, changes):
    from digits_core.engine.networks import resolve_network

    app, client, token, ds = web
    argv = ["--dataset", ds.id, "--network", network]
    for name, value in changes.items():
        spec = BY_NAME[name]
        argv += [spec.flag] if spec.kind == "bool" else [spec.flag, str(value)]
    cli = _cli_options(argv)

    page, form = _shown_form(client, network)
    defaults = effective_defaults(resolve_network(network).defaults)
    assert form["solver"] == defaults["solver"] and float(form["learning_rate"]) == defaults["learning_rate"]
    form.update({"csrf_token": token, "model_name": "m", "dataset": ds.id, "network": network})
    for name, value in changes.items():
        form[name] = ("true" if value else "false") if BY_NAME[name].kind == "bool" else str(value)
    resp = client.post("/models/new", data=form)
    assert resp.status_code == 302, resp.get_data(as_text=True)[:1500]
    web_job = app.extensions["digits"]["store"].get(resp.headers["Location"].rsplit("/", 1)[1])
    web_opts = {k: v for k, v in web_job.data["train_options"].items() if k not in ("dataset", "network")}

    resp = client.post("/api/models", json={"name": "m", "dataset": ds.id, "network": network, "options": changes},
                       headers={"X-CSRFToken": token})
    assert resp.status_code == 202, resp.get_json()
    api_job = app.extensions["digits"]["store"].get(resp.get_json()["id"])
    api_opts = {k: v for k, v in api_job.data["train_options"].items() if k not in ("dataset", "network")}

    net_defaults = resolve_network(network).defaults
    resolved = [TrainingOptions.resolve(net_defaults, o).to_dict() for o in (cli, web_opts, api_opts, changes)]
    assert resolved[0] == resolved[1] == resolved[2] == resolved[3]
    if resolved[0]["solver"] not in ("momentum", "nesterov"):
        assert "momentum" not in resolved[0]


def test_form_hides_what_does_not_apply_and_shows_network_defaults(web):
    _, client, _, _ = web
    page, form = _shown_form(client, "lenet")
    assert form["solver"] == "adam" and form["learning_rate"] == "0.001"
    for spec in TRAINING_OPTIONS:
        if spec.web == "auto":
            assert f'data-field="{spec.name}"' in page, spec.name
    assert '&#34;momentum&#34;: {&#34;policies&#34;: null, &#34;solvers&#34;: [&#34;momentum&#34;' in page or \
        "momentum" in htmllib.unescape(re.search(r'data-options="([^"]*)"', page).group(1))
