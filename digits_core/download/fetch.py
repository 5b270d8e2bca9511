"""Fetch one file over HTTP(S) with resume, verify its checksum.

Standard library only (``urllib``). A download goes to ``NAME.part`` next to
its destination and is renamed when complete and verified, so a finished file
is always a good one. An interrupted download keeps its ``.part`` file; the
next attempt asks the server for the rest (HTTP ``Range``) and appends to it.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from .errors import ChecksumError, DownloadError, NetworkError

logger = logging.getLogger(__name__)

#: ``progress(task, done, total)``: ``total`` is ``None`` when unknown.
ProgressCallback = Callable[[str, int, "int | None"], None]

CHUNK_SIZE = 1 << 20
USER_AGENT = f"digits-core/{__version__} (+https://github.com/NVIDIA/DIGITS)"


def file_md5(path: str | os.PathLike, chunk_size: int = CHUNK_SIZE) -> str:
    """Return the MD5 hex digest of a file, read in chunks."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_md5(path: Path, expected: str | None, origin: str) -> None:
    """Raise :class:`ChecksumError` unless ``path`` has MD5 ``expected`` (``None`` skips the check)."""
    if not expected:
        return
    actual = file_md5(path)
    if actual != expected.lower():
        raise ChecksumError(
            f"{path.name} from {origin} is corrupt or not the expected file: MD5 {actual}, "
            f"expected {expected}. The bad copy was removed; run the command again, or point "
            "--source at a good copy."
        )


def _local_path(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    if "://" not in url:
        return Path(url).expanduser()
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
        if not isinstance(exc, BaseException):
            return str(exc)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text


def fetch(
    url: str,
    dest: Path,
    *,
    md5: str | None = None,
    progress: ProgressCallback | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download ``url`` to ``dest`` (resuming a partial download) and verify it.

    A local path or ``file://`` URL is copied instead. If ``dest`` already
    exists and matches ``md5`` nothing is fetched.

    Args:
        url: ``http(s)://`` or ``file://`` URL, or a local path.
        dest: Where the verified file ends up.
        md5: Expected MD5 (hex); ``None`` accepts any content.
        progress: Called with ``("download NAME", bytes_done, bytes_total)``.
        timeout: Seconds to wait for the server (connect and each read).

    Returns:
        ``dest``.

    Raises:
        NetworkError: The server could not be reached.
        ChecksumError: The downloaded file does not match ``md5`` (it is deleted).
        DownloadError: The server refused the file (HTTP error) or the
            transfer broke off (the partial file is kept for a resume).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        try:
            verify_md5(dest, md5, str(dest))
            return dest
        except ChecksumError:
            logger.warning("%s does not match its checksum; downloading it again", dest)
            dest.unlink()
    part = dest.with_name(dest.name + ".part")
    local = _local_path(url)
    if local is not None:
        if not local.is_file():
            raise DownloadError(f"{local} does not exist or is not a file.")
        shutil.copyfile(local, part)
    else:
        resumed = _http_download(url, part, progress=progress, timeout=timeout, task=f"download {dest.name}")
        try:
            verify_md5(part, md5, url)
        except ChecksumError:
            part.unlink()
            if not resumed:
                raise
            logger.warning("resumed download of %s is corrupt; downloading it again from the start", dest.name)
            _http_download(url, part, progress=progress, timeout=timeout, task=f"download {dest.name}")
            try:
                verify_md5(part, md5, url)
            except ChecksumError:
                part.unlink()
                raise
        os.replace(part, dest)
        return dest
    try:
        verify_md5(part, md5, url)
    except ChecksumError:
        part.unlink()
        raise
    os.replace(part, dest)
    return dest


def _http_download(url: str, part: Path, *, progress, timeout: float, task: str) -> bool:
    """Download ``url`` into ``part``, appending when it already holds a prefix.

    Returns:
        True when an existing partial file was resumed.
    """
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http(s) only here)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            # Nothing left to send: the partial file may already be whole; the checksum decides.
            logger.info("%s: server has nothing past byte %d", url, offset)
            return True
        raise DownloadError(f"{url} answered HTTP {exc.code} {exc.reason}.") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise NetworkError(f"cannot connect to {url}: {_reason(exc)}") from exc
    with response:
        status = getattr(response, "status", 200)
        length = response.headers.get("Content-Length")
        resumed = False
        if offset and status == 206 and _range_start(response.headers.get("Content-Range")) == offset:
            mode, done, resumed = "ab", offset, True
            logger.info("resuming %s at byte %d", url, offset)
        else:
            mode, done = "wb", 0
        total = done + int(length) if length and length.isdigit() else None
        if progress:
            progress(task, done, total)
        try:
            with open(part, mode) as out:
                while True:
                    chunk = response.read(CHUNK_SIZE)
                    if not chunk:
                        break
                    out.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(task, done, total)
        except (OSError, urllib.error.URLError, ValueError, http.client.HTTPException) as exc:
            raise DownloadError(
                f"download of {url} broke off after {done} bytes ({_reason(exc)}); "
                f"run the same command again to resume from {part}."
            ) from exc
    if total is not None and done < total:
        raise DownloadError(
            f"download of {url} ended after {done} of {total} bytes; run the same command again to resume from {part}."
        )
    return resumed


def _range_start(content_range: str | None) -> int | None:
    # "bytes 100-199/200"
    if not content_range or not content_range.startswith("bytes "):
        return None
    try:
        return int(content_range[6:].split("-", 1)[0])
    except ValueError:
        return None
