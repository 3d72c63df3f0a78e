"""A real S3 API server on 127.0.0.1 for tests and the object-storage benchmark (issue 43, items 4 and 5).

moto's server mode (`python -m moto.server`, the `moto[server]` dev dependency; what s3fs's own test suite uses)
runs as a separate process on a free port, with a bucket created, and is stopped after. It speaks the S3 REST API
over HTTP, conditional writes included (`If-None-Match: *`, `If-Match: <etag>` on PutObject), so the code under
test uses the same clients it would against AWS: boto3, pyarrow's S3FileSystem, an fsspec filesystem.

    from tests.s3server import S3Server, s3_server_fixture  # noqa: F401  (the fixture `s3_server`)
    def test_x(s3_server: S3Server): s3_server.client().put_object(Bucket=s3_server.bucket, Key="k", Body=b"")

moto checks a condition and stores the object in two steps, and its server answers requests on threads: two
conditional puts racing for one key could both pass (seen: 2 of 8 racers under load). S3 itself lets exactly one
win, so the server here is moto's application answering one request at a time (`serve`, `python -m tests.s3server`).

`S3Server.start()` is the same server outside pytest (benchmarks/objectstore.py). Where the server cannot
start (moto not installed, no free port, the process exits), the fixture skips with the reason, except under
CI=true, where it fails: CI must run the object-storage tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ServerUnavailable, free_port, unavailable

BUCKET = "tokenledger-test"
# moto accepts any credentials; these are what the clients are given (never real ones).
ACCESS_KEY, SECRET_KEY, REGION = "tokenledger-test-key", "tokenledger-test-secret", "us-east-1"
START_TIMEOUT_S = 30


@dataclass(frozen=True)
class S3Server:
    host: str
    port: int
    bucket: str = BUCKET
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION
    pid: int | None = None  # the server's process, for a test that freezes it (SIGSTOP) as a stalled endpoint

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment a process gives its S3 clients (boto3, pyarrow and s3fs all read these)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region, "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self) -> Any:
        """A boto3 S3 client of the server."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region)

    def arrow_fs(self) -> Any:
        """pyarrow's own S3 filesystem (C++ client) of the server."""
        from pyarrow import fs

        return fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, region=self.region,
                               endpoint_override=f"{self.host}:{self.port}", scheme="http")

    def iam_user(self, name: str, actions: list[str]) -> S3Server:
        """An IAM user allowed `actions` on every resource (three requests: the user, its policy, its key), and the
        server as that user sees it."""
        import boto3

        iam = boto3.client("iam", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                           aws_secret_access_key=self.secret_key, region_name=self.region)
        iam.create_user(UserName=name)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
        iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return replace(self, access_key=key["AccessKeyId"], secret_key=key["SecretAccessKey"])

    def s3fs(self, **kwargs: Any) -> Any:
        """An s3fs filesystem of the server (s3fs is not a project dependency: ImportError where absent)."""
        import s3fs

        return s3fs.S3FileSystem(key=self.access_key, secret=self.secret_key, endpoint_url=self.endpoint,
                                 client_kwargs={"region_name": self.region}, **kwargs)

    @classmethod
    @contextlib.contextmanager
    def start(cls, bucket: str = BUCKET, authorized_after: int | None = None) -> Iterator[S3Server]:
        """Start moto's server on 127.0.0.1 on a free port, create `bucket`, yield the server, stop it after.
        Raises ServerUnavailable where it cannot start.

        `authorized_after`: the server checks every request against its IAM users' policies once it has answered
        that many (moto's INITIAL_NO_AUTH_ACTION_COUNT), the bucket's creation included: the requests before are
        the set-up, creating users and their keys (`iam_user`)."""
        try:
            import boto3  # noqa: F401
            import moto.server  # noqa: F401
        except ImportError as exc:
            raise ServerUnavailable(f"moto's server mode is not installed ({exc})") from exc
        host, port = "127.0.0.1", free_port()
        with tempfile.TemporaryFile() as log:
            process = subprocess.Popen([sys.executable, "-m", "tests.s3server", host, str(port)],
                                       cwd=Path(__file__).resolve().parents[1],
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true",
                                            **({"INITIAL_NO_AUTH_ACTION_COUNT": str(authorized_after)}
                                               if authorized_after is not None else {})})
            try:
                server = cls(host, port, bucket, pid=process.pid)
                _wait_until_up(server, process, log)
                server.client().create_bucket(Bucket=bucket)
                yield server
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGCONT)  # a test that froze it and failed before thawing it
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

def _wait_until_up(server: S3Server, process: subprocess.Popen, log: Any) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            output = log.read().decode(errors="replace")[-2000:]
            raise ServerUnavailable(f"moto's server exited with {process.returncode}: {output}")
        try:
            # moto's own health endpoint; any HTTP answer means it is listening.
            with urllib.request.urlopen(f"{server.endpoint}/moto-api/", timeout=1):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise ServerUnavailable(f"moto's server did not answer on {server.endpoint} within {START_TIMEOUT_S} s")


@pytest.fixture(scope="session", name="s3_server")
def s3_server_fixture() -> Iterator[S3Server]:
    """A real S3 API server on 127.0.0.1 with the bucket `tokenledger-test`, for the whole session."""
    try:
        cm = S3Server.start()
        server = cm.__enter__()
    except ServerUnavailable as exc:
        unavailable(str(exc), "the object-storage tests (moto[server] is in the dev extra)",
                    "pip install -c constraints.txt -e '.[dev]'")
    try:
        yield server
    finally:
        cm.__exit__(None, None, None)


def serve(host: str, port: int) -> None:
    """moto's server (as `python -m moto.server` runs it) answering one request at a time, so that a conditional
    put's check and write are one step, as on S3."""
    import signal
    import threading

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serialized(environ: dict, start_response: Any) -> list[bytes]:
        with one_at_a_time:
            return list(app(environ, start_response))

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run_simple(host, port, serialized, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
