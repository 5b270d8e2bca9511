"""S3 (and S3-compatible servers: MinIO, Ceph, moto...) as a dataset source, with boto3.

An :class:`S3Location` names an endpoint, a bucket and a key prefix, plus
optional credentials. Credentials not given explicitly come from boto3's
standard chain: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and ``~/.aws/credentials``/``~/.aws/config``. A location never
shows its secret key: ``repr()``, :meth:`S3Location.describe` and every error
message leave it out.

Errors a user can fix raise :class:`S3Error` subclasses naming what is wrong:
:class:`S3EndpointError` (unreachable endpoint), :class:`S3BucketNotFoundError`,
:class:`S3CredentialsError` (missing or rejected credentials, access denied).

Layout read by :func:`list_class_tree` (as DIGITS's "Use S3" tab)::

    s3://BUCKET/PREFIX/<class 1>/<image>...
    s3://BUCKET/PREFIX/<class 2>/<image>...

This module checks, lists and reads; locations, errors and clients are
:mod:`digits_core.sources.s3_client` (re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .s3_client import (  # noqa: F401  (re-exported: the public S3 names live in this module)
    DEFAULT_REGION,
    IMAGE_EXTENSIONS,
    S3BucketNotFoundError,
    S3CredentialsError,
    S3EndpointError,
    S3Error,
    S3Location,
    _call,
    explain,
    parse_s3_url,
    s3_client,
)

# -- checks ----------------------------------------------------------------------


def check_location(location: S3Location, *, require_objects: bool = True) -> None:
    """Check, quickly and before any job starts, that ``location`` can be read.

    One ``ListObjectsV2`` call (no retries) tells an unreachable endpoint, a
    missing bucket, missing or rejected credentials apart.

    Args:
        location: The location to check.
        require_objects: Also fail when nothing exists under the prefix.

    Raises:
        S3EndpointError, S3BucketNotFoundError, S3CredentialsError, S3Error:
            The message names the endpoint, bucket, prefix or credentials at fault.
    """
    client = s3_client(location, attempts=1, timeout=10.0)
    response = _call(
        location, "list the bucket", client.list_objects_v2, Bucket=location.bucket, Prefix=location.prefix, MaxKeys=1
    )
    if require_objects and not response.get("KeyCount", len(response.get("Contents", []))):
        raise S3Error(f"Nothing found under {location.describe()}; check the prefix (path) and bucket.")


# -- listing ---------------------------------------------------------------------


@dataclass(frozen=True)
class S3Object:
    """One listed object: key, size in bytes and ETag (without quotes)."""

    key: str
    size: int
    etag: str


def list_prefixes(location: S3Location) -> list[str]:
    """Return the "sub-folders" directly under the location's prefix (full prefixes, ending in ``/``)."""
    client = s3_client(location)
    prefix = location.prefix
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    paginator = client.get_paginator("list_objects_v2")
    found: list[str] = []
    pages = paginator.paginate(Bucket=location.bucket, Prefix=prefix, Delimiter="/")
    for page in _call(location, "list the bucket", lambda: list(pages)):
        found.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
    return sorted(found)


def list_objects(location: S3Location, prefix: str | None = None) -> list[S3Object]:
    """Return every object under ``prefix`` (default: the location's), sorted by key."""
    client = s3_client(location)
    prefix = location.prefix if prefix is None else prefix
    paginator = client.get_paginator("list_objects_v2")
    pages = paginator.paginate(Bucket=location.bucket, Prefix=prefix)
    objects = []
    for page in _call(location, "list the bucket", lambda: list(pages)):
        for item in page.get("Contents", []):
            objects.append(S3Object(item["Key"], int(item["Size"]), str(item.get("ETag", "")).strip('"')))
    return sorted(objects, key=lambda o: o.key)


def list_class_tree(
    location: S3Location,
    *,
    extensions: Sequence[str] | None = IMAGE_EXTENSIONS,
    workers: int = 8,
) -> dict[str, list[S3Object]]:
    """List ``PREFIX/<class>/...`` in parallel: class name -> its objects (sorted by key).

    Objects in deeper "sub-folders" of a class belong to that class, as with
    local class folders. Classes are listed in name order.

    Args:
        location: The location whose prefix holds one prefix per class.
        extensions: Keep only keys with these (lower-case) extensions; ``None`` keeps all.
        workers: Parallel listing requests.

    Raises:
        S3Error: As :func:`check_location`; also when no class prefix exists.
    """
    prefixes = list_prefixes(location)
    if not prefixes:
        raise S3Error(
            f"No class folders under {location.describe()}: expected keys like "
            f"{location.prefix.rstrip('/') + '/' if location.prefix else ''}<class>/<image>."
        )

    def one(prefix: str) -> tuple[str, list[S3Object]]:
        objects = list_objects(location, prefix)
        if extensions is not None:
            objects = [o for o in objects if o.key.lower().endswith(tuple(extensions))]
        return prefix.rstrip("/").rsplit("/", 1)[-1], objects

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(prefixes)))) as pool:
        return dict(pool.map(one, prefixes))


# -- reading ---------------------------------------------------------------------


def read_object(location: S3Location, key: str, *, chunk_size: int = 1 << 20) -> bytes:
    """Return the bytes of one object, streamed from the server in chunks.

    Raises:
        S3Error: As :func:`explain` (the message names the key).
    """
    client = s3_client(location)
    response = _call(location, f"read s3://{location.bucket}/{key}", client.get_object, Bucket=location.bucket, Key=key)
    body = response["Body"]
    try:
        return b"".join(
            _call(location, f"read s3://{location.bucket}/{key}", lambda: list(body.iter_chunks(chunk_size)))
        )
    finally:
        body.close()


def iter_objects(location: S3Location, keys: Iterable[str], *, workers: int = 8) -> Iterator[tuple[str, bytes]]:
    """Fetch objects in parallel threads, yielding ``(key, bytes)`` in the order of ``keys``.

    At most ``2 × workers`` objects are in flight or buffered at a time.
    """
    keys = iter(keys)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        pending = []
        for key in keys:
            pending.append((key, pool.submit(read_object, location, key)))
            if len(pending) >= 2 * workers:
                k, fut = pending.pop(0)
                yield k, fut.result()
        for k, fut in pending:
            yield k, fut.result()


def download_prefix(
    location: S3Location,
    dest: os.PathLike | str,
    *,
    workers: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Copy every object under the location's prefix into ``dest`` (keys relative to the prefix).

    Returns:
        The local paths written.
    """
    from pathlib import Path

    dest = Path(dest)
    objects = list_objects(location)
    written = []
    for done, (key, data) in enumerate(iter_objects(location, (o.key for o in objects), workers=workers), 1):
        rel = key[len(location.prefix) :].lstrip("/")
        if not rel or rel.endswith("/"):
            continue
        path = dest / rel
        if ".." in Path(rel).parts:
            raise S3Error(f"refusing to write key {key!r} outside {dest}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(str(path))
        if progress:
            progress(done, len(objects))
    return written
