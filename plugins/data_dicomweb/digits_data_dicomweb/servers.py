"""DICOMweb servers the operator named, and which credentials a request may carry.

``digits serve --dicomweb-server NAME=URL`` (repeatable) names the PACS
servers of this installation; the server passes them to its workers in
``$DIGITS_DICOMWEB_SERVERS`` (``NAME=URL`` per line), and the dataset form
offers them in its *Server* choice. Only those servers get the operator's
credentials (``$DIGITS_DICOMWEB_PASSWORD`` / ``$DIGITS_DICOMWEB_TOKEN``) and
skip the outbound-URL guard (:mod:`digits_core.outbound`). A URL a web user
types gets neither: it must pass the guard, and only the password or token
typed with it is sent. On the command line (no server context) a typed URL
is the operator's own and keeps both, as before.
"""

from __future__ import annotations

import os

from digits_core.outbound import in_server_context

#: Environment variable listing the operator's named servers, ``NAME=URL`` per line.
SERVERS_ENV = "DIGITS_DICOMWEB_SERVERS"


def named_servers() -> dict[str, str]:
    """The operator's named DICOMweb servers, name -> URL (from ``$DIGITS_DICOMWEB_SERVERS``)."""
    servers = {}
    for line in os.environ.get(SERVERS_ENV, "").splitlines():
        name, sep, url = line.strip().partition("=")
        if sep and name.strip() and url.strip():
            servers[name.strip()] = url.strip()
    return servers


def server_choices() -> list[tuple[str, str]]:
    """The dataset form's *Server* choices: a typed URL, then each named server."""
    return [("", "The URL typed below")] + [(name, name) for name in sorted(named_servers())]


def pick_server(name: str, typed_url: str) -> tuple[str, bool]:
    """The URL to use and whether it is the operator's (named, or typed in the operator's own shell).

    Raises:
        ValueError: ``name`` is not a named server.
    """
    name = (name or "").strip()
    if name:
        servers = named_servers()
        if name not in servers:
            raise ValueError(
                f'named_server: "{name[:40]}" is not a server this DIGITS was started with '
                "(digits serve --dicomweb-server NAME=URL)"
            )
        return servers[name], True
    return typed_url, not in_server_context()


__all__ = ["SERVERS_ENV", "named_servers", "pick_server", "server_choices"]
