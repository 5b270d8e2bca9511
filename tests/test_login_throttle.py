"""Fair login throttling, Secure cookies and logout by POST (issue 39, findings 5 and 6).

Each of the first three tests reproduces a problem found against the old
per-address throttle: guesses spread over many addresses were never refused;
a guesser locked everyone on its address out, the right token included; a
victim's good login reset the guesser's count. Time is a fake clock handed to
the app's LoginState: nothing here waits or measures wall-clock time.
"""

from __future__ import annotations

import pytest

from digits_core.errors import ConfigurationError
from digits_core.web import create_app
from digits_core.web.login import FREE_FAILURES, TARGET_FREE_FAILURES, client_network, forwarded_client

TOKEN = "s3cret-token"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_app(tmp_path, **kwargs):
    app = create_app(
        tmp_path / "jobs", auth_token=TOKEN, start_scheduler=False, testing=True, data_roots=[tmp_path], **kwargs
    )
    app.extensions["digits"]["login"].clock = Clock()
    return app


@pytest.fixture
def app(tmp_path):
    return make_app(tmp_path)


def csrf_of(page) -> str:
    return page.get_data(as_text=True).split('name="csrf_token" value="')[1].split('"')[0]


def form_login(client, token, **kwargs):
    csrf = csrf_of(client.get("/login", **kwargs))
    return client.post("/login", data={"csrf_token": csrf, "token": token, "next": "/"}, **kwargs)


def header_try(client, token, addr, **headers):
    return client.get(
        "/index.json", headers={"Authorization": f"Bearer {token}", **headers}, environ_base={"REMOTE_ADDR": addr}
    ).status_code


def test_guesses_spread_over_many_addresses_are_refused(app):
    """40 loopback addresses x 5 guesses went through without a 429; so did 40 addresses of one /24."""
    client = app.test_client()
    loopback = [header_try(client, "wrong", f"127.0.0.{i}") for i in range(1, 41) for _ in range(5)]
    assert loopback[:FREE_FAILURES] == [401] * FREE_FAILURES and loopback.count(429) >= 190, loopback
    one_net = [header_try(client, "wrong", f"10.1.2.{i}") for i in range(1, 41) for _ in range(5)]
    assert one_net.count(429) >= 190, one_net
    v6 = [header_try(client, "wrong", f"2001:db8:0:1::{i:x}") for i in range(1, 41) for _ in range(5)]
    assert v6.count(429) >= 190, v6
    # 40 different networks with 5 guesses each: the token's own count throttles the networks that failed.
    spread = [header_try(client, "wrong", f"10.{i}.0.1") for i in range(10, 50) for _ in range(5)]
    assert spread.count(429) >= 200 - TARGET_FREE_FAILURES - 40, spread
    assert header_try(client, TOKEN, "192.0.2.1") == 200  # a network that never failed is not delayed


def test_a_guesser_on_the_same_address_never_locks_out_a_browser_that_logged_in_before(app):
    victim, guesser = app.test_client(), app.test_client()
    assert form_login(victim, TOKEN).status_code == 302
    assert victim.get_cookie("digits_client") is not None
    csrf = csrf_of(victim.get("/logout"))
    assert victim.post("/logout", data={"csrf_token": csrf}).status_code == 302
    answers = [form_login(guesser, "wrong").status_code for _ in range(30)]
    assert answers[:FREE_FAILURES] == [401] * FREE_FAILURES and set(answers[FREE_FAILURES:]) == {429}
    assert form_login(guesser, TOKEN).status_code == 429  # the guessing source waits, uncompared
    assert header_try(guesser, TOKEN, "127.0.0.1") == 429
    assert form_login(victim, TOKEN).status_code == 302  # same address, right token: never refused
    assert victim.get("/index.json").status_code == 200
    # a forged or foreign client cookie is no pass: counted by network
    guesser.set_cookie("digits_client", victim.get_cookie("digits_client").value + "x")
    assert form_login(guesser, TOKEN).status_code == 429


def test_a_victims_good_login_does_not_reset_the_guessers_count(app):
    victim, guesser = app.test_client(), app.test_client()
    for _ in range(FREE_FAILURES - 1):
        assert form_login(guesser, "wrong").status_code == 401
    assert form_login(victim, TOKEN).status_code == 302  # same network, another client succeeds
    assert form_login(guesser, "wrong").status_code == 401  # the guesser's 5th failure...
    assert form_login(guesser, "wrong").status_code == 429  # ...still counted: it waits now


def test_a_known_browser_that_guesses_is_throttled_on_its_own(app):
    client = app.test_client()
    assert form_login(client, TOKEN).status_code == 302
    answers = [form_login(client, "wrong").status_code for _ in range(FREE_FAILURES + 2)]
    assert answers == [401] * FREE_FAILURES + [429, 429]
    assert header_try(app.test_client(), TOKEN, "127.0.0.1") == 200  # its network is not blamed


def test_forwarded_for_is_believed_only_from_a_trusted_proxy(tmp_path):
    assert client_network("127.8.9.10") == client_network("::1") == "net:loopback"
    assert client_network("::ffff:10.1.2.3") == client_network("10.1.2.200") == "net:10.1.2.0/24"
    assert client_network("2001:db8:0:1:aa::1") == "net:2001:db8:0:1::/64"
    proxies = ["10.9.9.0/24"]
    assert forwarded_client("10.9.9.9", "6.6.6.6, 203.0.113.5", proxies) == "203.0.113.5"  # client-written part ignored
    assert forwarded_client("10.9.9.9", "203.0.113.5, 10.9.9.8", proxies) == "203.0.113.5"  # two proxies
    assert forwarded_client("198.51.100.1", "203.0.113.5", proxies) == "198.51.100.1"  # untrusted peer
    assert forwarded_client("10.9.9.9", "junk", proxies) == "10.9.9.9"

    plain = make_app(tmp_path).test_client()
    # without --trusted-proxy a guesser cannot escape its network by writing X-Forwarded-For
    forged = [header_try(plain, "wrong", "127.0.0.1", **{"X-Forwarded-For": f"203.0.{i}.1"}) for i in range(10)]
    assert forged.count(429) == 10 - FREE_FAILURES
    behind = make_app(tmp_path, trusted_proxies=["10.9.9.0/24"]).test_client()
    guesses = [header_try(behind, "wrong", "10.9.9.9", **{"X-Forwarded-For": "203.0.113.5"}) for _ in range(8)]
    assert guesses.count(429) == 8 - FREE_FAILURES
    other = header_try(behind, TOKEN, "10.9.9.9", **{"X-Forwarded-For": "198.51.100.7"})
    assert other == 200  # another client behind the same proxy is not the guesser
    with pytest.raises(ConfigurationError, match="--trusted-proxy nonsense"):
        make_app(tmp_path, trusted_proxies=["nonsense"])


def _session_cookie(response) -> str:
    return next(h for h in response.headers.getlist("Set-Cookie") if h.startswith("session="))


@pytest.mark.parametrize(
    ("options", "request_kwargs", "secure"),
    [
        ({}, {}, False),
        ({"secure_cookies": True}, {}, True),
        ({}, {"base_url": "https://localhost", "headers": {"Referer": "https://localhost/login"}}, True),
        ({"trusted_proxies": ["127.0.0.1"]}, {"headers": {"X-Forwarded-Proto": "https"}}, True),
        ({}, {"headers": {"X-Forwarded-Proto": "https"}}, False),  # from an untrusted peer: ignored
    ],
)
def test_login_cookies_are_secure_when_asked_or_over_https(tmp_path, options, request_kwargs, secure):
    client = make_app(tmp_path, **options).test_client()
    response = form_login(client, TOKEN, **request_kwargs)
    assert response.status_code == 302
    client_cookie = next(h for h in response.headers.getlist("Set-Cookie") if h.startswith("digits_client="))
    for cookie in (_session_cookie(response), client_cookie):
        assert ("; Secure" in cookie) is secure, cookie
        assert "HttpOnly" in cookie


def test_logout_is_a_post_with_csrf_and_a_cross_site_get_logs_nobody_out(app):
    client = app.test_client()
    assert form_login(client, TOKEN).status_code == 302
    page = client.get("/logout", headers={"Sec-Fetch-Site": "cross-site", "Referer": "https://evil.example/"})
    assert page.status_code == 200 and 'method="post"' in page.get_data(as_text=True)
    assert client.get("/index.json").status_code == 200  # still logged in
    assert client.post("/logout").status_code == 400  # no CSRF token
    forged = client.post("/logout", data={"csrf_token": "x"}, headers={"Origin": "https://evil.example"})
    assert forged.status_code == 403
    assert client.get("/index.json").status_code == 200
    home = client.get("/").get_data(as_text=True)
    assert 'href="/logout"' not in home and 'action="/logout"' in home  # the menu's logout is a form
    assert client.post("/logout", data={"csrf_token": csrf_of(client.get("/logout"))}).status_code == 302
    assert client.get("/index.json").status_code == 401


def test_a_script_that_keeps_cookies_is_not_locked_out_by_a_guesser_on_its_address(app):
    script, guesser = app.test_client(), app.test_client()  # the test client keeps cookies, as requests.Session does
    assert header_try(script, TOKEN, "127.0.0.1") == 200
    assert script.get_cookie("digits_client") is not None
    answers = [header_try(guesser, "wrong", "127.0.0.1") for _ in range(12)]
    assert answers.count(429) == 12 - FREE_FAILURES
    assert header_try(script, TOKEN, "127.0.0.1") == 200
    assert header_try(app.test_client(), TOKEN, "127.0.0.1") == 429  # a first-time client shares the network's wait
