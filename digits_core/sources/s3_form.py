"""The "Use S3" fields of a class-folder data plugin, and the S3 side of its work.

DIGITS's image classification form had a "Use S3" tab: endpoint URL, bucket,
path (a key prefix holding one prefix per class), access key and secret key.
A data plugin gets the same fields by mixing :class:`S3SourceFields` into its
WTForms form, then asks :func:`s3_source` for the listing and the bytes::

    class MyForm(S3SourceFields, Form): ...

    source = s3_source(self)             # None when no S3 field is filled
    by_class = source.class_files("train")   # {"cat": ["s3://bucket/key", ...], ...}
    data = source.read(url)              # in a worker process

The secret key is a ``PasswordField``: the core never writes it to disk
(see :mod:`digits_core.form_secrets`). Leave access key and secret key empty
to use the standard AWS credentials (environment variables, ``AWS_PROFILE``,
``~/.aws``), or name a profile in ``s3_profile``.

Form validation checks the bucket and paths over the network, so a missing
bucket, rejected credentials or an unreachable endpoint fail before the job
is created, with the message on the field at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wtforms import Form, PasswordField, StringField
from wtforms.validators import ValidationError

from .s3 import check_location, list_class_tree, list_prefixes, read_object
from .s3_client import (
    IMAGE_EXTENSIONS,
    S3BucketNotFoundError,
    S3CredentialsError,
    S3EndpointError,
    S3Error,
    S3Location,
    parse_s3_url,
)

#: Stage -> the form field holding its S3 path.
STAGE_FIELDS = {"train": "s3_path", "val": "s3_val_path", "test": "s3_test_path"}
#: Stage -> fields of a host form giving the same stage locally (an S3 path excludes them).
_LOCAL_FIELDS = {
    "train": ("folder", "train_list"),
    "val": ("val_folder", "val_list"),
    "test": ("test_folder", "test_list"),
}


def is_s3_url(path: Any) -> bool:
    """True for an ``s3://bucket/key`` string."""
    return isinstance(path, str) and path.startswith("s3://")


def _get(values: Any, name: str) -> Any:
    if isinstance(values, Mapping):
        value = values.get(name)
    elif isinstance(values, Form):
        field = getattr(values, name, None)
        value = field.data if field is not None else None
    else:
        value = getattr(values, name, None)
    return value.strip() if isinstance(value, str) else value


@dataclass(frozen=True)
class S3ClassSource:
    """Class-folder trees in one bucket: one key prefix per stage.

    Attributes:
        location: Endpoint, bucket and credentials (its prefix is unused).
        paths: Stage (``"train"``, ``"val"``, ``"test"``) -> key prefix.
    """

    location: S3Location
    paths: dict

    def stage_location(self, stage: str) -> S3Location | None:
        """The location of a stage's class tree, or ``None`` when the stage has no S3 path."""
        path = self.paths.get(stage)
        if not path:
            return None
        return self.location.child(path if path.endswith("/") else path + "/")

    def check(self) -> None:
        """Check the endpoint, credentials, bucket and each stage path (a few requests).

        Raises:
            S3EndpointError, S3CredentialsError, S3BucketNotFoundError, S3Error:
                Which one tells what is wrong; the message names it.
        """
        for stage in STAGE_FIELDS:
            location = self.stage_location(stage)
            if location is None:
                continue
            check_location(location)
            if not list_prefixes(location):
                raise _StagePathError(
                    stage,
                    f"No class folders under {location.describe()}: expected keys like "
                    f"{location.prefix}<class>/<image>.",
                )

    def stage_url(self, stage: str) -> str | None:
        """``s3://bucket/prefix/`` of a stage's class tree, or ``None`` when the stage has no S3 path."""
        location = self.stage_location(stage)
        return location.url if location is not None else None

    def class_files(self, stage_or_url: str, *, workers: int = 8) -> dict[str, list[str]] | None:
        """List a class tree in parallel: class name -> ``s3://bucket/key`` URLs (sorted).

        Args:
            stage_or_url: ``"train"``, ``"val"``, ``"test"``, or an ``s3://bucket/prefix/`` URL
                (read with this source's endpoint and credentials).
            workers: Parallel listing requests.

        Returns:
            ``None`` when the stage has no S3 path.
        """
        location: S3Location | None
        if is_s3_url(stage_or_url):
            bucket, prefix = parse_s3_url(stage_or_url)
            location = S3Location(
                bucket,
                prefix if prefix.endswith("/") or not prefix else prefix + "/",
                self.location.endpoint_url,
                self.location.access_key,
                self.location.secret_key,
                self.location.profile,
                self.location.region,
            )
        else:
            location = self.stage_location(stage_or_url)
        if location is None:
            return None
        tree = list_class_tree(location, extensions=IMAGE_EXTENSIONS, workers=workers)
        return {name: [f"s3://{location.bucket}/{o.key}" for o in objects] for name, objects in tree.items()}

    def read(self, url: str) -> bytes:
        """Fetch one object (streamed) by its ``s3://bucket/key`` URL.

        Raises:
            S3Error: The object cannot be read (the message names it).
        """
        bucket, _, key = url[5:].partition("/")
        location = (
            self.location
            if bucket == self.location.bucket
            else S3Location(
                bucket,
                "",
                self.location.endpoint_url,
                self.location.access_key,
                self.location.secret_key,
                self.location.profile,
                self.location.region,
            )
        )
        return read_object(location, key)


class _StagePathError(S3Error):
    def __init__(self, stage: str, message: str):
        self.stage = stage
        super().__init__(message)


def s3_source(values: Any) -> S3ClassSource | None:
    """Build the S3 source from form values, a bound form or a plugin instance.

    Returns:
        ``None`` when no S3 path is filled in.
    """
    paths = {stage: _get(values, name) for stage, name in STAGE_FIELDS.items()}
    paths = {stage: path for stage, path in paths.items() if path}
    if not paths:
        return None
    location = S3Location(
        bucket=_get(values, "s3_bucket") or "",
        endpoint_url=_get(values, "s3_endpoint_url") or None,
        access_key=_get(values, "s3_accesskey") or None,
        secret_key=_get(values, "s3_secretkey") or None,
        profile=_get(values, "s3_profile") or None,
        region=_get(values, "s3_region") or None,
    )
    return S3ClassSource(location, paths)


def typed_endpoint_problem(location: S3Location) -> tuple[str, str] | None:
    """On the web server, ``(field, message)`` for an endpoint the operator did not allow, before any request."""
    from ..outbound import OutboundURLError, check_url, in_server_context

    if not (in_server_context() and location.endpoint_url):
        return None
    try:
        check_url(location.endpoint_url, "s3_endpoint_url")
    except OutboundURLError as exc:
        return "s3_endpoint_url", str(exc).removeprefix("s3_endpoint_url: ")
    if location.profile:
        return "s3_profile", "on the web server, profiles are used only for AWS S3 itself (an empty endpoint URL)"
    if not location.access_key:
        return "s3_accesskey", (
            "give the access key and secret key for this endpoint: the server's own AWS "
            "credentials are used only for AWS S3 itself (an empty endpoint URL)"
        )
    return None


class S3SourceFields(Form):
    """Form mixin: DIGITS's "Use S3" fields, checked against the server when filled in.

    The fields are listed after the host form's own fields. When the host
    form also has ``folder``/``train_list``, ``val_folder``/``val_list`` or
    ``test_folder``/``test_list``, an S3 path for the same stage excludes them.
    """

    s3_endpoint_url = StringField(
        "S3 endpoint URL",
        description="http(s)://host:port of an S3-compatible server; empty for AWS S3 (or AWS_ENDPOINT_URL)",
    )
    s3_bucket = StringField("S3 bucket", description="Bucket holding the images")
    s3_path = StringField(
        "S3 training images path",
        description="Key prefix holding one prefix per class, e.g. mnist/train/ (instead of a training folder)",
    )
    s3_val_path = StringField(
        "S3 validation images path", description="Optional key prefix of validation class folders"
    )
    s3_test_path = StringField("S3 test images path", description="Optional key prefix of test class folders")
    s3_accesskey = StringField(
        "S3 access key",
        description="Empty: AWS_ACCESS_KEY_ID, AWS_PROFILE or ~/.aws/credentials",
    )
    s3_secretkey = PasswordField("S3 secret key", description="Used for this job only, never stored")
    s3_profile = StringField("AWS profile", description="Profile of ~/.aws/credentials to use instead of keys")
    s3_region = StringField("S3 region", description="Signing region (default: AWS_REGION or us-east-1)")

    _s3_checked: tuple | None  # set by _s3_problem for the current validation

    def _s3_problem(self) -> tuple[str, str] | None:
        """Check the S3 settings once per validation: ``(field name, message)`` or ``None``."""
        if getattr(self, "_s3_checked", None) is not None:
            return self._s3_checked or None
        result: tuple[str, str] | tuple = ()
        source = s3_source(self)
        conflict = next(
            (
                stage
                for stage, names in _LOCAL_FIELDS.items()
                if _get(self, STAGE_FIELDS[stage]) and any(_get(self, n) for n in names)
            ),
            None,
        )
        if conflict is not None:
            local = ", ".join(n for n in _LOCAL_FIELDS[conflict] if hasattr(self, n))
            what = {"train": "training", "val": "validation", "test": "test"}[conflict]
            result = (
                STAGE_FIELDS[conflict],
                f"give the {what} images either as an S3 path or locally ({local}), not both",
            )
        elif source is not None:
            if not source.location.bucket:
                result = ("s3_bucket", "give the bucket that holds the S3 paths")
            elif source.location.access_key and not source.location.secret_key:
                result = ("s3_secretkey", "give the secret key of this access key")
            elif (refused := typed_endpoint_problem(source.location)) is not None:
                result = refused
            else:
                try:
                    source.check()
                except _StagePathError as exc:
                    result = (STAGE_FIELDS[exc.stage], str(exc))
                except S3EndpointError as exc:
                    result = ("s3_endpoint_url", str(exc))
                except S3BucketNotFoundError as exc:
                    result = ("s3_bucket", str(exc))
                except S3CredentialsError as exc:
                    field = (
                        "s3_secretkey"
                        if "SignatureDoesNotMatch" in str(exc)
                        else (
                            "s3_profile"
                            if source.location.profile and not source.location.access_key
                            else "s3_accesskey"
                        )
                    )
                    result = (field, str(exc))
                except S3Error as exc:
                    message = str(exc)
                    field = next(
                        (STAGE_FIELDS[s] for s in STAGE_FIELDS if source.paths.get(s) and source.paths[s] in message),
                        "s3_path",
                    )
                    result = (field, message)
        elif _get(self, "s3_bucket"):
            result = ("s3_path", "give the S3 path (key prefix) of the training images in this bucket")
        self._s3_checked = result
        return result or None

    def validate(self, extra_validators=None):
        """Validate as usual; the S3 check runs once per call."""
        self._s3_checked = None
        return super().validate(extra_validators)

    def _s3_raise(self, name: str) -> None:
        problem = self._s3_problem()
        if problem and problem[0] == name:
            raise ValidationError(problem[1])

    def validate_s3_endpoint_url(self, field):
        self._s3_raise(field.name)

    def validate_s3_bucket(self, field):
        self._s3_raise(field.name)

    def validate_s3_path(self, field):
        self._s3_raise(field.name)

    def validate_s3_val_path(self, field):
        self._s3_raise(field.name)

    def validate_s3_test_path(self, field):
        self._s3_raise(field.name)

    def validate_s3_accesskey(self, field):
        self._s3_raise(field.name)

    def validate_s3_secretkey(self, field):
        self._s3_raise(field.name)

    def validate_s3_profile(self, field):
        self._s3_raise(field.name)


def _list_after_plugin_fields(form_class) -> None:
    # WTForms orders fields by creation; these are created when this module is
    # imported (before a plugin's own fields), so move them after the plugin's.
    from wtforms.fields.core import UnboundField

    for value in vars(form_class).values():
        if isinstance(value, UnboundField):
            value.creation_counter += 1_000_000


_list_after_plugin_fields(S3SourceFields)
