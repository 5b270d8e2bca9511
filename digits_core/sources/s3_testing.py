"""A real S3-compatible server on 127.0.0.1 for tests: moto's standalone server.

Needs the test extra (``moto[server]``). The server speaks the S3 HTTP API;
clients talk to it exactly as to AWS, nothing is patched. With
``authenticate=True`` (the default) the server checks signatures against an
IAM user it creates, so wrong access keys and secret keys are rejected as
AWS would reject them.

Example::

    with local_s3_server() as s3:
        location = S3Location("my-bucket", "mnist/", s3.endpoint, s3.access_key, s3.secret_key)
"""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class LocalS3:
    """A running local S3 server and valid credentials for it."""

    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    region: str = "us-east-1"

    def location(self, bucket: str, prefix: str = ""):
        """An :class:`~digits_core.sources.S3Location` on this server with valid credentials."""
        from .s3 import S3Location

        return S3Location(bucket, prefix, self.endpoint, self.access_key, self.secret_key, region=self.region)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _set_auth(endpoint: str, count: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=count.encode(), method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - local test server
        response.read()


@contextlib.contextmanager
def local_s3_server(*, authenticate: bool = True) -> Iterator[LocalS3]:
    """Run moto's S3 server on 127.0.0.1 (random free port) for the duration of the block.

    moto keeps its data (buckets, users) per process, shared by every server
    started in it: give each test its own bucket names.

    Args:
        authenticate: Check request signatures against a created IAM user
            (bad credentials are then rejected). Note: moto keeps this switch
            in process-global settings; it is restored on exit.
    """
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        user = f"digits-test-{uuid.uuid4().hex[:12]}"  # moto's state is per process, shared by its servers
        iam.create_user(UserName=user)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        if authenticate:
            _set_auth(endpoint, "0")
        try:
            yield LocalS3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
        finally:
            if authenticate:
                _set_auth(endpoint, "inf")
    finally:
        server.stop()
