"""Outbound requests to URLs a web user typed: only where the operator allows.

A web user can type a URL (a DICOMweb server, an S3 endpoint) that the
server then connects to. Without a guard that is server-side request
forgery: other services on the server's loopback, the cloud metadata
address, the private network. So, in a server context (a web request, or a
job or inference the server queued; see :func:`digits_core.paths.confined_to`):

* loopback, link-local, private, multicast, reserved and unspecified
  addresses are refused, in every spelling (``127.1``, ``2130706433``,
  ``0x7f.1``, ``::ffff:127.0.0.1``): the host is resolved and every address
  it resolves to is checked;
* public addresses are allowed;
* the operator widens or narrows this with ``digits serve --allow-url
  PATTERN`` (repeatable), passed to the server's workers in
  ``$DIGITS_ALLOW_URL`` (one pattern per line). A pattern is an address or
  network (``127.0.0.1``, ``10.0.0.0/8``), a host name or ``host:port``
  (``*`` wildcards: ``pacs.example.org``, ``127.0.0.1:8042``), or ``none``,
  which refuses every typed URL, public ones too.

The check runs on the form field, before any request leaves, and again
where the connection is made: :func:`guard_session` (``requests``) and
:func:`guarded_pool` (any urllib3 connection pool, e.g. botocore's for S3)
check the address each socket actually connected to, on every redirect and
every new connection too, so a name that resolved to a public address when
it was checked and to 127.0.0.1 when connected (DNS rebinding) is refused. Messages name the
URL's host and a fixed reason, never anything the server answered.

The command line and the Python API (the operator's own shell) are not
confined: :func:`check_url` allows every URL there.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import socket
from typing import Any
from urllib.parse import urlsplit

from .errors import DigitsError

#: Environment variable holding the operator's ``--allow-url`` patterns (one per line).
ALLOW_ENV = "DIGITS_ALLOW_URL"

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundURLError(DigitsError):
    """A URL a web user typed leads where the operator did not allow outbound requests.

    Attributes:
        field: The form field that gave the URL (``""`` when unknown).
    """

    def __init__(self, message: str, field: str = ""):
        self.field = field
        super().__init__(message)


def in_server_context() -> bool:
    """True while a web request, or a job or inference the server queued, runs (URLs are then guarded)."""
    from .paths import current_roots

    return current_roots() is not None


def allow_patterns() -> list[str]:
    """The operator's ``--allow-url`` patterns (from ``$DIGITS_ALLOW_URL``)."""
    return [line.strip() for line in os.environ.get(ALLOW_ENV, "").splitlines() if line.strip()]


def _blocked(address: _Address) -> bool:
    """True for an address a typed URL may not reach by default (anything but a public unicast one)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def _pattern_allows(pattern: str, host: str, port: int, addresses: list[_Address]) -> bool:
    try:
        network = ipaddress.ip_network(pattern, strict=False)
    except ValueError:
        pass
    else:
        return bool(addresses) and all(a in network for a in addresses)
    host = host.lower()
    pattern = pattern.lower()
    return fnmatch.fnmatchcase(f"{host}:{port}", pattern) or fnmatch.fnmatchcase(host, pattern)


def resolve_host(host: str, port: int) -> list[_Address]:
    """Every address ``host`` resolves to (numeric spellings such as ``2130706433`` included)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def address_allowed(host: str, port: int, address: _Address, patterns: list[str] | None = None) -> bool:
    """Whether a connection to ``address`` (for ``host:port``) is allowed by the patterns and defaults."""
    patterns = allow_patterns() if patterns is None else patterns
    if any(p.lower() == "none" for p in patterns):
        return False
    if any(_pattern_allows(p, host, port, [address]) for p in patterns):
        return True
    return not _blocked(address)


def check_url(url: str, field: str = "url") -> None:
    """Refuse, in a server context, a typed URL the operator did not allow (a no-op elsewhere).

    Args:
        url: The URL as typed.
        field: The form field it came from, named in the error.

    Raises:
        OutboundURLError: Not an http(s) URL, a host that does not resolve, or
            an address the operator did not allow.
    """
    if in_server_context():
        check_destination(url, field)


def check_destination(url: str, field: str = "url") -> None:
    """:func:`check_url` in any context: for hooks that run where the server context is not set (threads).

    Raises:
        OutboundURLError: As :func:`check_url`.
    """
    parts = urlsplit(str(url or "").strip())
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise OutboundURLError(f"{field}: the URL's port is not a number.", field) from None
    if parts.scheme not in ("http", "https") or not host:
        raise OutboundURLError(f"{field}: give an http:// or https:// URL.", field)
    patterns = allow_patterns()
    refused = (
        f"{field}: this server does not send requests to {host} (a loopback, link-local or private "
        "address, or one the operator did not allow); ask the operator to start it with "
        "digits serve --allow-url HOST[:PORT]."
    )
    if any(p.lower() == "none" for p in patterns):
        raise OutboundURLError(
            f"{field}: this server sends no requests to URLs typed in the form "
            "(digits serve --allow-url none); choose a server the operator named.",
            field,
        )
    addresses = resolve_host(host, port)
    if not addresses:
        raise OutboundURLError(f"{field}: the host {host} cannot be resolved.", field)
    if not all(address_allowed(host, port, a, patterns) for a in addresses):
        raise OutboundURLError(refused, field)


def guard_session(session: Any, max_retries: Any = 0) -> None:
    """Make a ``requests.Session`` check every connection it opens against :func:`address_allowed`.

    The address checked is the one the socket connected to (after DNS
    resolution), for the first request and every redirect; a refused one
    raises :class:`OutboundURLError` before anything is sent on it. Proxies
    from the environment are not used (they would hide the real destination).

    Args:
        session: The ``requests.Session`` to guard.
        max_retries: The adapters' retry policy (a ``urllib3`` ``Retry`` or a
            count, as ``requests.adapters.HTTPAdapter`` takes it); a refused
            address is never retried.
    """
    adapter = _adapter_class()(max_retries=max_retries)
    session.trust_env = False
    session.mount("http://", adapter)
    session.mount("https://", adapter)


def _checked(connection_class: Any) -> type:
    """``connection_class`` whose new sockets are refused unless their peer address is allowed."""

    class Guarded(connection_class):
        def _new_conn(self) -> Any:
            sock = super()._new_conn()
            try:
                address = ipaddress.ip_address(str(sock.getpeername()[0]).split("%")[0])
                allowed = address_allowed(self.host, self.port, address)
            except (OSError, ValueError):
                allowed = False
            if not allowed:
                sock.close()
                raise OutboundURLError(
                    f"This server does not send requests to {self.host} (a loopback, "
                    "link-local or private address, or one the operator did not allow: "
                    "digits serve --allow-url)."
                )
            return sock

    Guarded.__name__ = f"Guarded{connection_class.__name__}"
    return Guarded


def guarded_pool(pool_class: Any) -> type:
    """A subclass of the urllib3 connection pool ``pool_class`` whose connections check their peer address.

    Each new socket's peer address (after DNS resolution, at connect time) must pass
    :func:`address_allowed`, else the socket is closed and :class:`OutboundURLError` raised
    before a byte is sent on it.
    """
    return type(f"Guarded{pool_class.__name__}", (pool_class,), {"ConnectionCls": _checked(pool_class.ConnectionCls)})


_ADAPTER: list[type] = []


def _adapter_class() -> type:
    """A ``requests`` adapter whose connection pools use the checked connections (built once, lazily)."""
    if not _ADAPTER:
        from requests.adapters import HTTPAdapter
        from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

        pools = {"http": guarded_pool(HTTPConnectionPool), "https": guarded_pool(HTTPSConnectionPool)}

        class GuardedAdapter(HTTPAdapter):
            def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
                super().init_poolmanager(*args, **kwargs)
                self.poolmanager.pool_classes_by_scheme = dict(pools)

        _ADAPTER.append(GuardedAdapter)
    return _ADAPTER[0]


__all__ = [
    "ALLOW_ENV",
    "OutboundURLError",
    "address_allowed",
    "allow_patterns",
    "check_destination",
    "check_url",
    "guard_session",
    "guarded_pool",
    "in_server_context",
    "resolve_host",
]
