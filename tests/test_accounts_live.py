"""A real ``digits serve`` with user accounts (issue 47): two trainers, a viewer and an admin over HTTP.

Bob's private model is reached by Ada through every page and API that names a
model (its id and name taken from Bob's own URLs): each answers 404, as for a
job that does not exist; the viewer cannot create; the admin can do all; a
revoked token is refused on its next request.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from digits_core.accounts import AccountStore
from digits_core.jobs import Job

pytestmark = pytest.mark.slow


@pytest.fixture
def lab_server(live_server, tmp_path):
    jobs = tmp_path / "jobs"
    store = AccountStore(jobs)
    tokens = {}
    for name, role in (("root", "admin"), ("ada", "trainer"), ("bob", "trainer"), ("vic", "viewer")):
        store.add_user(name, role, f"password of {name}")
        tokens[name] = store.create_token(name, "t")
    bob_model = Job.create("model", "bobs-net", jobs_dir=jobs, owned_by="bob", network="lenet").id
    ada_model = Job.create("model", "adas-net", jobs_dir=jobs, owned_by="ada", network="lenet").id
    return live_server(jobs), tokens, bob_model, ada_model


def test_two_trainers_a_viewer_and_an_admin_on_a_real_server(lab_server):
    server, tokens, bob_model, ada_model = lab_server
    ada, bob, vic, root = (tokens[n] for n in ("ada", "bob", "vic", "root"))
    assert "Sign in" in server.get("/", token=False).text  # redirected to the sign-in page
    assert server.get(f"/models/{bob_model}", token=bob).status == 200
    listed = json.dumps(server.get_json("/api/jobs", token=ada))
    assert ada_model in listed and bob_model not in listed
    assert bob_model not in server.get("/", token=ada).text
    for method, path, body in (
        ("GET", f"/models/{bob_model}", None),
        ("GET", f"/jobs/{bob_model}", None),
        ("GET", f"/models/{bob_model}/metrics.json", None),
        ("GET", f"/models/{bob_model}/network", None),
        ("GET", f"/models/{bob_model}/download", None),
        ("GET", f"/models/{bob_model}/export/savedmodel.tar.gz", None),
        ("POST", f"/models/{bob_model}/export", {}),
        ("POST", f"/api/models/{bob_model}/infer", {}),
        ("POST", f"/api/jobs/{bob_model}/abort", {}),
        ("DELETE", f"/api/jobs/{bob_model}", None),
        ("GET", f"/v1/models/{bob_model}", None),
        ("GET", "/v1/models/bobs-net", None),
        ("POST", "/v1/models/bobs-net:predict", {"instances": [[0]]}),
        ("POST", f"/v1/models/{bob_model}:predict", {"instances": [[0]]}),
        ("POST", "/api/evaluations", {"model": bob_model}),
    ):
        answer = server.request(path, method=method, data=body, token=ada)
        assert answer.status == 404, (method, path, answer.status, answer.text[:300])
        assert "bobs-net" not in answer.text or "bobs-net" in path  # nothing of the model but what was typed
    refused = server.request("/api/models", method="POST", data={"name": "x", "network": "lenet"}, token=vic)
    assert refused.status == 403
    assert server.get(f"/models/{bob_model}", token=root).status == 200
    assert server.request(f"/api/jobs/{bob_model}", method="DELETE", token=root).status in (200, 202, 204)
    assert server.get(f"/models/{bob_model}", token=bob).status == 404  # gone
    # a revoked token is refused on its very next request
    subprocess.run(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(server.jobs_dir), "users", "revoke", "ada", "t"],
        check=True,
        capture_output=True,
    )
    assert server.get("/api/jobs", token=ada).status == 401
    audit = (server.jobs_dir / "audit.jsonl").read_text()
    assert "password of" not in audit and "password of" not in server.output()
    assert any(
        json.loads(line)["object"] == bob_model and not json.loads(line)["allowed"] for line in audit.splitlines()
    )
