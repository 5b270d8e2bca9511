"""A real S3-compatible server on 127.0.0.1 for tests: moto's standalone server.

Needs the test extra (``moto[server]``). The server (``python -m moto.server``)
runs in its own process and speaks the S3 HTTP API;
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
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class LocalS3:
    """A running local S3 server and valid credentials for it."""

    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    region: str = "us-east-1"

    def location(self, bucket: str, prefix: str = ""):
        """An :class:`~digits_core.sources.S3Location` on this server with valid credentials."""
        from .s3_client import S3Location

        return S3Location(bucket, prefix, self.endpoint, self.access_key, self.secret_key, region=self.region)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _set_auth(endpoint: str, count: str) -> None:
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=count.encode(), method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - local test server
        response.read()


def _wait_ready(endpoint: str, proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=2) as response:  # noqa: S310
                response.read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"moto server at {endpoint} did not start within {timeout:.0f} s")


@contextlib.contextmanager
def local_s3_server(*, authenticate: bool = True, start_timeout: float = 60.0) -> Iterator[LocalS3]:
    """Run moto's S3 server in a child process on 127.0.0.1 (random free port) for the block.

    A separate process keeps the server's CPU and threads away from the code
    under test (which may fork worker processes).

    Args:
        authenticate: Check request signatures against a created IAM user
            (bad credentials are then rejected as AWS would).
        start_timeout: Seconds to wait for the server to answer.
    """
    import boto3

    for attempt in range(3):
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_ready(endpoint, proc, start_timeout)
            break
        except RuntimeError:
            _stop(proc)
            if attempt == 2:
                raise
    try:
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName="digits-test")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="digits-test", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="digits-test")["AccessKey"]
        if authenticate:
            _set_auth(endpoint, "0")
        yield LocalS3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        _stop(proc)


def _stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
