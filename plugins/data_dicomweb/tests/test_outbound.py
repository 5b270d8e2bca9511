"""SSRF and credential forwarding through the DICOMweb form, against real HTTP listeners on 127.0.0.1.

In a server context (what a web request or a server-queued job runs in) a
typed URL to a loopback/private address is refused on its field before any
request, connections are checked after DNS resolution and on every
redirect, the operator's credentials go only to servers the operator named,
and nothing from the answer is echoed. Nothing but 127.0.0.1 is ever
connected to.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest

from digits_core import FormValidationError
from digits_core.forms import validate_values
from digits_core.outbound import ALLOW_ENV
from digits_core.paths import confined_to
from digits_data_dicomweb.forms import DicomWebDatasetForm
from digits_data_dicomweb.ingestion import PASSWORD_ENV, TOKEN_ENV, DicomWebSegmentationIngestion
from digits_data_dicomweb.servers import SERVERS_ENV
from digits_data_dicomweb.source import DicomWebError, DicomWebSource, StudyQuery

OPERATOR_PASSWORD = "operator-secret-pw"
HOSTILE_PATIENT = "EVIL<patient from the response>"


class Listener:
    """A tiny DICOMweb-ish HTTP server on 127.0.0.1 that records what reached it.

    ``busy`` makes it answer its first ``busy`` requests "503 Service Unavailable".
    """

    def __init__(self, redirect_to: str | None = None, busy: int = 0):
        self.requests: list[tuple[str, str | None]] = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                listener.requests.append((self.path, self.headers.get("Authorization")))
                if len(listener.requests) <= busy:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if redirect_to:
                    self.send_response(302)
                    self.send_header("Location", redirect_to + self.path)
                    self.end_headers()
                    return
                body = b"[]"
                if self.path.startswith("/dicom-web/studies?") or self.path == "/dicom-web/studies":
                    body = json.dumps(
                        [
                            {
                                "0020000D": {"vr": "UI", "Value": ["1.2.3"]},
                                "00100020": {"vr": "LO", "Value": [HOSTILE_PATIENT]},
                            }
                        ]
                    ).encode()
                elif "/series" in self.path and "/instances" not in self.path:
                    body = json.dumps(
                        [
                            {"0020000E": {"vr": "UI", "Value": ["1.2.3.4"]}, "00080060": {"vr": "CS", "Value": ["MR"]}},
                            {
                                "0020000E": {"vr": "UI", "Value": ["../../etc"]},
                                "00080060": {"vr": "CS", "Value": ["MR"]},
                            },
                        ]
                    ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/dicom+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/dicom-web"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listeners():
    made: list[Listener] = []

    def make(**kwargs) -> Listener:
        made.append(Listener(**kwargs))
        return made[-1]

    yield make
    for listener in made:
        listener.close()


@pytest.fixture(autouse=True)
def operator_env(monkeypatch, tmp_path):
    monkeypatch.setenv(PASSWORD_ENV, OPERATOR_PASSWORD)
    monkeypatch.setenv(TOKEN_ENV, "operator-token")
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.delenv(SERVERS_ENV, raising=False)
    monkeypatch.setenv("DIGITS_DICOMWEB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def server_context(tmp_path):
    return confined_to([tmp_path])


def loopback_spellings(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/dicom-web",
        f"http://localhost:{port}/dicom-web",
        f"http://2130706433:{port}/dicom-web",
        f"http://0x7f000001:{port}/dicom-web",
        f"http://127.1:{port}/dicom-web",
        f"http://[::ffff:127.0.0.1]:{port}/dicom-web",
    ]


def test_loopback_urls_are_refused_on_the_field_before_any_request(listeners, tmp_path):
    pacs = listeners()
    for url in loopback_spellings(pacs.port):
        with server_context(tmp_path), pytest.raises(FormValidationError, match="server_url") as exc:
            validate_values(DicomWebDatasetForm, {"server_url": url}, "dataset form")
        assert "--allow-url" in str(exc.value)
    for url in ("http://169.254.169.254/latest/meta-data", "http://10.0.0.1/dicom-web", "http://192.168.1.2/x"):
        with server_context(tmp_path), pytest.raises(FormValidationError, match="server_url"):
            validate_values(DicomWebDatasetForm, {"server_url": url}, "dataset form")
    assert pacs.requests == []
    # The command line (the operator's own shell) keeps today's freedom.
    assert validate_values(DicomWebDatasetForm, {"server_url": pacs.url}, "dataset form")["server_url"] == pacs.url


def test_the_source_refuses_at_the_connection_too(listeners, tmp_path):
    """A source built outside the form (a plugin calling DicomWebSource) is checked where it connects."""
    pacs = listeners()
    with server_context(tmp_path), pytest.raises(DicomWebError, match="does not send requests"):
        DicomWebSource(pacs.url, cache_dir=tmp_path)
    source = DicomWebSource(pacs.url, cache_dir=tmp_path, guarded=True)  # as if the form check had been skipped
    source.url = f"http://2130706433:{pacs.port}/dicom-web"
    with pytest.raises(DicomWebError, match="does not send requests"):
        source.find_studies(StudyQuery())
    assert pacs.requests == []


def test_an_allowed_server_redirecting_to_loopback_is_refused_on_the_redirect(listeners, tmp_path, monkeypatch):
    hidden = listeners()
    front = listeners(redirect_to=f"http://127.0.0.1:{hidden.port}")
    monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{front.port}")
    with server_context(tmp_path):
        values = validate_values(DicomWebDatasetForm, {"server_url": front.url}, "dataset form")
        source = DicomWebSource(values["server_url"], cache_dir=tmp_path)
    with pytest.raises(DicomWebError, match="does not send requests"):
        source.find_studies(StudyQuery())
    assert front.requests and hidden.requests == []  # (dicomweb-client retries the first hop)


def test_allow_url_none_refuses_every_typed_url(tmp_path, monkeypatch):
    public = "http://93.184.216.34/dicom-web"  # an address literal: the check needs no DNS and sends nothing
    with server_context(tmp_path):
        assert validate_values(DicomWebDatasetForm, {"server_url": public}, "dataset form")
        monkeypatch.setenv(ALLOW_ENV, "none")
        with pytest.raises(FormValidationError, match="allow-url none"):
            validate_values(DicomWebDatasetForm, {"server_url": public}, "dataset form")


def _plugin(**userdata) -> DicomWebSegmentationIngestion:
    plugin = DicomWebSegmentationIngestion(
        **{
            "named_server": "",
            "server_url": "",
            "username": "",
            "password": "",
            "token": "",
            "cache_folder": "",
            "max_parallel": 1,
            **userdata,
        }
    )
    return plugin


def test_operator_credentials_never_go_to_a_typed_url(listeners, tmp_path, monkeypatch):
    pacs = listeners()
    monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{pacs.port}")
    with server_context(tmp_path):
        source = _plugin(server_url=pacs.url, username="digits").source()
    source.find_studies(StudyQuery())
    assert pacs.requests and all(
        OPERATOR_PASSWORD not in (auth or "") and "operator-token" not in (auth or "") for _, auth in pacs.requests
    )
    import base64

    assert {auth for _, auth in pacs.requests} == {"Basic " + base64.b64encode(b"digits:").decode()}


def test_operator_credentials_reach_only_the_named_server(listeners, tmp_path, monkeypatch):
    named = listeners()
    monkeypatch.setenv(SERVERS_ENV, f"pacs={named.url}")
    from digits_data_dicomweb.servers import server_choices

    assert ("pacs", "pacs") in server_choices()
    with server_context(tmp_path):
        values = validate_values(DicomWebDatasetForm, {"named_server": "pacs"}, "dataset form")  # no --allow-url needed
        source = _plugin(named_server="pacs", username="digits").source()
        with pytest.raises(FormValidationError, match="named_server"):
            validate_values(DicomWebDatasetForm, {"named_server": "elsewhere"}, "dataset form")
    assert values["named_server"] == "pacs"
    source.find_studies(StudyQuery())
    import base64

    assert named.requests[0][1] == "Basic " + base64.b64encode(f"digits:{OPERATOR_PASSWORD}".encode()).decode()


def test_nothing_from_a_typed_servers_answer_is_echoed(listeners, tmp_path, monkeypatch):
    pacs = listeners()
    monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{pacs.port}")
    with server_context(tmp_path):
        source = DicomWebSource(pacs.url, cache_dir=tmp_path)
    series = source.find_series(StudyQuery())
    assert [s.series for s in series] == ["1.2.3.4"]  # the "../../etc" series UID is dropped
    assert all(HOSTILE_PATIENT not in str(s) and s.patient.startswith("patient-") for s in series)
    with pytest.raises(DicomWebError, match="not a DICOM UID"):
        source.cache_path("../../x")


def test_the_web_form_offers_the_named_servers_and_refuses_a_typed_loopback_url(listeners, tmp_path, monkeypatch):
    from digits_core.web import create_app

    pacs = listeners()
    monkeypatch.setenv(SERVERS_ENV, f"hospital-pacs={pacs.url}")
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[tmp_path])
    client = app.test_client()
    page = client.get("/datasets/new/dicomweb-segmentation").get_data(as_text=True)
    assert '<option value="hospital-pacs"' in page and pacs.url not in page  # the name, not the URL
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    resp = client.post(
        "/api/datasets",
        headers={"X-CSRFToken": token},
        json={
            "plugin_id": "dicomweb-segmentation",
            "name": "d",
            "form_data": {"server_url": f"http://2130706433:{pacs.port}/dicom-web"},
        },
    )
    assert resp.status_code == 400 and "server_url" in resp.get_data(as_text=True)
    assert pacs.requests == []


def test_a_busy_answer_is_asked_again_and_a_failed_connection_is_not(listeners, tmp_path):
    """503/429/408/504 are retried twice; a connection that fails is not, so its error comes at once."""
    pacs = listeners(busy=1)
    assert len(DicomWebSource(pacs.url, cache_dir=tmp_path).find_studies(StudyQuery())) == 1
    assert len(pacs.requests) == 2  # a busy answer, then the result

    still_busy = listeners(busy=10)
    with pytest.raises(DicomWebError, match="answered HTTP 503"):
        DicomWebSource(still_busy.url, cache_dir=tmp_path).find_studies(StudyQuery())
    assert len(still_busy.requests) == 3

    # A server that accepts each connection and closes it without an answer: asked once, not three times.
    hangs_up = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept_and_close():
        while True:
            try:
                conn, _ = hangs_up.accept()
            except OSError:
                return
            accepted.append(conn)
            conn.close()

    threading.Thread(target=accept_and_close, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{hangs_up.getsockname()[1]}/dicom-web"
        with pytest.raises(DicomWebError, match="Cannot reach the DICOMweb server"):
            DicomWebSource(url, cache_dir=tmp_path).find_studies(StudyQuery())
    finally:
        hangs_up.close()
    assert len(accepted) == 1
