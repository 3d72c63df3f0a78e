"""A stalled object store fails a request within TOKENLEDGER_S3_TIMEOUT_S, in one line naming the endpoint and what
was being read or written (tokenledger/storage/remote.py, `RemoteHome.talking`), instead of waiting forever.

The endpoint is a real S3 API server (tests/s3server.py) frozen with SIGSTOP: its kernel still accepts connections,
nothing answers them, as a hung server or a black-holed route does. It is thawed (SIGCONT) after.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.s3server import S3Server
from tests.servers import ServerUnavailable, unavailable
from tokenledger.errors import ConfigError, EnvironmentProblem
from tokenledger.storage.remote import TIMEOUT_ENV, TIMEOUT_S, RemoteHome, request_timeout_s

TIMEOUT = 1.5
# Past the timeout: boto3's backoff between its 3 attempts (at most 1 s, then 2 s), a write's wait of 1 s per attempt
# for the server's "100 Continue" before it sends the body, and a busy host.
MARGIN_S = 9


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    """A server of this module's own: freezing the session's would stall every other test using it."""
    try:
        cm = S3Server.start()
        started = cm.__enter__()
    except ServerUnavailable as exc:
        unavailable(str(exc), "the object-storage tests (moto[server] is in the dev extra)",
                    "pip install -c constraints.txt -e '.[dev]'")
    try:
        yield started
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture()
def home(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> RemoteHome:
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(TIMEOUT_ENV, str(TIMEOUT))
    home = RemoteHome.parse(f"s3://{server.bucket}/stalled")
    home.put("config/x.yaml", b"a: 1\n")
    return home


@contextmanager
def frozen(server: S3Server) -> Iterator[None]:
    assert server.pid
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


def failure_of(action) -> tuple[str, float]:
    began = time.monotonic()
    with pytest.raises(EnvironmentProblem) as raised:
        action()
    return str(raised.value), time.monotonic() - began


@pytest.mark.parametrize("doing", ["reading", "writing", "downloading", "listing"])
def test_a_stalled_object_store_fails_the_request_within_the_timeout_naming_it(
        home: RemoteHome, server: S3Server, tmp_path: Path, doing: str) -> None:
    action, said, relative = {
        "reading": (lambda: home.get("config/x.yaml"), "reading", "config/x.yaml"),
        "writing": (lambda: home.put("config/y.yaml", b"b: 2\n"), "writing", "config/y.yaml"),
        # download_file: boto3's transfer, whose own retries of a broken download are off
        "downloading": (lambda: home.download("config/x.yaml", tmp_path / "x.yaml"), "reading", "config/x.yaml"),
        "listing": (lambda: home.list("config/"), "listing", "config/"),
    }[doing]
    with frozen(server):
        message, took = failure_of(action)
    assert message == (f"the object store at {server.endpoint} did not answer within {TIMEOUT:g} s while {said} "
                       f"s3://{server.bucket}/stalled/{relative}: check that it is up and reachable from this machine "
                       "(AWS_ENDPOINT_URL), then re-run; nothing half-written was published (TOKENLEDGER_S3_TIMEOUT_S "
                       "sets how long a request may wait)")
    assert TIMEOUT * 0.9 < took < TIMEOUT + MARGIN_S, took
    assert not (tmp_path / "x.yaml").exists()
    # Thawed, the same home answers again.
    assert home.get("config/x.yaml")[0] == b"a: 1\n"


def test_the_timeout_is_read_from_the_environment() -> None:
    assert request_timeout_s({}) == TIMEOUT_S == 30
    assert request_timeout_s({TIMEOUT_ENV: " 2.5 "}) == 2.5
    for wrong in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(ConfigError, match=re.escape(f"{TIMEOUT_ENV}={wrong!r} is not a number of seconds")):
            request_timeout_s({TIMEOUT_ENV: wrong})


def test_pyarrows_filesystem_of_a_bucket_home_gives_up_within_the_timeout_too(home: RemoteHome,
                                                                             server: S3Server) -> None:
    """What reads the published exports through the bucket (DuckDB or pandas over pyarrow) waits as boto3 does."""
    from tokenledger.storage.remote import arrow_filesystem

    s3 = arrow_filesystem()
    with frozen(server):
        began = time.monotonic()
        with pytest.raises(OSError):
            s3.get_file_info(f"{server.bucket}/stalled/config/x.yaml")
        took = time.monotonic() - began
    assert took < TIMEOUT + MARGIN_S, took
