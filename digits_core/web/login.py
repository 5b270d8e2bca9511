"""Login state for ``--auth-token`` servers: server-side sessions, idle expiry, fair throttling, safe ``next``.

* **Sessions** live in the server: the signed cookie holds only a random
  session id, so ``/logout`` ends the session for good (a copied cookie is
  worthless afterwards) and a session unused for ``session_idle_minutes``
  (``digits serve --session-idle-minutes``, default 480) expires.
* **Failed logins** (a wrong token on ``/login`` or in an
  ``Authorization``/``X-Auth-Token`` header) are counted per *source* and
  per *target* (the server's token), never per exact address: a source is
  the client's network (:func:`client_network`: the /24 of an IPv4
  address, the /64 of an IPv6 one, all of loopback as one), or, for a
  browser that has logged in before, that browser (its signed
  ``digits_client`` cookie). After :data:`FREE_FAILURES` failures of one
  source, each further try of that source must wait ``2 ** (failures -
  FREE_FAILURES)`` seconds (at most :data:`MAX_DELAY_S`); a try that comes
  sooner gets ``429 Too Many Requests`` with ``Retry-After``, without the
  token even being compared. After :data:`TARGET_FREE_FAILURES` failures
  from all sources together (a guesser spread over many networks), a
  network that has failed itself waits the same way between tries.
* **No lock-out**: a browser that has logged in before is its own source,
  so nobody else's wrong tokens (another user on 127.0.0.1, everyone
  behind one proxy) ever delay its right one. A success clears only the
  count of that browser, never a network's (a victim's login does not
  reset the guesser's count); counts are forgotten :data:`FORGET_AFTER_S`
  after their last failure. Behind a reverse proxy the operator names
  (``digits serve --trusted-proxy``), the client is read from
  ``X-Forwarded-For`` (:func:`forwarded_client`); from anyone else that
  header is ignored.
* **next** after login is accepted only as a path on this server, checked
  on its parsed form (no scheme, no host, no ``//``, no backslash or
  control character, before or after percent-decoding).
"""

from __future__ import annotations

import ipaddress
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

#: Failed logins per source (network or known browser) before delays start.
FREE_FAILURES = 5
#: Failed logins from all sources together before sources that failed wait between tries too.
TARGET_FREE_FAILURES = 20
#: Seconds after its last failure that a count is forgotten.
FORGET_AFTER_S = 6 * 3600
#: The one target there is: the server's auth token (a key of its own among the counts).
TOKEN_TARGET = "target:token"
#: Longest delay between two tries of one client, in seconds.
MAX_DELAY_S = 900
#: Default idle time after which a session expires, in minutes.
DEFAULT_IDLE_MINUTES = 480


class LoginState:
    """Sessions and failure counts of one app (thread-safe; in memory, so a restart logs everyone out).

    Args:
        idle_seconds: A session unused this long expires.
        clock: Seconds, monotonic (tests pass their own).
    """

    def __init__(self, idle_seconds: float = DEFAULT_IDLE_MINUTES * 60, clock: Callable[[], float] = time.monotonic):
        self.idle_seconds = float(idle_seconds)
        self.clock = clock
        self._sessions: dict[str, float] = {}
        self._failures: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    # -- sessions --------------------------------------------------------------------

    def open_session(self) -> str:
        """A new session id (put it in the signed cookie)."""
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._drop_idle()
            self._sessions[sid] = self.clock()
        return sid

    def touch(self, sid: object) -> bool:
        """True (and the idle timer restarts) if ``sid`` is a live session; an expired one is dropped."""
        if not isinstance(sid, str):
            return False
        with self._lock:
            seen = self._sessions.get(sid)
            if seen is None:
                return False
            if self.clock() - seen > self.idle_seconds:
                del self._sessions[sid]
                return False
            self._sessions[sid] = self.clock()
            return True

    def close_session(self, sid: object) -> None:
        """End ``sid`` (logout)."""
        with self._lock:
            self._sessions.pop(sid, None) if isinstance(sid, str) else None

    def _drop_idle(self) -> None:
        now = self.clock()
        for sid in [s for s, seen in self._sessions.items() if now - seen > self.idle_seconds]:
            del self._sessions[sid]

    # -- failed logins ------------------------------------------------------------------

    def retry_after(self, source: str, target: str = TOKEN_TARGET) -> int:
        """Seconds ``source`` must still wait before its next try at ``target`` (0: it may try now).

        The target's count delays only network sources that have failed
        themselves; a known browser (``client:...``) waits only for its own.
        """
        with self._lock:
            now = self.clock()
            wait = self._wait(source, FREE_FAILURES, now)
            if not source.startswith("client:") and self._count(source, now):
                wait = max(wait, self._wait(target, TARGET_FREE_FAILURES, now))
        return max(0, math.ceil(wait))

    def failed(self, source: str, target: str = TOKEN_TARGET) -> None:
        """Count a failed try of ``source`` at ``target``."""
        with self._lock:
            now = self.clock()
            if len(self._failures) > 10_000:  # bounded: forget the oldest sources first
                for old in sorted(self._failures, key=lambda c: self._failures[c][1])[:1000]:
                    del self._failures[old]
            for key in (source, target):
                self._failures[key] = (self._count(key, now) + 1, now)

    def succeeded(self, source: str) -> None:
        """A right token from ``source``: clears its count if it is a known browser (never a network's)."""
        if source.startswith("client:"):
            with self._lock:
                self._failures.pop(source, None)

    def _count(self, key: str, now: float) -> int:
        count, last = self._failures.get(key, (0, 0.0))
        return count if count and now - last <= FORGET_AFTER_S else 0

    def _wait(self, key: str, free: int, now: float) -> float:
        count = self._count(key, now)
        if count < free:
            return 0.0
        return min(MAX_DELAY_S, 2 ** (count - free)) - (now - self._failures[key][1])


def client_network(address: str) -> str:
    """The network failed logins from ``address`` are counted against: ``net:1.2.3.0/24``, ``net:2001:db8::/64``.

    Loopback (127.0.0.0/8, ::1) is one network; an IPv4-mapped IPv6
    address counts as its IPv4 one; a text that is no address counts as itself.
    """
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]").split("%")[0])
    except ValueError:
        return f"net:{address}"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "net:loopback"
    prefix = 24 if ip.version == 4 else 64
    return f"net:{ipaddress.ip_network(f'{ip}/{prefix}', strict=False)}"


def parse_networks(values: Iterable[str], what: str = "--trusted-proxy") -> list[str]:
    """``values`` (addresses or networks) as normalized network texts; raises ``ValueError`` naming a bad one."""
    networks = []
    for value in values:
        try:
            networks.append(str(ipaddress.ip_network(value.strip().strip("[]"), strict=False)))
        except ValueError:
            raise ValueError(f"{what} {value}: give an IP address or network, e.g. 10.0.0.5 or 10.0.0.0/8.") from None
    return networks


def in_networks(address: str, networks: Sequence[str]) -> bool:
    """True when ``address`` lies in one of ``networks`` (texts from :func:`parse_networks`)."""
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]").split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in ipaddress.ip_network(n) for n in networks)


def forwarded_client(peer: str, forwarded_for: str | None, trusted: Sequence[str]) -> str:
    """The client's address: ``peer``, or when ``peer`` is a trusted proxy, the address it forwarded for.

    ``X-Forwarded-For`` is read from the right (each proxy appends the
    address it heard from), skipping trusted proxies; the first address
    that is not one is the client. Anything before it was written by the
    client and is ignored, as is the whole header from an untrusted peer.
    """
    client = peer
    if not forwarded_for or not in_networks(peer, trusted):
        return client
    for hop in reversed([h.strip() for h in forwarded_for.split(",")]):
        try:
            ipaddress.ip_address(hop.strip("[]").split("%")[0])
        except ValueError:
            return client  # malformed: the last proxy we trust is as far as we can see
        client = hop
        if not in_networks(hop, trusted):
            return client
    return client


def safe_next(target: str | None, fallback: str) -> str:
    """``target`` if it is a path on this server, else ``fallback`` (parsed, not pattern-matched)."""
    if not target:
        return fallback
    for text in (target, unquote(target)):
        if "\\" in text or any(ord(c) < 32 or ord(c) == 127 for c in text):
            return fallback
        parts = urlsplit(text)
        if parts.scheme or parts.netloc or not parts.path.startswith("/") or text.startswith("//"):
            return fallback
    parts = urlsplit(target)
    return urlunsplit(("", "", parts.path, parts.query, parts.fragment))


__all__ = [
    "DEFAULT_IDLE_MINUTES",
    "FORGET_AFTER_S",
    "FREE_FAILURES",
    "LoginState",
    "MAX_DELAY_S",
    "TARGET_FREE_FAILURES",
    "TOKEN_TARGET",
    "client_network",
    "forwarded_client",
    "in_networks",
    "parse_networks",
    "safe_next",
]
