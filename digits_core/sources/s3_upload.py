"""Upload a class-folder tree to S3 (``digits upload-s3``), as DIGITS's ``upload_s3_data.py``.

Also reads DIGITS's ``upload_config.cfg`` format::

    [S3 Config]
    endpoint = http://your-endpoint-here:80
    accesskey = 0123456789abcde
    secretkey = ...
    bucket = digits
    prefix = mnist
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .s3 import S3Object, list_objects
from .s3_client import (
    IMAGE_EXTENSIONS,
    S3BucketNotFoundError,
    S3Error,
    S3Location,
    _call,
    explain,
    s3_client,
)

CONFIG_SECTION = "S3 Config"
#: Files at least this big go up in parts (their ETag is then not an MD5).
MULTIPART_THRESHOLD = 64 << 20
#: Object metadata key holding the MD5 of what was uploaded.
MD5_METADATA = "digits-md5"


def read_upload_config(path: str | os.PathLike) -> dict[str, str]:
    """Read a DIGITS ``upload_config.cfg``.

    Returns:
        The keys present among ``endpoint``, ``accesskey``, ``secretkey``,
        ``bucket`` and ``prefix`` (values stripped).

    Raises:
        S3Error: The file is missing, unreadable or has no ``[S3 Config]`` section.
    """
    parser = configparser.RawConfigParser()
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError as exc:
        raise S3Error(f"Cannot read S3 config file {path}: {exc.strerror or exc}") from exc
    except configparser.Error as exc:
        raise S3Error(f"S3 config file {path} is not an INI file: {exc}") from exc
    if not parser.has_section(CONFIG_SECTION):
        raise S3Error(f"S3 config file {path} has no [{CONFIG_SECTION}] section (see DIGITS's upload_config.cfg).")
    keys = ("endpoint", "accesskey", "secretkey", "bucket", "prefix")
    return {k: parser.get(CONFIG_SECTION, k).strip() for k in keys if parser.has_option(CONFIG_SECTION, k)}


@dataclass
class UploadReport:
    """What :func:`upload_tree` did.

    Attributes:
        uploaded: Keys written.
        skipped: Keys already present with the same size and MD5.
        bytes_uploaded: Bytes sent.
        bucket_created: Whether the bucket had to be created.
    """

    uploaded: list[str]
    skipped: list[str]
    bytes_uploaded: int
    bucket_created: bool


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_bucket(location: S3Location) -> bool:
    """Create the location's bucket if it does not exist.

    Returns:
        True if the bucket was created.

    Raises:
        S3Error: Unreachable endpoint, rejected credentials, or the bucket cannot be created.
    """
    import botocore.exceptions as bex

    client = s3_client(location, attempts=1, timeout=10.0)
    try:
        client.list_objects_v2(Bucket=location.bucket, MaxKeys=1)
        return False
    except bex.ClientError as exc:
        error = explain(exc, location, "list the bucket")
        if not isinstance(error, S3BucketNotFoundError) or "valid bucket name" in str(error):
            raise error from exc
    except bex.BotoCoreError as exc:
        raise explain(exc, location, "list the bucket") from exc
    kwargs = {}
    region = location.region
    if region and region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    _call(location, f"create bucket {location.bucket!r}", client.create_bucket, Bucket=location.bucket, **kwargs)
    return True


def _local_files(folder: Path, extensions: Sequence[str] | None) -> list[Path]:
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            if extensions is not None and not name.lower().endswith(tuple(extensions)):
                continue
            files.append(Path(root) / name)
    return files


def upload_tree(  # noqa: C901 - split pending (the complexity ratchet in pyproject.toml)
    folder: str | os.PathLike,
    location: S3Location,
    *,
    create_bucket: bool = True,
    extensions: Sequence[str] | None = IMAGE_EXTENSIONS,
    workers: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> UploadReport:
    """Upload the files under ``folder`` to ``location`` (key = prefix + relative path).

    Uploads run in ``workers`` threads. A file whose key already exists with
    the same size and MD5 is skipped, so an interrupted upload is finished by
    running it again.

    Args:
        folder: A class-folder tree, e.g. ``mnist/`` holding ``train/<class>/*.png``.
        location: Target bucket and prefix (``"mnist/"`` gives ``mnist/train/3/00001.png``).
        create_bucket: Create the bucket when missing.
        extensions: Only files with these extensions (default: images); ``None`` uploads every file.
        workers: Parallel uploads.
        progress: Called as ``progress(files_done, files_total)``.

    Raises:
        S3Error: The folder is missing or empty, or S3 refused (message names endpoint, bucket or credentials).
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise S3Error(f"{folder} is not a folder.")
    files = _local_files(folder, extensions)
    if not files:
        kinds = ", ".join(extensions) if extensions else "any"
        raise S3Error(f"No files to upload in {folder} (looked for {kinds}).")
    prefix = location.prefix
    if prefix and not prefix.endswith("/"):
        prefix += "/"
        location = location.child(prefix)
    created = ensure_bucket(location) if create_bucket else False
    existing: dict[str, S3Object] = {} if created else {o.key: o for o in list_objects(location)}
    client = s3_client(location, pool=max(10, workers))

    def same(path: Path, key: str, size: int) -> tuple[bool, str]:
        digest = _md5(path)
        current = existing.get(key)
        if current is None or current.size != size:
            return False, digest
        if current.etag == digest:
            return True, digest
        if "-" in current.etag:  # multipart: compare the MD5 we stored at upload time
            head = _call(
                location, f"read s3://{location.bucket}/{key}", client.head_object, Bucket=location.bucket, Key=key
            )
            return head.get("Metadata", {}).get(MD5_METADATA) == digest, digest
        return False, digest

    def one(path: Path) -> tuple[str, int]:
        key = prefix + path.relative_to(folder).as_posix()
        size = path.stat().st_size
        skip, digest = same(path, key, size)
        if skip:
            return key, -1
        action = f"upload {path} to s3://{location.bucket}/{key}"
        if size >= MULTIPART_THRESHOLD:
            _call(
                location,
                action,
                client.upload_file,
                str(path),
                location.bucket,
                key,
                ExtraArgs={"Metadata": {MD5_METADATA: digest}},
            )
        else:
            body = path.read_bytes()
            _call(
                location,
                action,
                client.put_object,
                Bucket=location.bucket,
                Key=key,
                Body=body,
                ContentMD5=base64.b64encode(bytes.fromhex(digest)).decode("ascii"),
                Metadata={MD5_METADATA: digest},
            )
        return key, size

    uploaded, skipped, sent = [], [], 0
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, path) for path in files]
        try:
            for done, future in enumerate(as_completed(futures), 1):
                key, size = future.result()
                if size < 0:
                    skipped.append(key)
                else:
                    uploaded.append(key)
                    sent += size
                if progress:
                    progress(done, len(files))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return UploadReport(sorted(uploaded), sorted(skipped), sent, created)
