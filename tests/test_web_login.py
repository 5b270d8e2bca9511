"""Login hardening: same-server `next` only, throttled wrong tokens, server-side logout by POST, idle expiry.

Time is a fake clock handed to the app's LoginState: nothing here waits or
measures wall-clock time.
"""

from __future__ import annotations

import pytest

from digits_core.web import create_app
from digits_core.web.login import FREE_FAILURES, safe_next

TOKEN = "s3cret-token"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world(tmp_path):
    app = create_app(
        tmp_path / "jobs",
        auth_token=TOKEN,
        start_scheduler=False,
        testing=True,
        data_roots=[tmp_path],
        session_idle_minutes=30,
    )
    clock = Clock()
    state = app.extensions["digits"]["login"]
    state.clock = clock
    return app, state, clock


def login(client, token=TOKEN, next_url="/"):
    page = client.get("/login")
    assert page.status_code == 200
    csrf = page.get_data(as_text=True).split('name="csrf_token" value="')[1].split('"')[0]
    return client.post("/login", data={"csrf_token": csrf, "token": token, "next": next_url})


def logout(client):
    page = client.get("/logout")
    assert page.status_code == 200
    csrf = page.get_data(as_text=True).split('name="csrf_token" value="')[1].split('"')[0]
    return client.post("/logout", data={"csrf_token": csrf})


@pytest.mark.parametrize(
    "target",
    [
        "/%09/evil.example",
        "/\t/evil.example",
        "//evil.example",
        "\\\\evil.example",
        "/\\evil.example",
        "https://evil.example/",
        "https:evil.example",
        "javascript:alert(1)",
        "evil.example",
        "/%2F/evil.example",
        "//%09evil.example",
        "/\n/evil.example",
        " //evil.example",
    ],
)
def test_next_outside_this_server_is_refused(world, target):
    app, _, _ = world
    assert safe_next(target, "/home") == "/home"
    response = login(app.test_client(), next_url=target)
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_next_on_this_server_is_kept(world):
    app, _, _ = world
    assert safe_next("/models/abc?tab=2#top", "/") == "/models/abc?tab=2#top"
    response = login(app.test_client(), next_url="/models/abc?tab=2")
    assert response.headers["Location"] == "/models/abc?tab=2"


def test_wrong_tokens_are_throttled_with_429_and_retry_after(world):
    app, _, clock = world
    client = app.test_client()
    for _ in range(FREE_FAILURES):
        assert login(client, token="wrong").status_code == 401
    refused = login(client, token=TOKEN)  # even the right token waits: guessing cannot go on
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) == 1
    assert client.get("/index.json").status_code == 401
    clock.now += 1
    assert login(client, token="wrong").status_code == 401
    assert int(login(client, token=TOKEN).headers["Retry-After"]) == 2  # exponential
    clock.now += 2
    assert login(client, token="wrong").status_code == 401
    assert int(login(client, token=TOKEN).headers["Retry-After"]) == 4
    clock.now += 4
    assert login(client, token=TOKEN).status_code == 302
    assert client.get("/index.json").status_code == 200
    logout(client)
    assert login(client, token="wrong").status_code == 401  # a known browser counts on its own now


def test_wrong_header_tokens_are_throttled_too(world):
    app, _, clock = world
    client = app.test_client()
    for _ in range(FREE_FAILURES):
        assert client.get("/index.json", headers={"Authorization": "Bearer nope"}).status_code == 401
    refused = client.get("/index.json", headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    other = app.test_client()
    other_peer = other.get(
        "/index.json", headers={"Authorization": f"Bearer {TOKEN}"}, environ_base={"REMOTE_ADDR": "10.0.0.9"}
    )
    assert other_peer.status_code == 200  # per network
    clock.now += 1
    assert client.get("/index.json", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_logout_ends_the_session_on_the_server(world):
    app, _, _ = world
    client = app.test_client()
    assert login(client).status_code == 302
    cookie = client.get_cookie("session").value
    assert client.get("/index.json").status_code == 200
    logout(client)
    replay = app.test_client()
    replay.set_cookie("session", cookie)  # the cookie copied before logout
    assert replay.get("/index.json").status_code == 401


def test_an_idle_session_expires(world):
    app, _, clock = world
    client = app.test_client()
    login(client)
    clock.now += 29 * 60
    assert client.get("/index.json").status_code == 200  # use restarts the idle timer
    clock.now += 29 * 60
    assert client.get("/index.json").status_code == 200
    clock.now += 31 * 60
    assert client.get("/index.json").status_code == 401
    assert app.permanent_session_lifetime.total_seconds() == 30 * 60
