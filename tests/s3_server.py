"""A real S3-compatible server for tests (a pytest plugin of ``tests/conftest.py``): moto's server
mode (``python -m moto.server``) on a free loopback port, one per session (``s3_server``), a fresh
bucket per test (``s3_bucket``, an ``s3://`` URL, with the process's AWS variables pointing at it).

The server enforces credentials (``INITIAL_NO_AUTH_ACTION_COUNT``: after the first three requests,
which create an IAM user, its policy and its access key, every request must be signed with a known
key), so wrong credentials fail as they would on AWS. Without moto (the ``test`` extra's
``moto[server]``) the fixtures skip, or fail under ``REQUIRE_S3_TESTS=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

__all__ = ["S3Server", "s3_bucket", "s3_server"]

_AUTH_FREE_REQUESTS = 3  # create_user, put_user_policy, create_access_key


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the test process dies (even by SIGKILL or a timeout)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class S3Server:
    """A running moto server and the credentials it accepts.

    Example:
        >>> server = S3Server.start()          # doctest: +SKIP
        >>> server.env()["AWS_ENDPOINT_URL"]   # doctest: +SKIP
        'http://127.0.0.1:40123'
    """

    process: subprocess.Popen[bytes]
    endpoint: str
    key: str
    secret: str

    @classmethod
    def start(cls) -> S3Server:
        port = _free_port()
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(_AUTH_FREE_REQUESTS))
        process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # wait for the port to answer
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    raise RuntimeError(f"moto server did not start on {endpoint}") from None
                time.sleep(0.05)
        import boto3

        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="ci")
        iam.put_user_policy(UserName="ci", PolicyName="everything", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="ci")["AccessKey"]
        return cls(process, endpoint, key["AccessKeyId"], key["SecretAccessKey"])

    def env(self, key: str | None = None, secret: str | None = None) -> dict[str, str]:
        """The AWS variables that point boto / s3fs at this server (other credentials if given)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": key or self.key,
                "AWS_SECRET_ACCESS_KEY": secret or self.secret, "AWS_DEFAULT_REGION": "us-east-1"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.key, aws_secret_access_key=self.secret)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _moto_missing() -> bool:
    return any(importlib.util.find_spec(name) is None for name in ("moto", "s3fs", "flask"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    if _moto_missing():
        if os.environ.get("REQUIRE_S3_TESTS") == "1":
            pytest.fail("REQUIRE_S3_TESTS=1 but moto[server] / s3fs are not installed "
                        "(pip install -e '.[test]').")
        pytest.skip("moto[server] and s3fs are not installed: no S3 stand-in to test against "
                    "(pip install -e '.[test]'; REQUIRE_S3_TESTS=1 makes this a failure)")
    server = S3Server.start()
    try:
        yield server
    finally:
        server.stop()


def clear_s3fs_instances() -> None:
    """Forgets s3fs's cached file systems (they keep the credentials they were made with)."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``s3://<fresh bucket>``, with this process's AWS variables pointing at the server."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    clear_s3fs_instances()
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    yield f"s3://{bucket}"
    clear_s3fs_instances()


def list_keys(server: S3Server, url: str) -> list[str]:
    """Every key under an ``s3://bucket/prefix`` URL, sorted (for assertions)."""
    bucket, _, prefix = url[len("s3://"):].partition("/")
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def unfinished_uploads(server: S3Server, url: str) -> list[str]:
    """Keys of multipart uploads started and neither completed nor aborted."""
    bucket = url[len("s3://"):].partition("/")[0]
    return [upload["Key"] for upload in server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])]

