"""The production combination, against real servers on 127.0.0.1: a home in an S3 bucket (moto's server), the
Postgres instance (a private cluster) and Celery workers on Redis, each worker and each command with a work folder of
its own, as on separate machines.

A 6-day backfill with `--parallel 2` publishes, in the bucket, the tables a local in-process run of the same days
publishes, row for row. Then two commands from two work folders back-fill overlapping ranges at the same time: one
daemon alive at any look, each day run and committed once, both commands exiting 0 and saying for each of their
days whose run published it. These start servers, daemons and workers: `make test-distributed`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest
from tokenledger.pipelines.executors import BROKER_ENV, EXECUTOR_ENV
from tokenledger.pipelines.instance import POSTGRES_URL_ENV

from tests.daemons import watch_daemons
from tests.redisserver import RedisServer, redis_server_fixture  # noqa: F401  (the fixture `redis_server`)
from tests.s3server import S3Server, s3_server_fixture  # noqa: F401  (the fixture `s3_server`)
from tests.test_celery import celery_workers
from tests.test_instance_postgres import Server, database, postgres  # noqa: F401  (the fixture `postgres`)
from tests.test_remote_home import Bucket, rows

pytestmark = pytest.mark.distributed

START, END = "2026-11-02", "2026-11-07"
DAYS = [f"2026-11-0{d}" for d in range(2, 8)]
GENERATE = ("--start", START, "--days", "6", "--requests-per-day", "100", "--seed", "3", "--bad-rows-per-day", "0",
            "--canonical-only")


def tokenledger(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenledger.cli", *args], capture_output=True, text=True,
                          timeout=900, env={**os.environ, **env})


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The same days generated into a local home and run there in one process: its tables."""
    home = tmp_path_factory.mktemp("local") / "home"
    env = {"TOKENLEDGER_HOME": str(home)}
    assert tokenledger("generate", "--home", str(home), *GENERATE, env=env).returncode == 0
    done = tokenledger("run", "--home", str(home), "--start", START, "--end", END, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect() as con:
        return rows(con, str(home / "exports"))


def commits_per_day(home: Bucket) -> dict[str, int]:
    """How many commits uploaded files of each day (every upload stays under .published/objects/<commit>/ for a
    day, referenced or not)."""
    commits: dict[str, set[str]] = defaultdict(set)
    for relative in home.listing(".published/objects/"):
        if day := re.search(r"day=(\d{4}-\d{2}-\d{2})/", relative):
            commits[day.group(1)].add(relative.split("/")[2])
    return {day: len(found) for day, found in sorted(commits.items())}


def test_celery_workers_a_bucket_and_postgres_publish_what_one_process_does_and_overlapping_commands_run_each_day_once(
        s3_server: S3Server, redis_server: RedisServer, postgres: Server, tmp_path: Path,  # noqa: F811
        reference: dict) -> None:
    with database(postgres) as url:
        home = Bucket(s3_server, tmp_path)
        shared = {**s3_server.env(), POSTGRES_URL_ENV: url, EXECUTOR_ENV: "celery", BROKER_ENV: redis_server.url(),
                  "TOKENLEDGER_HOME": home.url}

        def on(machine: str) -> dict[str, str]:
            return {**shared, "TOKENLEDGER_WORK_DIR": str(tmp_path / machine)}

        assert tokenledger("generate", "--home", home.url, *GENERATE, env=on("admin")).returncode == 0
        workers_env = {**on("worker-a"), "DAGSTER_HOME": str(tmp_path / "worker-a" / ".dagster")}
        with celery_workers(workers_env, tmp_path / "logs", names=("tokenledger-a",)), \
                celery_workers({**on("worker-b"), "DAGSTER_HOME": str(tmp_path / "worker-b" / ".dagster")},
                               tmp_path / "logs", names=("tokenledger-b",)):
            done = tokenledger("run", "--home", home.url, "--start", START, "--end", END, "--parallel", "2",
                               env=on("host-1"))
            assert done.returncode == 0, done.stdout + done.stderr
            for day in DAYS:
                assert re.search(rf"^{day}  published$", done.stdout, re.M), done.stdout
            assert home.published() == reference
            assert commits_per_day(home) == dict.fromkeys(DAYS, 1)

            # Two commands from two machines, over 11-02...11-05 and 11-04...11-07 at once.
            machines = ("host-1", "host-2")
            commands = [
                subprocess.Popen(
                    [sys.executable, "-m", "tokenledger.cli", "run", "--home", home.url, "--start", first, "--end",
                     last, "--parallel", "2", "--days-per-run", "1"], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, env={**os.environ, **on(machine)})
                for machine, first, last in zip(machines, (START, "2026-11-04"), ("2026-11-05", END), strict=True)]
            said, seen = watch_daemons(tmp_path, commands)
            outputs = dict(zip(machines, said, strict=True))
        for machine, out in outputs.items():  # kept beside the work folders, for reading after a failure
            (tmp_path / f"{machine}.out").write_text(out)
        assert max(seen) == 1, (seen, outputs)
        assert [c.returncode for c in commands] == [0, 0], outputs
        # Each day of both ranges run once more (one run a day), committed once more.
        assert commits_per_day(home) == dict.fromkeys(DAYS, 2)
        submitted = {m: set(re.findall(r"^(\S+)  submitted as run", out, re.M)) for m, out in outputs.items()}
        assert submitted["host-1"] | submitted["host-2"] == set(DAYS)
        assert not submitted["host-1"] & submitted["host-2"]
        for machine, days in (("host-1", DAYS[:4]), ("host-2", DAYS[2:])):
            for day in days:
                line = re.search(rf"^{day}  published( \(by run [0-9a-f]{{8}}, another command's\))?$",
                                 outputs[machine], re.M)
                assert line, outputs[machine]
                assert (line.group(1) is None) == (day in submitted[machine]), outputs[machine]
            assert f"Published to {home.url}/exports" in outputs[machine]
        assert home.published() == reference
        assert {"finance.cost_per_mtok_daily", "infra.capacity_plan_daily", "infra.capacity_trend"} <= {
            table for table, found in reference.items() if found}
