"""What the tests' real servers (PostgreSQL, Redis, an S3 API) share: a free port on 127.0.0.1, and what a test does
when its server cannot start here: skip, saying why and what to install, except under CI=true, where it fails, for
CI must run every one of them (.ci/run installs the servers)."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


class ServerUnavailable(RuntimeError):
    """A server could not be started here (the message says why)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unavailable(reason: str, tests: str, install: str) -> NoReturn:
    """Skip (fail under CI=true) the `tests` that need a server which could not start for `reason`."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run {tests} (.ci/run installs what they need)")
    pytest.skip(f"{reason} ({install} to run them)")
