"""A real Redis server on 127.0.0.1 for tests: the Celery broker of tests/test_celery.py.

Debian's `redis-server` (apt-get install redis-server) runs as a separate process on a free port, in a temporary
folder of its own, without persistence (no RDB snapshots, no append-only file) and with a password, so the clients
under test log in as they would against a deployment's broker. It is stopped after.

    from tests.redisserver import RedisServer, redis_server_fixture  # noqa: F401  (the fixture `redis_server`)
    def test_x(redis_server: RedisServer): redis_server.url()  # redis://:PASSWORD@127.0.0.1:PORT/0

`RedisServer.start()` is the same server outside the fixture, for a test that stops its broker. Where the server
cannot start (no redis-server, the process exits), the fixture skips with the reason, except under CI=true, where it
fails: CI must run the Celery tests (.ci/run installs redis-server).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import ServerUnavailable, free_port, unavailable

PASSWORD = "s3cret-redis-Pa55"
START_TIMEOUT_S = 20


@dataclass(frozen=True)
class RedisServer:
    host: str
    port: int
    password: str = PASSWORD

    def url(self, db: int = 0) -> str:
        return f"redis://:{self.password}@{self.host}:{self.port}/{db}"

    @classmethod
    @contextlib.contextmanager
    def start(cls) -> Iterator[RedisServer]:
        """Start redis-server on 127.0.0.1 on a free port, yield it once it answers PING, stop it after. Raises
        ServerUnavailable where it cannot start."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerUnavailable("redis-server is not installed")
        try:
            import redis  # noqa: F401
        except ImportError as exc:
            raise ServerUnavailable(f"the redis client (the celery extra) is not installed ({exc})") from exc
        server = cls("127.0.0.1", free_port())
        with tempfile.TemporaryDirectory(prefix="tokenledger-redis-") as folder:
            log = Path(folder) / "redis.log"
            process = subprocess.Popen(
                [binary, "--bind", server.host, "--port", str(server.port), "--dir", folder, "--logfile", str(log),
                 "--save", "", "--appendonly", "no", "--requirepass", server.password, "--daemonize", "no"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=folder)
            try:
                _wait_until_up(server, process, log)
                yield server
            finally:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _wait_until_up(server: RedisServer, process: subprocess.Popen, log: Path) -> None:
    import redis

    client = redis.Redis(host=server.host, port=server.port, password=server.password, socket_connect_timeout=1)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                said = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise ServerUnavailable(f"redis-server exited with {process.returncode}: {said}")
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    return
            time.sleep(0.1)
    finally:
        client.close()
    raise ServerUnavailable(f"redis-server did not answer on {server.host}:{server.port} within {START_TIMEOUT_S} s")


@pytest.fixture(scope="module", name="redis_server")
def redis_server_fixture() -> Iterator[RedisServer]:
    """A real Redis server on 127.0.0.1 with a password, for the module's tests."""
    try:
        cm = RedisServer.start()
        server = cm.__enter__()
    except ServerUnavailable as exc:
        unavailable(str(exc), "the Celery tests", "apt-get install redis-server")
    try:
        yield server
    finally:
        cm.__exit__(None, None, None)
