"""Ctrl-C stops `digits serve` even when its parent started it with SIGINT ignored.

A non-interactive shell starts background jobs (``cmd &``) with SIGINT
ignored, and Python then leaves it ignored: a CI run of the live-server
signal test once waited 60 s for a server that never saw its SIGINT. The
command line now installs its SIGINT handler itself.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from live_server import STOP_TIMEOUT, free_port, server_env

pytestmark = pytest.mark.slow


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigint_stops_a_server_started_with_sigint_ignored(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(tmp_path / "jobs"), "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=server_env(),
        cwd=tmp_path,
        preexec_fn=_ignore_sigint,
    )
    try:
        deadline = time.monotonic() + 120
        while True:  # bounded wait until it answers
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/index.json", timeout=5).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "digits serve did not start"
                time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(STOP_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
