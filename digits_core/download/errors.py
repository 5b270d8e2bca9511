"""Errors of ``digits download``."""

from __future__ import annotations

from ..errors import DigitsError


class DownloadError(DigitsError):
    """A standard dataset could not be fetched, verified or unpacked."""


class NetworkError(DownloadError):
    """No server answered (no network, wrong URL, closed port, proxy)."""


class ChecksumError(DownloadError):
    """A file's checksum differs from the published one."""
