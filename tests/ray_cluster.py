"""A real local Ray cluster for tests: a head and one extra node, listening on 127.0.0.1 only.

Both are ``ray start --block`` processes, each starting its own session
(Ray's daemons and workers stay in it, though workers take process groups of
their own), so the cluster is stopped, or one node killed, by signalling
exactly the processes of the sessions this helper started.

Loopback only, three measures (:func:`listening_sockets` proves the result
from ``/proc/net/tcp`` and ``/proc/net/tcp6``):

* ``ray start`` turns ``--node-ip-address 127.0.0.1`` into the machine's
  network address (192.0.2.2 here) and binds its agents there. With
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's one-machine switch) the head's
  node address stays 127.0.0.1 and its GCS, raylet, agents and client server
  bind to it.
* That switch also refuses a second node, so the extra node runs without it
  and is given the loopback address in its IPv4-mapped IPv6 form
  (``::ffff:127.0.0.1``), which Ray does not rewrite.
* Its raylet (and TensorFlow's gRPC servers in Ray Train workers) still bind
  the wildcard address: every cluster process runs with a tiny ``LD_PRELOAD``
  library (:data:`BIND_SHIM`, compiled with ``cc``) that turns wildcard
  ``bind()`` calls into loopback ones, IPv4 and IPv6.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
#: Environment of every cluster process (and of the test process, the driver).
CLUSTER_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # node IP = loopback; servers bind 127.0.0.1
    "RAY_USAGE_STATS_ENABLED": "0",
    "CUDA_VISIBLE_DEVICES": "",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    # Loopback only, so no token: without this, a ~/.ray/auth_token left by any earlier Ray on this machine turns
    # token auth on in `ray start`, and the driver, holding no token, is refused ("InvalidAuthToken").
    "RAY_AUTH_MODE": "disabled",
}


#: ``bind()`` to the wildcard address becomes loopback: 0.0.0.0 -> 127.0.0.1; :: -> ::1 on an IPv6-only
#: socket, else ::ffff:127.0.0.1 (a dual-stack socket keeps serving IPv4 clients, on loopback only).
BIND_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real_bind)(int, const struct sockaddr *, socklen_t);
    if (!real_bind) real_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in v4;
        memcpy(&v4, addr, sizeof v4);
        if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&v4, sizeof v4);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 v6;
        memcpy(&v6, addr, sizeof v6);
        if (IN6_IS_ADDR_UNSPECIFIED(&v6.sin6_addr)) {
            int only = 0;
            socklen_t size = sizeof only;
            getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, &size);
            if (only) {
                v6.sin6_addr = in6addr_loopback;
            } else {
                memset(&v6.sin6_addr, 0, sizeof v6.sin6_addr);
                v6.sin6_addr.s6_addr[10] = 0xff;
                v6.sin6_addr.s6_addr[11] = 0xff;
                v6.sin6_addr.s6_addr[12] = 127;
                v6.sin6_addr.s6_addr[15] = 1;
            }
            return real_bind(fd, (const struct sockaddr *)&v6, sizeof v6);
        }
    }
    return real_bind(fd, addr, len);
}
"""


def compile_bind_shim(folder: Path) -> Path:
    """Compile :data:`BIND_SHIM` into ``folder``; return the library's path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise RuntimeError("a C compiler (cc) is needed to keep the Ray cluster on loopback: apt-get install gcc")
    source, library = folder / "bind_loopback.c", folder / "bind_loopback.so"
    source.write_text(BIND_SHIM, encoding="utf-8")
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"], check=True, capture_output=True
    )
    return library


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRayCluster:
    """``ray start --head`` plus ``ray start --address`` on this machine (see the module docstring).

    Args:
        head_cpus: Logical CPUs the head offers tasks.
        node_cpus: Logical CPUs the extra node offers.
    """

    def __init__(self, head_cpus: int = 1, node_cpus: int = 1):
        self.temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's unix sockets live here
        self.ports: set[int] = set()
        self.port = self.new_port()
        self.address = f"127.0.0.1:{self.port}"
        self.head_cpus, self.node_cpus = head_cpus, node_cpus
        self.head: subprocess.Popen | None = None
        self.node: subprocess.Popen | None = None
        self.killed: set[str] = set()  # node ids of killed nodes (Ray may list them alive for a while)
        self.env = {**os.environ, **CLUSTER_ENV, "LD_PRELOAD": str(compile_bind_shim(self.temp))}

    def new_port(self) -> int:
        """A free port this cluster has not handed out yet.

        :func:`free_port` closes its socket, so two calls can return the same number; Ray then refuses to start
        ("dashboard_agent_http is trying to use a port number ... that is used by other components").
        """
        while True:
            port = free_port()
            if port not in self.ports:
                self.ports.add(port)
                return port

    def _start(self, args: list[str], log: str, env: dict | None = None) -> subprocess.Popen:
        out = open(self.temp / log, "ab")
        try:
            return subprocess.Popen(
                [
                    RAY,
                    "start",
                    "--block",
                    "--object-store-memory",
                    str(100 * 1024 * 1024),
                    "--disable-usage-stats",
                    "--ray-client-server-port",
                    str(self.new_port()),
                    "--dashboard-agent-listen-port",
                    str(self.new_port()),
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env or self.env,
                start_new_session=True,
            )
        finally:
            out.close()

    def start(self, timeout: float = 120.0) -> LocalRayCluster:
        """Start the head, then the extra node; return once both are alive in the cluster."""
        self.head = self._start(
            [
                "--head",
                "--node-ip-address",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--num-cpus",
                str(self.head_cpus),
                "--include-dashboard",
                "false",
                "--temp-dir",
                str(self.temp),
            ],
            "head.log",
        )
        self._wait_for(1, timeout)
        self.add_node(timeout)
        return self

    def add_node(self, timeout: float = 120.0) -> None:
        """Start the extra node (again, after :meth:`kill_node`) and wait until it joined and Ray no longer lists
        a killed node alive."""
        env = {k: v for k, v in self.env.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
        self.node = self._start(
            [
                "--address",
                f"[::ffff:127.0.0.1]:{self.port}",
                "--node-ip-address",
                "::ffff:127.0.0.1",
                "--num-cpus",
                str(self.node_cpus),
            ],
            "node.log",
            env,
        )
        self._wait_for(2, timeout)

    def alive_nodes(self) -> list[dict]:
        """The alive nodes, as this process (a Ray driver once connected) sees them."""
        from digits_core.executors.ray_executor import connect

        return [n for n in connect(self.address).nodes() if n.get("Alive")]

    def _wait_for(self, nodes: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc, name in ((self.head, "head"), (self.node, "node")):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(
                        f"ray {name} exited ({proc.returncode}): "
                        + (self.temp / f"{name}.log").read_text(errors="replace")[-3000:]
                    )
            if self.head is not None and _gcs_answers(self.port):
                alive = {n["NodeID"] for n in self.alive_nodes()}
                if len(alive) >= nodes and not alive & self.killed:
                    return
            time.sleep(0.5)
        raise TimeoutError(
            f"{nodes} Ray node(s) not alive after {timeout}s: "
            + (self.temp / "head.log").read_text(errors="replace")[-3000:]
        )

    def sessions(self) -> list[int]:
        """The session ids of the running nodes (each ``ray start`` leads its own)."""
        return [p.pid for p in (self.head, self.node) if p is not None and p.poll() is None]

    def kill_node(self) -> None:
        """``kill -9`` every process of the extra node (its machine dies)."""
        assert self.node is not None
        self.killed |= {n["NodeID"] for n in self.alive_nodes() if n["NodeManagerAddress"] != "127.0.0.1"}
        _kill_session(self.node, signal.SIGKILL)
        self.node = None

    def stop(self) -> None:
        """Stop both nodes: SIGKILL to every process of their sessions (nothing of a test cluster is kept)."""
        for proc in (self.node, self.head):
            if proc is not None:
                _kill_session(proc, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)


def _gcs_answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _kill_session(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to every process of the session ``proc`` leads (started by this helper), then reap ``proc``."""
    for pid in pids_in_sessions([proc.pid]):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


def _inodes_of(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def pids_in_sessions(sessions: list[int]) -> set[int]:
    """Every live process whose session is one of ``sessions``."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) in sessions:
                    pids.add(int(entry))
            except OSError:
                continue
    return pids


def _decode(address: str) -> str:
    """``0100007F:1F90`` (IPv4) or 32 hex digits (IPv6, four little-endian words) to a printable host."""
    host = address.split(":")[0]
    if len(host) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(host)[::-1])
    raw = b"".join(bytes.fromhex(host[i : i + 8])[::-1] for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw)


def listening_sockets(pids: set[int]) -> list[tuple[str, str, int]]:
    """``(family, host, port)`` of every TCP socket in LISTEN state owned by ``pids``, from /proc/net/tcp{,6}."""
    inodes = _inodes_of(pids)
    found = []
    for family in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{family}").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append((family, _decode(fields[1]), int(fields[1].split(":")[1], 16)))
    return found


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
