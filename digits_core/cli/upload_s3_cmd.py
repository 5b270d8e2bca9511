"""``digits upload-s3 DIR``: upload a class-folder tree to S3 (DIGITS's ``upload_s3_data.py``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``upload-s3`` command."""
    parser = subparsers.add_parser(
        "upload-s3",
        help="upload a folder of class folders to an S3 bucket",
        description=(
            "Upload the image files under DIR to s3://BUCKET/PREFIX/<path relative to DIR>, in parallel, "
            "creating the bucket if missing and skipping objects already there with the same size and MD5. "
            "Options override the values of --config (DIGITS's upload_config.cfg format: section [S3 Config] "
            "with endpoint, accesskey, secretkey, bucket, prefix). Credentials not given come from "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws/credentials."
        ),
    )
    parser.add_argument("folder", metavar="DIR", help="folder to upload (e.g. the output of `digits download`)")
    parser.add_argument("--config", metavar="FILE", help="DIGITS upload_config.cfg to read settings from")
    parser.add_argument("--endpoint", metavar="URL", help="S3 endpoint URL (default: AWS, or AWS_ENDPOINT_URL)")
    parser.add_argument("--bucket", help="bucket name (created if missing)")
    parser.add_argument("--prefix", help="key prefix, e.g. mnist (default: none)")
    parser.add_argument("--access-key", metavar="KEY", help="access key id")
    parser.add_argument(
        "--secret-key",
        metavar="SECRET",
        help="secret key (prefer --config, --profile or AWS_SECRET_ACCESS_KEY: command lines are visible to others)",
    )
    parser.add_argument("--profile", help="AWS profile name from ~/.aws/credentials")
    parser.add_argument("--region", help="signing region (default: AWS_REGION or us-east-1)")
    parser.add_argument("--workers", type=int, default=8, help="parallel uploads (default: 8)")
    parser.add_argument("--all-files", action="store_true", help="upload every file, not only images")
    parser.add_argument(
        "--no-create-bucket",
        dest="create_bucket",
        action="store_false",
        help="fail instead of creating a missing bucket",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Upload and print a summary (no secrets)."""
    from ..errors import ConfigurationError
    from ..sources import IMAGE_EXTENSIONS, S3Location, read_upload_config, upload_tree

    config = read_upload_config(args.config) if args.config else {}

    def pick(option: Any, key: Any) -> Any:
        value = option if option not in (None, "") else config.get(key)
        return value or None

    bucket = pick(args.bucket, "bucket")
    if not bucket:
        raise ConfigurationError("No bucket: give --bucket or a --config file with `bucket = NAME`.")
    location = S3Location(
        bucket=bucket,
        prefix=pick(args.prefix, "prefix") or "",
        endpoint_url=pick(args.endpoint, "endpoint"),
        access_key=pick(args.access_key, "accesskey"),
        secret_key=pick(args.secret_key, "secretkey"),
        profile=args.profile,
        region=args.region,
    )
    if args.workers < 1:
        raise ConfigurationError("--workers must be at least 1.")
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc="upload", unit="file", file=sys.stderr, dynamic_ncols=True)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(done - bar.n)

    try:
        report = upload_tree(
            args.folder,
            location,
            create_bucket=args.create_bucket,
            extensions=None if args.all_files else IMAGE_EXTENSIONS,
            workers=args.workers,
            progress=progress,
        )
    finally:
        if bar is not None:
            bar.close()
    if report.bucket_created:
        print(f"Created bucket {location.bucket}.")
    size_mb = report.bytes_uploaded / 1e6
    print(
        f"Uploaded {len(report.uploaded)} files ({size_mb:.1f} MB) to {location.describe()}; "
        f"{len(report.skipped)} already there."
    )
    return 0
