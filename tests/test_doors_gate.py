"""Every door a training option comes in by refuses a path, URL or address the server must not use (issue 39).

The options are generated from the option specs: every free-text option whose help says it names a
file, path, folder, URL, address or host, each given an existing file outside the data roots, a
missing file, a URL and a bare ``host:port`` of a live listener on 127.0.0.1; plus every server
setting (:data:`digits_core.submit.options.SERVER_SETTINGS`) and the request's own keys smuggled among
its options. Each goes through every web door -- the New Model form, ``POST /api/models``,
``POST /api/sweeps`` (its ``options``, and a server setting also at the top level) and the form's
Search panel -- and must come back refused naming the field, with nothing created in the jobs folder
and no connection on the listener. The two JSON doors give the very same message (one gate). The
command line and the Python API act with the user's own rights (any path, their own jobs folder and
Ray cluster, as docs/security.md says), but neither takes another server setting as a training option. No training, no TensorFlow.
"""

from __future__ import annotations

import html
import json
import re
import socket
import threading

import pytest

from digits_core.engine.option_specs import TRAINING_OPTIONS
from digits_core.errors import FormValidationError
from digits_core.jobs import Job, JobStatus
from digits_core.submit.options import REQUEST_KEYS, SERVER_SETTINGS
from digits_core.web import create_app

#: Free-text options that may carry a path, URL or address, from their declared help.
PATH_OPTIONS = tuple(
    spec.name
    for spec in TRAINING_OPTIONS
    if spec.kind in ("text", "json")
    and re.search(r"\b(files?|paths?|folders?|url|urls|address|host)\b", spec.help, re.IGNORECASE)
)


def test_the_generated_option_list_holds_the_known_path_options():
    assert "pretrained" in PATH_OPTIONS  # a list that generates nothing would prove nothing
    assert "ray_address" in SERVER_SETTINGS and "jobs_dir" in SERVER_SETTINGS


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def world(tmp_path):
    roots = tmp_path / "roots"
    roots.mkdir()
    outside = tmp_path / "outside.keras"
    outside.write_bytes(b"not for web requests")
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[roots])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    jobs = app.extensions["digits"]["jobs_dir"]
    dataset = Job.create("dataset", "ds", jobs_dir=jobs, plugin_id="image-classification")
    dataset.set_status(JobStatus.DONE)
    return {"app": app, "client": client, "token": token, "jobs": jobs, "dataset": dataset, "tmp": tmp_path}


def _values(world, port):
    tmp = world["tmp"]
    return {
        "outside file": str(tmp / "outside.keras"),
        "missing file": str(tmp / "missing.keras"),
        "url": f"http://127.0.0.1:{port}/weights.keras",
        "address": f"127.0.0.1:{port}",
    }


def _value_for(name, text):
    spec = next(s for s in TRAINING_OPTIONS if s.name == name)
    return {"source": text} if spec.kind == "json" else text


def _nothing_created(world):
    jobs = world["jobs"]
    names = sorted(p.name for p in jobs.iterdir())
    assert names == [world["dataset"].id], names
    assert not (world["tmp"] / "elsewhere").exists()


# -- the doors ---------------------------------------------------------------------------------------


def api_models(world, options):
    answer = world["client"].post(
        "/api/models",
        json={"name": "m", "dataset": world["dataset"].id, "network": "lenet", "options": options},
        headers={"X-CSRFToken": world["token"]},
    )
    assert answer.status_code == 400, answer.get_data(as_text=True)[:500]
    return answer.get_json()["error"]["fields"]


def api_sweeps(world, options, **top):
    body = {
        "dataset": world["dataset"].id,
        "network": "lenet",
        "search": ["learning_rate=0.01,0.1"],
        "scheduler": "grid",
        "options": options,
        **top,
    }
    answer = world["client"].post("/api/sweeps", json=body, headers={"X-CSRFToken": world["token"]})
    assert answer.status_code == 400, answer.get_data(as_text=True)[:500]
    return answer.get_json()["error"]["fields"]


def _form(world, fields, search=None):
    from test_web_models import form_values

    values = form_values(world["token"], world["dataset"], **fields)
    if search:
        values.update(search=search, search_scheduler="grid", search_max_epochs="1")
    answer = world["client"].post("/models/new", data=values)
    return answer


def form_errors(answer) -> dict:
    assert answer.status_code == 200, f"{answer.status_code}: the form was accepted"
    found = re.search(r'data-errors="([^"]*)"', answer.get_data(as_text=True))
    assert found, "the page shows no errors"
    return json.loads(html.unescape(found.group(1)))


def new_model_form(world, name, value):
    return form_errors(_form(world, {name: json.dumps(value) if isinstance(value, dict) else value}))


def search_panel(world, name, value):
    fields = {name: json.dumps(value) if isinstance(value, dict) else value}
    return form_errors(_form(world, fields, search="learning_rate=0.01"))


# -- path, URL and address options ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["outside file", "missing file", "url", "address"])
@pytest.mark.parametrize("name", PATH_OPTIONS)
def test_a_path_url_or_address_option_is_refused_alike_by_every_web_door(world, name, kind):
    listener = Listener()
    try:
        value = _value_for(name, _values(world, listener.port)[kind])
        by_models = api_models(world, {name: value})
        by_sweeps = api_sweeps(world, {name: value})
        assert name in by_models and name in by_sweeps, (by_models, by_sweeps)
        assert by_models[name] == by_sweeps[name], "POST /api/sweeps and /api/models must share one gate"
        assert name in new_model_form(world, name, value)
        assert name in search_panel(world, name, value)
        _nothing_created(world)
        assert listener.connections == 0
    finally:
        listener.close()


def test_a_missing_and_an_existing_file_get_the_same_answer(world):
    """No existence oracle: the refusal of a path does not depend on what is there."""
    values = _values(world, 9)
    for name in PATH_OPTIONS:
        outside = api_sweeps(world, {name: _value_for(name, values["outside file"])})[name]
        missing = api_sweeps(world, {name: _value_for(name, values["missing file"])})[name]
        assert [m.replace("outside.keras", "X") for m in outside] == [m.replace("missing.keras", "X") for m in missing]


# -- server settings and the request's own keys ---------------------------------------------------------


def _server_value(world, key, port):
    return {"ray_address": f"127.0.0.1:{port}", "jobs_dir": str(world["tmp"] / "elsewhere")}.get(
        key, str(world["tmp"] / "elsewhere")
    )


@pytest.mark.parametrize("key", sorted(SERVER_SETTINGS))
def test_a_server_setting_is_no_request_option_at_any_door(world, key):
    listener = Listener()
    try:
        value = _server_value(world, key, listener.port)
        by_models = api_models(world, {key: value})
        by_sweeps = api_sweeps(world, {key: value})
        at_top = api_sweeps(world, {}, **{key: value})
        assert by_models[key] == by_sweeps[key] == at_top[key]
        assert "a setting of the server" in by_models[key][0]
        _nothing_created(world)
        # The forms have no such field: a posted one is dropped, never reaching a job or a sweep.
        answer = _form(world, {key: value})
        assert answer.status_code == 302
        answer = _form(world, {key: value}, search="learning_rate=0.01")  # refused later: the dataset has no records
        for job in world["app"].extensions["digits"]["store"].list("model"):
            assert key not in json.dumps(job.data)
        assert not (world["jobs"] / ".sweeps").exists() or not any((world["jobs"] / ".sweeps").iterdir())
        assert not (world["tmp"] / "elsewhere").exists()
        assert listener.connections == 0
    finally:
        listener.close()


@pytest.mark.parametrize("key", REQUEST_KEYS)
def test_the_request_s_own_keys_are_not_options_that_could_replace_the_checked_ones(world, key):
    evil = str(world["tmp"] / "outside.keras")
    by_models = api_models(world, {key: evil})
    by_sweeps = api_sweeps(world, {key: evil})
    assert key in by_models and key in by_sweeps
    _nothing_created(world)


# -- the command line and the Python API ----------------------------------------------------------------


def test_the_python_api_takes_no_server_setting_as_a_training_option(world):
    from digits_core.engine.trainer import train

    for key in sorted(set(SERVER_SETTINGS) - {"jobs_dir"}):  # jobs_dir is the API's own jobs folder argument
        with pytest.raises(FormValidationError) as caught:
            train(world["dataset"].id, "lenet", "x", jobs_dir=world["jobs"], **{key: "127.0.0.1:9"})
        assert key in caught.value.errors
    _nothing_created(world)


def test_the_command_line_has_no_flag_for_a_server_setting_of_a_training_job(world, digits_cli):
    # --jobs-dir and --ray-address are the command-line user's own jobs folder and cluster, not a server's
    flags = [f"--{key.replace('_', '-')}" for key in sorted(set(SERVER_SETTINGS) - {"jobs_dir", "ray_address"})]
    args = ["--jobs-dir", str(world["jobs"]), "train", "--dataset", world["dataset"].id]
    for flag in flags:
        args += [flag, "127.0.0.1:9"]
    result = digits_cli(*args)
    assert result.returncode == 2
    refused = result.stderr.rpartition("unrecognized arguments:")[2]
    for flag in flags:
        assert flag in refused
    _nothing_created(world)


@pytest.mark.parametrize(
    "key, value, limit",
    [("max_concurrent", 10**9, "from 1 to 64"), ("max_concurrent", 0, "from 1 to 64"), ("trials", 10**6, "to 256")],
)
def test_a_sweep_s_settings_are_bounded_with_the_limit_named(world, key, value, limit):
    fields = api_sweeps(world, {}, **{key: value})
    assert limit in fields[key][0]
    _nothing_created(world)


@pytest.mark.slow
def test_a_real_server_refuses_a_sweep_that_names_a_ray_cluster_a_jobs_folder_or_a_file(tmp_path, live_server):
    """As found against ``digits serve``: the listener got 27 connections, a file was loaded, a 500."""
    jobs = tmp_path / "jobs"
    dataset = Job.create("dataset", "ds", jobs_dir=jobs, plugin_id="image-classification")
    dataset.set_status(JobStatus.DONE)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.keras"
    outside.write_bytes(b"x")
    server = live_server(jobs, auth_token="s3cret")
    listener = Listener()
    try:
        base = {"dataset": dataset.id, "network": "lenet", "search": ["learning_rate=0.01,0.1"], "scheduler": "grid"}
        tries = [
            ("ray_address", {**base, "options": {"ray_address": f"127.0.0.1:{listener.port}"}}),
            ("ray_address", {**base, "ray_address": f"127.0.0.1:{listener.port}"}),
            ("jobs_dir", {**base, "options": {"jobs_dir": str(tmp_path / "elsewhere")}}),
            ("pretrained", {**base, "options": {"pretrained": str(outside)}}),
            ("pretrained", {**base, "options": {"pretrained": str(outside) + ".missing"}}),
        ]
        for field, body in tries:
            answer = server.request("/api/sweeps", method="POST", data=body)
            assert answer.status == 400, (field, answer.status, answer.text[:300])
            assert field in answer.json()["error"]["fields"]
        assert listener.connections == 0
        assert not (jobs / ".sweeps").exists() and not (tmp_path / "elsewhere").exists()
        assert sorted(p.name for p in jobs.iterdir() if not p.name.startswith(".")) == [dataset.id]
    finally:
        listener.close()
        outside.unlink()


def test_a_path_inside_a_json_option_is_refused_alike(world):
    """network_params reaches build_model as keyword arguments: a server path there passes the same gate."""
    value = {"weights_file": str(world["tmp"] / "outside.keras")}
    by_models = api_models(world, {"network_params": value})
    by_sweeps = api_sweeps(world, {"network_params": value})
    assert by_models["network_params"] == by_sweeps["network_params"]
    assert "outside" in by_models["network_params"][0] and "data root" in by_models["network_params"][0]
    assert "network_params" in new_model_form(world, "network_params", value)
    _nothing_created(world)
