"""Start a local Orthanc PACS with DICOMweb and authentication, for tests, demos and trying the plugin.

``python -m digits_data_dicomweb.orthanc DIR --port 8042 --password SECRET --load FOLDER`` starts Debian's
Orthanc (packages ``orthanc`` and ``orthanc-dicomweb``) with a generated configuration: DICOMweb under
``/dicom-web/``, HTTP basic authentication on (user ``digits``), remote access refused, the DICOM port off,
storage under ``DIR``; it uploads every DICOM file under each ``--load`` folder and serves until Ctrl-C.

Orthanc has no setting for the address it listens on and binds every interface. So that it listens on the
loopback interface only, it is started with a tiny ``LD_PRELOAD`` library (compiled here with ``cc``) that
turns its IPv4 ``bind()`` calls to 127.0.0.1. In Python::

    with OrthancServer(tmp_path, password="secret") as pacs:
        pacs.upload(folder)
        source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from digits_core import DigitsError

#: Where Debian's packages put Orthanc and its DICOMweb plugin.
ORTHANC_EXECUTABLE = "/usr/sbin/Orthanc"
DICOMWEB_PLUGIN = "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"
INSTALL_HINT = "install Debian's packages: apt-get install orthanc orthanc-dicomweb"

_LOOPBACK_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
/* Bind every IPv4 socket to 127.0.0.1: Orthanc has no listen-address setting. */
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real_bind)(int, const struct sockaddr *, socklen_t);
    if (!real_bind) real_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in copy;
        memcpy(&copy, addr, sizeof copy);
        copy.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return real_bind(fd, (const struct sockaddr *)&copy, sizeof copy);
    }
    return real_bind(fd, addr, len);
}
"""


class OrthancError(DigitsError):
    """Orthanc is missing or did not start (the message says what to do)."""


def orthanc_available() -> bool:
    """Whether Orthanc, its DICOMweb plugin and a C compiler (for the loopback shim) are installed."""
    return Path(ORTHANC_EXECUTABLE).is_file() and Path(DICOMWEB_PLUGIN).is_file() and bool(shutil.which("cc"))


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGTERM when the parent dies (no orphaned Orthanc after kill -9)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class OrthancServer:
    """A private Orthanc on 127.0.0.1 (a context manager: started on enter, stopped on exit).

    Args:
        workdir: Folder for the configuration, the storage and the log.
        port: HTTP port (default: a free one).
        username: User of HTTP basic authentication.
        password: Its password (default: a random one).
    """

    def __init__(self, workdir, *, port: int | None = None, username: str = "digits", password: str | None = None):
        self.workdir = Path(workdir)
        self.port = port or _free_port()
        self.username = username
        self.password = password or os.urandom(9).hex()
        self.process: subprocess.Popen | None = None
        self.log_path = self.workdir / "orthanc.log"

    @property
    def url(self) -> str:
        """The REST root, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def dicomweb_url(self) -> str:
        """The DICOMweb root, ``http://127.0.0.1:PORT/dicom-web``."""
        return f"{self.url}/dicom-web"

    def _config(self) -> dict:
        storage = self.workdir / "storage"
        return {
            "Name": "digits-orthanc",
            "StorageDirectory": str(storage),
            "IndexDirectory": str(storage),
            "HttpPort": self.port,
            "DicomServerEnabled": False,
            "RemoteAccessAllowed": False,
            "AuthenticationEnabled": True,
            "RegisteredUsers": {self.username: self.password},
            "Plugins": [DICOMWEB_PLUGIN],
            "DicomWeb": {"Enable": True, "Root": "/dicom-web/"},
            "SaveJobs": False,
            "HttpCompressionEnabled": False,
        }

    def _shim(self) -> Path:
        compiler = shutil.which("cc") or shutil.which("gcc")
        if not compiler:
            raise OrthancError("A C compiler (cc) is needed to keep Orthanc on 127.0.0.1: apt-get install gcc")
        source, library = self.workdir / "bind_loopback.c", self.workdir / "bind_loopback.so"
        source.write_text(_LOOPBACK_SHIM, encoding="utf-8")
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
            check=True,
            capture_output=True,
        )
        return library

    def start(self, deadline_s: float = 60.0) -> OrthancServer:
        """Start Orthanc and wait until it answers an authenticated request.

        Raises:
            OrthancError: Orthanc is not installed or did not come up (the log's tail is in the message).
        """
        import requests

        if not Path(ORTHANC_EXECUTABLE).is_file() or not Path(DICOMWEB_PLUGIN).is_file():
            raise OrthancError(f"Orthanc with its DICOMweb plugin is not installed: {INSTALL_HINT}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "orthanc.json"
        config.write_text(json.dumps(self._config(), indent=2), encoding="utf-8")
        env = dict(os.environ, LD_PRELOAD=str(self._shim()))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [ORTHANC_EXECUTABLE, str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.process.poll() is not None:
                break
            try:
                if requests.get(f"{self.url}/system", auth=(self.username, self.password), timeout=2).ok:
                    return self
            except requests.exceptions.RequestException:
                pass
            time.sleep(0.1)
        tail = self.log_path.read_text(errors="replace")[-1500:] if self.log_path.exists() else ""
        self.stop()
        raise OrthancError(f"Orthanc did not start on port {self.port} within {deadline_s:g} s. Log tail:\n{tail}")

    def upload(self, *paths) -> int:
        """Upload DICOM files (or every ``*.dcm`` under folders) through Orthanc's REST API; return how many."""
        import requests

        files: list[Path] = []
        for path in map(Path, paths):
            files.extend(sorted(path.rglob("*.dcm")) if path.is_dir() else [path])
        with requests.Session() as session:
            session.auth = (self.username, self.password)
            for file in files:
                response = session.post(f"{self.url}/instances", data=file.read_bytes(), timeout=60)
                if not response.ok:
                    raise OrthancError(f"Orthanc refused {file} (HTTP {response.status_code})")
        return len(files)

    def stop(self) -> None:
        """Stop Orthanc (SIGTERM, then SIGKILL)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> OrthancServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    """Command-line entry point (``python -m digits_data_dicomweb.orthanc``)."""
    parser = argparse.ArgumentParser(
        prog="python -m digits_data_dicomweb.orthanc",
        description="Run a local Orthanc PACS (DICOMweb, basic auth, 127.0.0.1 only).",
    )
    parser.add_argument("workdir", help="folder for Orthanc's configuration and storage")
    parser.add_argument("--port", type=int, default=8042, help="HTTP port (default 8042)")
    parser.add_argument("--user", default="digits", help="user name (default digits)")
    parser.add_argument(
        "--password",
        default=os.environ.get("DIGITS_ORTHANC_PASSWORD", ""),
        help="password (default: $DIGITS_ORTHANC_PASSWORD, else a random one, printed)",
    )
    parser.add_argument(
        "--load", action="append", default=[], metavar="FOLDER", help="upload every *.dcm under FOLDER (repeatable)"
    )
    args = parser.parse_args(argv)
    server = OrthancServer(args.workdir, port=args.port, username=args.user, password=args.password or None)
    try:
        server.start()
    except OrthancError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        loaded = server.upload(*args.load) if args.load else 0
        password = "as given" if args.password else repr(server.password)
        print(
            f"Orthanc serves DICOMweb at {server.dicomweb_url} (user {server.username!r}, password {password}); "
            f"{loaded} file(s) uploaded. Ctrl-C stops it.",
            flush=True,
        )
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        while server.process and server.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
