"""Dataset sources other than local folders: S3 and S3-compatible object stores.

See :mod:`digits_core.sources.s3` (locations, checks, parallel listing and
streamed fetching), :mod:`digits_core.sources.s3_upload` (``digits upload-s3``)
and :mod:`digits_core.sources.s3_form` (the "Use S3" form fields a data
plugin adds). boto3 is imported only when S3 is used.
"""

from __future__ import annotations

from .s3 import (
    S3Object,
    check_location,
    download_prefix,
    iter_objects,
    list_class_tree,
    list_objects,
    list_prefixes,
    read_object,
)
from .s3_client import (
    IMAGE_EXTENSIONS,
    S3BucketNotFoundError,
    S3CredentialsError,
    S3EndpointError,
    S3Error,
    S3Location,
    parse_s3_url,
)
from .s3_upload import UploadReport, read_upload_config, upload_tree

__all__ = [
    "IMAGE_EXTENSIONS",
    "S3Error",
    "S3EndpointError",
    "S3BucketNotFoundError",
    "S3CredentialsError",
    "S3Location",
    "S3Object",
    "check_location",
    "download_prefix",
    "iter_objects",
    "list_class_tree",
    "list_objects",
    "list_prefixes",
    "parse_s3_url",
    "read_object",
    "UploadReport",
    "read_upload_config",
    "upload_tree",
]
