"""Single sign-on (issue 47): a real OpenID Connect provider on 127.0.0.1 (Authlib's server side) signs users in.

The DIGITS app runs in Flask's test client; the provider is a real HTTP server, so
the browser's hops are followed by hand and the server-side token request, the
discovery and the key set go over the network as in production.
"""

from __future__ import annotations

import json
import urllib.parse

import pytest
import requests

from digits_core.accounts import AccountStore
from digits_core.web.app import create_app

pytest.importorskip("authlib")
from oidc_provider import OidcProvider  # noqa: E402 - needs Authlib

CALLBACK = "http://localhost/account/oidc/callback"


@pytest.fixture
def sso(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")  # the provider speaks plain HTTP on 127.0.0.1
    monkeypatch.setenv("TEST_OIDC_SECRET", "s3cret-of-the-client")
    provider = OidcProvider("digits", "s3cret-of-the-client", CALLBACK).start()
    (tmp_path / "oidc.json").write_text(
        json.dumps(
            {
                "issuer": provider.issuer,
                "client_id": "digits",
                "client_secret_env": "TEST_OIDC_SECRET",
                "roles": {"lab-ml": "trainer", "lab": "viewer", "lab-admins": "admin"},
                "groups": {"lab-ml": "ml", "lab-cardiac": "cardiac"},
            }
        )
    )
    AccountStore(tmp_path).add_user("root", "admin", "a local password")
    app = create_app(tmp_path, start_scheduler=False, testing=True, secret_key="k")
    yield app, provider, tmp_path
    provider.stop()


def _sign_on(app, provider, user):
    provider.user = user
    client = app.test_client()
    start = client.get("/account/oidc")
    assert start.status_code == 302
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(start.headers["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"] and query["nonce"]
    back = requests.get(start.headers["Location"], allow_redirects=False, timeout=30)
    assert back.status_code == 302 and back.headers["Location"].startswith(CALLBACK), back.text
    return client, client.get(back.headers["Location"][len("http://localhost") :])


def test_an_oidc_sign_in_lands_with_the_role_its_groups_map_to(sso):
    app, provider, tmp_path = sso
    client, landed = _sign_on(app, provider, {"sub": "u-1", "preferred_username": "carol", "groups": ["lab", "lab-ml"]})
    assert landed.status_code == 302 and landed.headers["Location"].endswith("/")
    store = AccountStore(tmp_path)
    store.add_to_group("local", ["carol"])  # a group an admin made: not the provider's to change
    store.add_to_group("cardiac", ["carol"])  # a mapped group her provider does not list (any more)
    client, _ = _sign_on(app, provider, {"sub": "u-1", "preferred_username": "carol", "groups": ["lab", "lab-ml"]})
    assert store.get_user("carol").role == "trainer"
    assert store.get_user("carol").groups == ("local", "ml")  # the provider's groups mapped; cardiac left
    assert client.get("/api/jobs").status_code == 200
    viewer, _ = _sign_on(app, provider, {"sub": "u-2", "preferred_username": "dan", "groups": ["lab"]})
    assert viewer.post("/api/datasets", json={}).status_code in (400, 403)  # no CSRF token, and no right either
    audit = (tmp_path / "audit.jsonl").read_text()
    assert '"sign-in (oidc)"' in audit and "s3cret-of-the-client" not in audit


def test_a_provider_user_without_a_mapped_group_or_named_like_a_local_user_is_refused(sso):
    app, provider, tmp_path = sso
    client, refused = _sign_on(app, provider, {"sub": "u-3", "preferred_username": "eve", "groups": ["other"]})
    assert refused.status_code == 403 and client.get("/api/jobs").status_code == 401
    client, refused = _sign_on(app, provider, {"sub": "u-4", "preferred_username": "root", "groups": ["lab-admins"]})
    assert refused.status_code == 403 and client.get("/api/jobs").status_code == 401


def test_a_forged_callback_is_refused(sso):
    app, provider, _ = sso
    client = app.test_client()
    client.get("/account/oidc")
    assert client.get("/account/oidc/callback?code=made-up&state=made-up").status_code == 400
    assert client.get("/api/jobs").status_code == 401
