"""S3 locations, errors and clients (boto3, imported when a client is made).

An :class:`S3Location` names an endpoint, a bucket and a key prefix, plus
optional credentials. Credentials not given explicitly come from boto3's
standard chain: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and ``~/.aws/credentials``/``~/.aws/config``. A location never
shows its secret key: ``repr()``, :meth:`S3Location.describe` and every error
message leave it out. :func:`explain` turns a botocore failure into the
:class:`S3Error` subclass naming what is wrong. Public names are re-exported
by :mod:`digits_core.sources.s3`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import DigitsError

logger = logging.getLogger(__name__)

#: Image file extensions listed by default (lower case).
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".gif", ".tif", ".tiff")
DEFAULT_REGION = "us-east-1"


class S3Error(DigitsError):
    """An S3 location cannot be used (see the subclasses)."""


class S3EndpointError(S3Error):
    """The endpoint URL is malformed or nothing answers there."""


class S3BucketNotFoundError(S3Error):
    """The bucket does not exist at the endpoint."""


class S3CredentialsError(S3Error):
    """No credentials, credentials the server rejects, or access denied."""


def parse_s3_url(url: str) -> tuple[str, str]:
    """Split ``s3://bucket/prefix/`` into ``("bucket", "prefix/")``.

    Raises:
        S3Error: ``url`` does not start with ``s3://`` or has no bucket.
    """
    if not url.startswith("s3://"):
        raise S3Error(f"{url!r} is not an S3 URL (expected s3://BUCKET/PREFIX).")
    bucket, _, prefix = url[5:].partition("/")
    if not bucket:
        raise S3Error(f"{url!r} has no bucket name (expected s3://BUCKET/PREFIX).")
    return bucket, prefix


def _mask_key(access_key: str | None) -> str:
    if not access_key:
        return "(none)"
    return access_key[:4] + "…" + access_key[-3:] if len(access_key) > 8 else "…"


@dataclass(frozen=True)
class S3Location:
    """A bucket and key prefix at an S3 endpoint, with the credentials to read it.

    Attributes:
        bucket: Bucket name.
        prefix: Key prefix (``"mnist/train/"``); ``""`` for the whole bucket.
        endpoint_url: ``http(s)://host:port`` of an S3-compatible server;
            ``None`` uses AWS (or ``AWS_ENDPOINT_URL``).
        access_key: Access key id; ``None`` uses the standard AWS chain.
        secret_key: Secret access key; never shown in ``repr`` or messages.
        profile: A profile of ``~/.aws/credentials`` to use instead of keys.
        region: Signing region (default ``AWS_REGION``/``AWS_DEFAULT_REGION``
            or ``us-east-1``).
    """

    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    profile: str | None = None
    region: str | None = None

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> S3Location:
        """Build a location from ``s3://bucket/prefix`` plus keyword fields."""
        bucket, prefix = parse_s3_url(url)
        return cls(bucket=bucket, prefix=prefix, **kwargs)

    @property
    def url(self) -> str:
        """``s3://bucket/prefix``."""
        return f"s3://{self.bucket}/{self.prefix}"

    def child(self, prefix: str) -> S3Location:
        """The same endpoint and credentials with another key prefix."""
        return S3Location(
            self.bucket, prefix, self.endpoint_url, self.access_key, self.secret_key, self.profile, self.region
        )

    def describe(self) -> str:
        """A one-line description without secrets, for messages and logs."""
        where = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return f"{self.url}{where}"

    def __repr__(self) -> str:
        return (
            f"S3Location(bucket={self.bucket!r}, prefix={self.prefix!r}, endpoint_url={self.endpoint_url!r}, "
            f"access_key={_mask_key(self.access_key)!r}, secret_key={'***' if self.secret_key else None}, "
            f"profile={self.profile!r}, region={self.region!r})"
        )


# -- clients -------------------------------------------------------------------

_clients: dict[tuple, object] = {}
_clients_lock = threading.Lock()


def _client_key(location: S3Location, pool: int, attempts: int) -> tuple:
    return (
        os.getpid(),
        location.endpoint_url,
        location.access_key,
        hash(location.secret_key),
        location.profile,
        location.region,
        pool,
        attempts,
    )


def s3_client(location: S3Location, *, pool: int = 16, attempts: int = 3, timeout: float = 30.0) -> Any:
    """Return a boto3 S3 client for ``location`` (cached per process and settings).

    boto3 clients are thread-safe, so one client serves a thread pool of up
    to ``pool`` connections. Path-style addressing is used, which every
    S3-compatible server understands.

    Raises:
        S3CredentialsError: The named profile does not exist.
        S3EndpointError: The endpoint URL is malformed.
    """
    from ..outbound import in_server_context

    guarded = in_server_context() and bool(location.endpoint_url)
    if guarded:
        _check_typed_endpoint(location)
    key = (*_client_key(location, pool, attempts), guarded)
    with _clients_lock:
        client = _clients.get(key)
        if client is not None:
            return client
    import boto3
    import botocore.config
    import botocore.exceptions

    try:
        session = boto3.session.Session(profile_name=location.profile) if location.profile else boto3.session.Session()
    except botocore.exceptions.ProfileNotFound as exc:
        raise S3CredentialsError(
            f"AWS profile {location.profile!r} is not in ~/.aws/credentials or ~/.aws/config."
        ) from exc
    region = location.region or session.region_name or DEFAULT_REGION
    config = botocore.config.Config(
        s3={"addressing_style": "path"},
        max_pool_connections=pool,
        connect_timeout=min(timeout, 10.0),
        read_timeout=timeout,
        retries={"total_max_attempts": attempts, "mode": "standard"},
    )
    kwargs = {}
    if location.access_key and not location.secret_key:
        raise S3CredentialsError(
            f"No secret key for access key {_mask_key(location.access_key)} at {location.endpoint_url or 'AWS S3'}: "
            "give the secret key (it is never stored, so a job run again in a new process needs it again), "
            "or leave both keys empty to use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws."
        )
    if location.access_key or location.secret_key:
        kwargs = {"aws_access_key_id": location.access_key, "aws_secret_access_key": location.secret_key}
    try:
        client = session.client(
            "s3", endpoint_url=location.endpoint_url or None, region_name=region, config=config, **kwargs
        )
    except ValueError as exc:
        raise S3EndpointError(f"Invalid S3 endpoint URL {location.endpoint_url!r}: {exc}") from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise explain(exc, location, "connect to") from exc
    if guarded:
        client.meta.events.register("before-send.s3", _refuse_unallowed_destination)
        _guard_connections(client)
    with _clients_lock:
        _clients[key] = client
    return client


def _check_typed_endpoint(location: S3Location) -> None:
    """On the web server: a typed endpoint must be allowed, and gets only the keys typed with it.

    Raises:
        S3EndpointError: The operator did not allow the endpoint's address (``digits serve --allow-url``).
        S3CredentialsError: No access key and secret key were typed (the server's own AWS
            credentials and profiles are never sent to an endpoint a web user typed).
    """
    from ..outbound import OutboundURLError, check_url

    try:
        check_url(location.endpoint_url or "", "s3_endpoint_url")
    except OutboundURLError as exc:
        raise S3EndpointError(str(exc)) from None
    if not (location.access_key and location.secret_key) or location.profile:
        raise S3CredentialsError(
            "s3_accesskey: give the access key and secret key for this endpoint: on the web server, the server's "
            "own AWS credentials and profiles are used only for AWS S3 itself (an empty endpoint URL)."
        )


def _guard_connections(client: Any) -> None:
    """Check the address every socket of ``client`` connects to (DNS rebinding), not only the name checked before.

    botocore offers no public hook for its connection class: its urllib3 session's pool classes are replaced
    (``URLLib3Session._pool_classes_by_scheme``, read when a pool is created). Proxies are not used.
    """
    from botocore.awsrequest import AWSHTTPConnectionPool, AWSHTTPSConnectionPool

    from ..outbound import guarded_pool  # as the other outbound imports here: only a guarded client needs it

    session = client._endpoint.http_session
    pools = {"http": guarded_pool(AWSHTTPConnectionPool), "https": guarded_pool(AWSHTTPSConnectionPool)}
    session._pool_classes_by_scheme = pools
    session._manager.pool_classes_by_scheme = pools
    session._proxy_config = type(session._proxy_config)()  # no proxy: it would hide the real destination
    session._manager.clear()


def _refuse_unallowed_destination(request: Any, **_: Any) -> None:
    """botocore ``before-send`` hook: check each request's destination (redirects included) after DNS resolution."""
    from ..outbound import OutboundURLError, check_destination

    try:
        check_destination(request.url, "s3_endpoint_url")
    except OutboundURLError as exc:
        raise S3EndpointError(str(exc)) from None


def explain(exc: BaseException, location: S3Location, action: str) -> S3Error:
    """Turn a boto3/botocore exception into an :class:`S3Error` naming what is wrong.

    Args:
        exc: The exception boto3 raised.
        location: The location used (for the message; no secrets shown).
        action: What was being done (``"list"``, ``"read s3://b/k"``...).
    """
    import botocore.exceptions as bex

    endpoint = location.endpoint_url or "AWS S3"
    if isinstance(exc, S3Error):
        return exc
    refused = exc.kwargs.get("error") if isinstance(exc, bex.HTTPClientError) else None
    if isinstance(refused, DigitsError):  # the connection guard refused the address it connected to
        return S3EndpointError(f"s3_endpoint_url: {refused}")
    if isinstance(
        exc,
        (
            bex.EndpointConnectionError,
            bex.ConnectTimeoutError,
            bex.ConnectionClosedError,
            bex.ReadTimeoutError,
            bex.ProxyConnectionError,
            bex.SSLError,
        ),
    ):
        return S3EndpointError(
            f"Cannot reach the S3 endpoint {endpoint} to {action}: {exc}. Check the endpoint URL "
            "(DIGITS field s3_endpoint_url, or --endpoint) and that the server is running."
        )
    if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError)):
        return S3CredentialsError(
            f"No S3 credentials to {action} {location.describe()}: fill in the access key and secret key, "
            "or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a profile (AWS_PROFILE)."
        )
    if isinstance(exc, bex.ProfileNotFound):
        return S3CredentialsError(f"AWS profile {location.profile!r} not found ({exc}).")
    if isinstance(exc, bex.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        key = _mask_key(location.access_key)
        if code in ("NoSuchBucket",) or (code == "404" and "bucket" in action):
            return S3BucketNotFoundError(
                f"Bucket {location.bucket!r} does not exist at {endpoint}. Check the bucket name, or create it "
                f"(`digits upload-s3` creates it when uploading)."
            )
        if code in ("InvalidAccessKeyId",):
            return S3CredentialsError(
                f"The S3 server at {endpoint} does not know the access key {key} (InvalidAccessKeyId); "
                "check the access key."
            )
        if code in ("SignatureDoesNotMatch",):
            return S3CredentialsError(
                f"The S3 server at {endpoint} rejected the secret key for access key {key} "
                "(SignatureDoesNotMatch); check the secret key."
            )
        if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidToken", "ExpiredToken") or status == 403:
            return S3CredentialsError(
                f"Access denied to {location.describe()} with access key {key} while trying to {action} "
                f"({code or status}); check the credentials and the bucket's permissions."
            )
        if code in ("InvalidBucketName",):
            return S3BucketNotFoundError(f"{location.bucket!r} is not a valid bucket name.")
        if code in ("NoSuchKey", "404"):
            return S3Error(f"No object for {action} in {location.describe()} (404).")
        return S3Error(
            f"S3 error while trying to {action} {location.describe()}: {code} {error.get('Message', '')}".rstrip()
        )
    if isinstance(exc, bex.BotoCoreError):
        return S3Error(f"S3 error while trying to {action} {location.describe()}: {exc}")
    return S3Error(f"Error while trying to {action} {location.describe()}: {exc}")


def _call(location: S3Location, action: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    import botocore.exceptions as bex

    try:
        return func(*args, **kwargs)
    except (bex.BotoCoreError, bex.ClientError) as exc:
        raise explain(exc, location, action) from exc
