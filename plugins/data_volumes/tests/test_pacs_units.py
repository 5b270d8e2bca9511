"""The DICOMweb pieces of the volume plugins that need no server: which server a value names, the inference form."""

from __future__ import annotations

import pytest

from digits_core import FormValidationError
from digits_core.forms import validate_values
from digits_data_dicomweb.ingestion import open_source
from digits_data_volumes.pacs import VolumeInferenceForm, open_server


def test_an_inference_url_overrides_the_dataset_server_with_its_own_credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", "operator-secret")
    dataset = {"server_url": "http://127.0.0.1:8042/dicom-web", "username": "digits", "cache_folder": str(tmp_path)}
    assert open_source(dataset).url == "http://127.0.0.1:8042/dicom-web"
    other = open_source({**dataset, "dicomweb_url": "http://127.0.0.1:9042/dicom-web", "dicomweb_username": "ann"})
    assert other.url == "http://127.0.0.1:9042/dicom-web" and other._auth == ("ann", "operator-secret")
    assert open_server({"cache_folder": str(tmp_path)}) is None  # a NIfTI-only dataset names no server


def test_the_volume_inference_form_takes_no_series_or_one_uid():
    assert validate_values(VolumeInferenceForm, {}, "volume inference")["dicomweb_series"] == ""
    assert validate_values(VolumeInferenceForm, {"dicomweb_series": "1.2.3"}, "f")["dicomweb_series"] == "1.2.3"
    with pytest.raises(FormValidationError, match="dicomweb_series"):
        validate_values(VolumeInferenceForm, {"dicomweb_series": "../etc"}, "volume inference")
    with pytest.raises(FormValidationError, match="dicomweb_series"):
        validate_values(VolumeInferenceForm, {"dicomweb_series": "1.2.3 1.2.4"}, "volume inference")


class _CountingListener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts (and answers none)."""

    def __init__(self):
        import socket
        import threading

        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        import socket

        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=30)


@pytest.fixture
def listener():
    made = _CountingListener()
    yield made
    made.close()


def test_a_typed_loopback_dicomweb_url_is_refused_on_its_field_before_any_connection(listener, monkeypatch, tmp_path):
    """Test a volume's DICOMweb URL passes the outbound guard of the 2-D form, on its own field."""
    from digits_core.outbound import ALLOW_ENV
    from digits_core.paths import confined_to
    from digits_data_dicomweb.servers import SERVERS_ENV

    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.delenv(SERVERS_ENV, raising=False)
    for host in ("127.0.0.1", "localhost", "2130706433", "127.1", "[::ffff:127.0.0.1]"):
        url = f"http://{host}:{listener.port}/dicom-web"
        with confined_to([tmp_path]), pytest.raises(FormValidationError) as exc:
            validate_values(VolumeInferenceForm, {"dicomweb_series": "1.2.3", "dicomweb_url": url}, "volume inference")
        assert list(exc.value.errors) == ["dicomweb_url"] and "--allow-url" in str(exc.value)
    with confined_to([tmp_path]), pytest.raises(FormValidationError, match="dicomweb_url"):
        validate_values(VolumeInferenceForm, {"dicomweb_url": "http://user:pw@10.0.0.1/dicom-web"}, "f")
    with confined_to([tmp_path]), pytest.raises(FormValidationError) as exc:
        validate_values(VolumeInferenceForm, {"dicomweb_server": "elsewhere"}, "volume inference")
    assert list(exc.value.errors) == ["dicomweb_server"]
    assert listener.connections == 0
    url = f"http://127.0.0.1:{listener.port}/dicom-web"
    monkeypatch.setenv(SERVERS_ENV, f"pacs={url}")
    with confined_to([tmp_path]):  # the operator's named server, or a port the operator allowed, passes
        assert validate_values(VolumeInferenceForm, {"dicomweb_server": "pacs"}, "f")["dicomweb_server"] == "pacs"
        assert validate_values(VolumeInferenceForm, {}, "f")["dicomweb_url"] == ""  # the dataset's server
        monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{listener.port}")
        assert validate_values(VolumeInferenceForm, {"dicomweb_url": url}, "f")["dicomweb_url"] == url
    monkeypatch.delenv(ALLOW_ENV)
    # The command line (the operator's own shell) keeps today's freedom.
    assert validate_values(VolumeInferenceForm, {"dicomweb_url": url}, "f")["dicomweb_url"] == url
    assert listener.connections == 0
