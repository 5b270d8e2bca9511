"""Login state for ``--auth-token`` servers: server-side sessions, idle expiry, throttled failures, safe ``next``.

* **Sessions** live in the server: the signed cookie holds only a random
  session id, so ``/logout`` ends the session for good (a copied cookie is
  worthless afterwards) and a session unused for ``session_idle_minutes``
  (``digits serve --session-idle-minutes``, default 480) expires.
* **Failed logins** (a wrong token on ``/login`` or in an
  ``Authorization``/``X-Auth-Token`` header) are counted per client
  address. After :data:`FREE_FAILURES` failures, each further try must wait
  ``2 ** (failures - FREE_FAILURES)`` seconds (at most
  :data:`MAX_DELAY_S`); a try that comes sooner gets ``429 Too Many
  Requests`` with ``Retry-After``, without the token even being compared.
  A successful login clears the count.
* **next** after login is accepted only as a path on this server, checked
  on its parsed form (no scheme, no host, no ``//``, no backslash or
  control character, before or after percent-decoding).
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Callable
from urllib.parse import unquote, urlsplit, urlunsplit

#: Failed logins per client before delays start.
FREE_FAILURES = 5
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

    def retry_after(self, client: str) -> int:
        """Seconds ``client`` must still wait before its next try (0: it may try now)."""
        with self._lock:
            count, last = self._failures.get(client, (0, 0.0))
        if count < FREE_FAILURES:
            return 0
        wait = min(MAX_DELAY_S, 2 ** (count - FREE_FAILURES)) - (self.clock() - last)
        return max(0, math.ceil(wait))

    def failed(self, client: str) -> None:
        """Count a failed try of ``client``."""
        with self._lock:
            count, _ = self._failures.get(client, (0, 0.0))
            if len(self._failures) > 10_000:  # bounded: forget the oldest clients first
                for old in sorted(self._failures, key=lambda c: self._failures[c][1])[:1000]:
                    del self._failures[old]
            self._failures[client] = (count + 1, self.clock())

    def succeeded(self, client: str) -> None:
        """Clear ``client``'s failures."""
        with self._lock:
            self._failures.pop(client, None)


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


__all__ = ["DEFAULT_IDLE_MINUTES", "FREE_FAILURES", "LoginState", "MAX_DELAY_S", "safe_next"]
