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

TRAINING_PAGE = Path(__file__).resolve().parents[1] / "docs" / "training.md"


def test_every_option_is_declared_once_and_docs_match():
    fields = {f.name for f in dataclasses.fields(TrainingOptions) if f.name != "augmentation"}
    fields |= {f"aug_{f.name}" for f in dataclasses.fields(Augmentation)}
    assert fields == set(BY_NAME), "TrainingOptions fields and option_specs differ"
    text = TRAINING_PAGE.read_text(encoding="utf-8")
    begin, end = "<!-- training-options:begin -->\n", "<!-- training-options:end -->"
    assert begin in text and end in text
    documented = text.split(begin, 1)[1].split(end, 1)[0]
    assert documented == markdown_table(), (
        "docs/training.md's options table is stale: paste `python -m digits_core.engine.option_specs` between the markers"
    )


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


@pytest.mark.parametrize(
    "network,changes",
    [
        ("lenet", {"epochs": 5}),
        ("lenet", {"epochs": 3, "solver": "momentum", "learning_rate": 0.05, "aug_rot90": True}),
        ("unet", {"epochs": 2, "lr_policy": "step", "shuffle": False}),
    ],
)
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

    resp = client.post(
        "/api/models",
        json={"name": "m", "dataset": ds.id, "network": network, "options": changes},
        headers={"X-CSRFToken": token},
    )
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
    assert (
        "&#34;momentum&#34;: {&#34;policies&#34;: null, &#34;solvers&#34;: [&#34;momentum&#34;" in page
        or "momentum" in htmllib.unescape(re.search(r'data-options="([^"]*)"', page).group(1))
    )


# -- volume networks (issue 29): the same one truth on a DHWC dataset ----------------------------------

_VOLUME_FIELDS = {
    "epochs": "epochs",
    "batch_size": "batch_size",
    "learning_rate": "learning_rate",
    "validation_interval": "val_every",
    "volume_steps_per_epoch": "steps_per_epoch",
    "volume_foreground": "foreground",
    "volume_base_filters": "base_filters",
    "volume_levels": "levels",
    "volume_adjacent_slices": "adjacent_slices",
    "volume_overlap": "overlap",
}


@pytest.fixture(scope="module")
def volume_web(tmp_path_factory):
    """A web app over a jobs folder holding a tiny real ``msd-volumes`` dataset (4 synthetic cases of 8×16×16)."""
    from digits_core.datasets import create_dataset
    from digits_data_volumes.synth import generate

    root = tmp_path_factory.mktemp("volume-options")
    synth = generate(root / "synth", cases=4, shape=(8, 16, 16), dicom=False)
    ds = create_dataset(
        "msd-volumes", {"data_folder": str(synth.task), "pct_val": 25}, jobs_dir=root / "jobs", workers=1
    )
    app = create_app(root / "jobs", start_scheduler=False, testing=True)
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    return app, client, token, ds


@pytest.mark.parametrize("network", ["unet3d", "unet2.5d"])
@pytest.mark.parametrize(
    "changes",
    [
        {},  # every door with its defaults: the unet3d / unet2.5d figures of docs/medical-imaging.md
        {"epochs": 30, "learning_rate": 0.01, "validation_interval": 1},  # the 2-D engine defaults, typed on purpose
        {"volume_patch": "8,8,8", "volume_overlap": 0.25, "volume_base_filters": 4, "volume_steps_per_epoch": 7},
    ],
)
def test_volume_networks_cli_web_and_api_resolve_the_same_run(volume_web, network, changes):
    """``digits train``, the New Model form as shown, the JSON API and ``digits_core.train`` plan one run."""
    import dataclasses

    from digits_core.engine.volume_train import volume_config

    app, client, token, ds = volume_web
    jobs_dir = app.extensions["digits"]["jobs_dir"]
    store = app.extensions["digits"]["store"]
    argv = ["--dataset", ds.id, "--network", network]
    for name, value in changes.items():
        argv += [BY_NAME[name].flag, str(value)]
    cli = _cli_options(argv)

    page, form = _shown_form(client, f"{network}&dataset={ds.id}")
    assert form["network"] == network and form["dataset"] == ds.id
    defaults = volume_config(ds.id, network, jobs_dir=jobs_dir)
    for name, attr in _VOLUME_FIELDS.items():  # the page shows what a run with nothing typed uses
        assert float(form[name]) == float(getattr(defaults, attr)), (name, form[name], getattr(defaults, attr))
    assert form["volume_patch"] == ""  # empty: ¾ of the median case, resolved from the dataset
    form.update({"csrf_token": token, "model_name": "m"})
    for name, value in changes.items():
        form[name] = str(value)
    resp = client.post("/models/new", data=form)
    assert resp.status_code == 302, resp.get_data(as_text=True)[:1500]
    web_job = store.get(resp.headers["Location"].rsplit("/", 1)[1])
    web = web_job.train_options
    assert (web.pop("dataset"), web.pop("network")) == (ds.id, network)

    resp = client.post(
        "/api/models",
        json={"name": "m", "dataset": ds.id, "network": network, "options": changes},
        headers={"X-CSRFToken": token},
    )
    assert resp.status_code == 202, resp.get_json()
    api = store.get(resp.get_json()["id"]).train_options
    assert (api.pop("dataset"), api.pop("network")) == (ds.id, network)

    # what train() (CLI, Python API) and train_existing_job() (the web and JSON API's worker) hand the volume run
    planned = [
        dataclasses.asdict(volume_config(ds.id, network, jobs_dir=jobs_dir, **opts))
        for opts in (cli, web, api, changes)
    ]
    assert planned[0] == planned[1] == planned[2] == planned[3], planned
    run = planned[0]
    assert run["network"] == network
    for name, value in changes.items():
        if name == "volume_patch":
            assert run["patch"] == [int(v) for v in value.split(",")]
        else:
            assert run[_VOLUME_FIELDS[name]] == value, name
    if not changes:  # the defaults the figures of docs/medical-imaging.md were measured with
        assert (run["epochs"], run["steps_per_epoch"], run["val_every"], run["batch_size"]) == (40, 25, 5, 2)
        assert (run["learning_rate"], run["base_filters"], run["levels"], run["overlap"]) == (1e-3, 8, 3, 0.5)
        assert run["patch"] == ([4, 12, 12] if network == "unet3d" else [1, 12, 12])  # ¾ of 8×16×16, ÷4


def test_the_volume_run_has_no_defaults_of_its_own():
    """One table: a volume run's settings come from the option specs under VOLUME_DEFAULTS, never from VolumeConfig."""
    import dataclasses

    from digits_core.engine.options import TrainingOptions
    from digits_core.engine.volume_nets import VOLUME_DEFAULTS
    from digits_core.engine.volume_train import VolumeConfig, _config

    own = [f.name for f in dataclasses.fields(VolumeConfig) if f.default is not dataclasses.MISSING]
    assert not own, f"VolumeConfig declares defaults of its own: {own}"
    info = {"stages": {"train": {"shapes": [[8, 16, 16, 1]]}}}
    run = dataclasses.asdict(_config("unet3d", info, {}))
    resolved = TrainingOptions.resolve(VOLUME_DEFAULTS, {})
    for name, attr in _VOLUME_FIELDS.items():  # the volume networks' own table, else the option spec's default
        expected = VOLUME_DEFAULTS.get(name, BY_NAME[name].default)
        assert run[attr] == getattr(resolved, name) == expected, (name, run[attr], expected)
