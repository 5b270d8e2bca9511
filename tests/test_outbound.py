"""The outbound-URL guard (digits_core.outbound) and the S3 endpoint field, against a real listener on 127.0.0.1.

Only 127.0.0.1 is ever connected to: other addresses are literals the guard
refuses (or allows) without sending anything.
"""

from __future__ import annotations

import http.server
import threading

import pytest

from digits_core.outbound import ALLOW_ENV, OutboundURLError, address_allowed, check_url, guard_session
from digits_core.paths import confined_to


@pytest.fixture
def listener():
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_PUT = do_HEAD = do_POST = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    server.hits = hits  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_operator_patterns(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://0x7f.0.0.1/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://192.168.0.1/",
        "http://0.0.0.0/",
        "http://[fd00::1]/",
        "http://224.0.0.1/",
        "ftp://93.184.216.34/",
        "http://93.184.216.34:notaport/",
    ],
)
def test_private_spellings_and_bad_urls_are_refused_in_a_server_context(url, tmp_path):
    with confined_to([tmp_path]), pytest.raises(OutboundURLError, match="my_field"):
        check_url(url, "my_field")
    check_url(url, "my_field")  # the command line: the operator's own shell


def test_public_addresses_pass_and_patterns_widen_or_narrow(tmp_path, monkeypatch):
    with confined_to([tmp_path]):
        check_url("https://93.184.216.34/dicom-web")
        monkeypatch.setenv(ALLOW_ENV, "10.0.0.0/8\n127.0.0.1:8042\npacs.internal")
        check_url("http://10.9.8.7/")
        check_url("http://127.0.0.1:8042/dicom-web")
        with pytest.raises(OutboundURLError):
            check_url("http://127.0.0.1:8043/dicom-web")
        monkeypatch.setenv(ALLOW_ENV, "none")
        with pytest.raises(OutboundURLError, match="allow-url none"):
            check_url("https://93.184.216.34/")
    import ipaddress

    assert not address_allowed("x", 80, ipaddress.ip_address("93.184.216.34"), ["none"])
    assert address_allowed("x", 80, ipaddress.ip_address("93.184.216.34"), [])


def test_a_guarded_session_checks_the_address_it_connected_to(listener, monkeypatch):
    import requests

    session = requests.Session()
    guard_session(session)
    with pytest.raises(OutboundURLError, match="does not send requests"):
        session.get(listener.url + "/", timeout=5)
    with pytest.raises(OutboundURLError):
        session.get(listener.url.replace("127.0.0.1", "2130706433") + "/", timeout=5)
    assert listener.hits == []
    monkeypatch.setenv(ALLOW_ENV, listener.url.removeprefix("http://"))
    assert session.get(listener.url + "/ok", timeout=5).status_code == 200
    assert listener.hits == ["/ok"]


def _s3_form(values):
    from digits_core.forms import validate_values
    from digits_data_images.classification import ClassificationForm

    return validate_values(
        ClassificationForm, {"width": 8, "height": 8, "s3_bucket": "b", "s3_path": "p/", **values}, "dataset form"
    )


def test_a_typed_s3_endpoint_is_refused_on_its_field_before_any_request(listener, tmp_path, monkeypatch):
    from digits_core import FormValidationError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "OPERATORKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "operator-secret")
    with confined_to([tmp_path]):
        with pytest.raises(FormValidationError, match="s3_endpoint_url") as exc:
            _s3_form({"s3_endpoint_url": listener.url, "s3_accesskey": "k", "s3_secretkey": "s"})
        assert "allow-url" in str(exc.value)
        monkeypatch.setenv(ALLOW_ENV, listener.url.removeprefix("http://"))
        with pytest.raises(FormValidationError, match="s3_accesskey"):  # the operator's keys stay home
            _s3_form({"s3_endpoint_url": listener.url})
        with pytest.raises(FormValidationError, match="s3_profile"):
            _s3_form(
                {"s3_endpoint_url": listener.url, "s3_accesskey": "k", "s3_secretkey": "s", "s3_profile": "default"}
            )
    assert listener.hits == []


def test_the_s3_client_checks_every_request_it_sends(listener, tmp_path, monkeypatch):
    from digits_core.sources.s3 import S3Location
    from digits_core.sources.s3_client import S3EndpointError, s3_client

    monkeypatch.setenv(ALLOW_ENV, listener.url.removeprefix("http://"))
    location = S3Location("bucket", "", listener.url, "key", "secret")
    with confined_to([tmp_path]):
        client = s3_client(location, attempts=1)
    monkeypatch.setenv(ALLOW_ENV, "none")  # the destination is checked again when the request is sent
    with pytest.raises(S3EndpointError, match="allow-url none"):
        client.list_objects_v2(Bucket="bucket")
    assert listener.hits == []


def test_dns_rebinding_is_refused_on_the_connection_the_s3_client_makes(listener, tmp_path, monkeypatch):
    """The name resolves to a public address when checked, then to 127.0.0.1 when connected: refused on the socket."""
    import ipaddress
    import socket

    from digits_core import outbound
    from digits_core.sources.s3 import S3Location, list_objects
    from digits_core.sources.s3_client import S3EndpointError, s3_client

    port = listener.server_address[1]
    real_getaddrinfo = socket.getaddrinfo

    def rebinding_dns(host, *args, **kwargs):  # what the name answers when the socket connects
        return real_getaddrinfo("127.0.0.1" if host == "rebind.example" else host, *args, **kwargs)

    monkeypatch.setattr(outbound, "resolve_host", lambda host, port: [ipaddress.ip_address("93.184.216.34")])
    monkeypatch.setattr(socket, "getaddrinfo", rebinding_dns)
    location = S3Location("bucket", "", f"http://rebind.example:{port}", "key", "secret")
    with confined_to([tmp_path]):
        client = s3_client(location, attempts=1)  # the field's check and the before-send hook see a public address
        with pytest.raises(S3EndpointError, match="does not send requests to rebind.example"):
            list_objects(location)
    assert listener.hits == []  # nothing reached the loopback listener
    with confined_to([tmp_path]):
        assert client is s3_client(location, attempts=1)  # the guarded client is the one cached for this endpoint
