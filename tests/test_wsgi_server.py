"""`digits serve` runs on a production WSGI server (waitress), not Flask's development server.

Found against a real server (issue 39, finding 6): the development server
ran one thread per connection with no header timeout, so 400 half-sent
requests held for 60 s grew it to 422 threads. Now requests are read by one
event loop and answered by a fixed pool of threads; a connection that stays
silent is closed after ``--idle-timeout``. Everything runs against a real
``digits serve`` on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket

import pytest

pytestmark = pytest.mark.slow

HALF_OPEN = 400
PARTIAL_REQUESTS = (
    b"GET /index.json HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # headers never finished
    b"GET /ind",  # request line never finished
    b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{",  # body never finished
)


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_half_open_connections_neither_stop_a_request_nor_grow_the_threads(live_server):
    server = live_server(extra_args=["--threads", "4", "--idle-timeout", "20"])
    assert "development server" not in server.output()
    assert server.get("/index.json").status == 200
    before = _threads(server.process.pid)
    held = []
    try:
        for i in range(HALF_OPEN):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            sock.sendall(PARTIAL_REQUESTS[i % len(PARTIAL_REQUESTS)])
            held.append(sock)
        answer = server.get("/index.json", timeout=60)  # the bound of a wait, not a measurement
        assert answer.status == 200, server.describe()
        during = _threads(server.process.pid)
        assert during <= before + 8, f"{before} threads before, {during} with {HALF_OPEN} half-open connections"
        # a silent connection is closed by the server after --idle-timeout: the client reads the end
        held[0].settimeout(120)  # the bound of a wait
        try:
            rest = held[0].recv(1024)
        except ConnectionResetError:
            rest = b""
        assert rest == b"" or rest.startswith(b"HTTP/1.1 4"), rest
    finally:
        for sock in held:
            sock.close()
    assert server.get("/index.json").status == 200
