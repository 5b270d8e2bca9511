"""Every route × every role × every kind of object through the accounts gate (issue 47), generated from ``app.url_map``.

A new route without an entry in ``accounts_views.RULES`` fails
:func:`test_every_route_has_an_access_rule`; the matrix then checks the gate's
answer for each route, role and object (one's own job, another user's private
job, another's job shared with one's group, another's job shared with a group
one is not in, another's public job) against the rules of the roles written out
here, independently of :func:`digits_core.accounts.authorize`.
"""

from __future__ import annotations

import pytest
from werkzeug.exceptions import HTTPException

from digits_core.accounts import AccountStore
from digits_core.errors import JobNotFoundError
from digits_core.jobs import Job, write_json_atomic
from digits_core.sweeps.record import sweeps_root
from digits_core.web import accounts_views
from digits_core.web.app import create_app

ROLES = {"root": "admin", "ada": "trainer", "ann": "annotator", "vic": "viewer"}
#: Endpoints that take POST but only read (run a model, preview a network, download): anyone who may read the job.
READING_POSTS = {
    "api.infer",
    "inference.infer",
    "top_n.top_n",
    "tf_serving.predict",
    "tf_serving.predict_version",
    "network.form_network",
    "models.download",
}


#: The objects a request may name, as seen by the requesting user: bob's jobs other than "own".
OBJECTS = ("own", "private", "my group's", "another group's", "public")


def _may(role: str, action: str, obj: str | None) -> bool:
    """The rules of docs/accounts.md, written out (``obj`` None: the route names no job)."""
    if action == "public" or role == "admin":
        return True
    if action == "admin":
        return False
    readable = obj in (None, "own", "my group's", "public")
    if action == "read":
        return readable
    if action == "review":
        return role in ("annotator", "trainer") and readable
    if action == "create":
        return role == "trainer" and readable  # from a job one may read
    return role == "trainer" and obj == "own"  # manage: one's own job only, shared or not


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    store = AccountStore(root)
    tokens = {}
    for name, role in ROLES.items():
        store.add_user(name, role, "password-" + name)
        tokens[name] = store.create_token(name, "t")
    store.add_user("bob", "trainer", "password-bob")
    store.add_to_group("lab", list(ROLES))
    store.add_to_group("other", ["bob"])
    jobs = {("own", n): Job.create("model", f"{n}'s", jobs_dir=root, owned_by=n).id for n in ROLES}
    sharing: dict[str, dict] = {
        "private": {},
        "my group's": {"shared_with": ["lab"]},
        "another group's": {"shared_with": ["other"]},
        "public": {"visibility": "public"},
    }
    for obj, fields in sharing.items():
        jobs[obj] = Job.create("model", f"bob's {obj}", jobs_dir=root, owned_by="bob", **fields).id
    sweeps = {("own", n): _sweep(root, f"sweep-of-{n}", owned_by=n) for n in ROLES}
    sweeps.update({obj: _sweep(root, f"bobs-{i}", owned_by="bob", **f) for i, (obj, f) in enumerate(sharing.items())})
    return create_app(root, start_scheduler=False, testing=True, secret_key="k"), tokens, jobs, sweeps


def _sweep(root, sweep_id: str, **fields) -> str:
    """A sweep's record as a sweep writes it (no trials): the gate reads its owner and sharing from it."""
    settings = {"metric": "val_accuracy", "mode": "max", "max_epochs": 1, "scheduler": "grid"}
    record = {"id": sweep_id, "name": sweep_id, "group": sweep_id, "dataset": "d", "network": "lenet"}
    folder = sweeps_root(root) / sweep_id
    folder.mkdir(parents=True)
    write_json_atomic(folder / "sweep.json", {**record, "settings": settings, "search": [], "trials": [], **fields})
    return sweep_id


def _routes(app):
    for rule in app.url_map.iter_rules():
        methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
        yield rule, methods


def test_every_route_has_an_access_rule(world):
    app, *_ = world
    missing = sorted({r.endpoint for r, _ in _routes(app)} - set(accounts_views.RULES))
    assert not missing, f"add an access rule to digits_core.web.accounts_views.RULES for: {missing}"
    stale = sorted(set(accounts_views.RULES) - {r.endpoint for r, _ in _routes(app)})
    assert not stale, f"rules for endpoints that are gone: {stale}"


def test_state_changing_routes_are_not_read_rules(world):
    app, *_ = world
    for rule, methods in _routes(app):
        action = accounts_views.RULES[rule.endpoint][0]
        if action == "read" and "GET" not in methods and rule.endpoint not in READING_POSTS:
            pytest.fail(f"{rule.endpoint} only changes state ({methods}) but its rule only asks to read")


def _decision(app, url, method, token, data):
    with app.test_request_context(url, method=method, headers={"Authorization": f"Bearer {token}"}, **data):
        try:
            return accounts_views._gate() is None
        except HTTPException as exc:
            assert exc.code in (403, 404), (url, exc)
            return False
        except JobNotFoundError:  # another user's private job: answered as one that does not exist
            return False


def test_every_route_every_role_every_kind_of_object(world):
    app, tokens, jobs, sweeps = world
    checked = 0
    for rule, methods in _routes(app):
        action, where = accounts_views.RULES[rule.endpoint]
        for user, role in ROLES.items():
            for obj in OBJECTS:
                key = ("own", user) if obj == "own" else obj
                job = jobs[key]
                values = {a: "x" for a in rule.arguments}
                data: dict = {}
                query = ""
                if where and where.startswith("param:"):
                    data = {"json": {where[len("param:") :]: job}}
                elif where and where.startswith("sweep:"):
                    values[where[len("sweep:") :]] = sweeps[key]
                elif where and where.startswith("jobs:"):
                    query = f"?{where[len('jobs:') :]}={jobs[('own', user)]},{job}"
                elif where:
                    values[where] = job  # the URL part that names the job (job_id, name, ...)
                elif obj != "own":
                    continue  # no job in this route: one answer per role
                url = rule.build(values)[1] + query
                for method in methods:
                    expected = _may(role, action, obj if where else None)
                    assert _decision(app, url, method, tokens[user], data) is expected, (
                        rule.endpoint,
                        method,
                        role,
                        obj,
                    )
                    checked += 1
    assert checked > 1000


def test_a_job_without_owner_is_readable_by_all_and_managed_by_admins_only(world):
    app, tokens, *_ = world
    legacy = Job.create("model", "from the CLI", jobs_dir=app.extensions["digits"].jobs_dir).id
    assert _decision(app, f"/models/{legacy}", "GET", tokens["vic"], {})
    assert not _decision(app, f"/api/jobs/{legacy}", "DELETE", tokens["ada"], {})
    assert _decision(app, f"/api/jobs/{legacy}", "DELETE", tokens["root"], {})


def test_tf_serving_by_name_cannot_reach_another_trainers_private_model(world):
    app, tokens, *_ = world
    assert not _decision(app, "/v1/models/bob's private:predict", "POST", tokens["ada"], {"json": {}})
    assert _decision(app, "/v1/models/bob's my group's:predict", "POST", tokens["ada"], {"json": {}})
    assert _decision(app, "/v1/models/ada's:predict", "POST", tokens["ada"], {"json": {}})
