"""Flask test-client fixtures shared by the web tests (registered in ``tests/conftest.py``).

``app`` is the web app over a fresh jobs folder whose scheduler queues but never runs jobs
(no TensorFlow, nothing trains), with ``tmp_path`` as its data root; ``client`` is its test
client and ``token`` a CSRF token for state-changing requests. A module that needs other
settings defines its own ``app`` fixture, which takes precedence::

    def test_home(client):
        assert client.get("/").status_code == 200
"""

from __future__ import annotations

import pytest

from digits_core.web import create_app


@pytest.fixture
def app(tmp_path):
    return create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[tmp_path])


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def token(client):
    return client.get("/api/csrf-token").get_json()["csrf_token"]
