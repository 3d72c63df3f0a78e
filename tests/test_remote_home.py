"""A home on object storage (TOKENLEDGER_HOME=s3://bucket/prefix, tokenledger/storage/remote.py) against a real S3 API
server on 127.0.0.1 (moto's server mode, tests/s3server.py).

A 3-day home is generated into the bucket and run there; the same days generated into a local folder and run there
are the reference. What the bucket publishes must equal it row for row, read back through the bucket with DuckDB
and pandas; another work folder (another machine) must read the same through `tokenledger sql`; a run killed
before its commit must leave the bucket's published state byte for byte as it was; two overlapping backfills at
once must publish each day whole, from one run; a bucket that cannot be reached or does not exist must end the
command in one line. These tests run pipelines and start servers: `make test-distributed`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tests.s3server import S3Server, s3_server_fixture  # noqa: F401  (the fixture `s3_server`)
from tokenledger.catalog import PUBLISHED_TABLES, WHOLE_TABLES
from tokenledger.storage.remote import arrow_filesystem

pytestmark = pytest.mark.distributed

START, MIDDLE, END = "2026-11-02", "2026-11-03", "2026-11-04"
GENERATE = ("--start", START, "--days", "3", "--requests-per-day", "300", "--seed", "3", "--bad-rows-per-day", "0",
            "--canonical-only")
TABLES = (*PUBLISHED_TABLES, *WHOLE_TABLES)


def tokenledger(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenledger.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


def rows(con: duckdb.DuckDBPyConnection, root: str) -> dict[str, list[tuple]]:
    """Every published table under `root` (a local exports/ folder), in one order."""
    out = {}
    for ref in TABLES:
        files = f"{root}/{ref.schema}/{ref.name}/**/*.parquet"
        if con.execute("SELECT count(*) FROM glob($f)", {"f": files}).fetchone()[0]:
            out[ref.qualified] = con.execute(f"SELECT * FROM read_parquet('{files}', hive_partitioning = false) "
                                             "ORDER BY ALL").fetchall()
    return out


def bucket_rows(con: duckdb.DuckDBPyConnection, exports: str) -> dict[str, list[tuple]]:
    """The same through the bucket (`exports`, s3://.../exports): DuckDB over each table's folder as a pyarrow
    dataset, which reads the bucket (DuckDB's httpfs is not installable:
    docs/adr/0041-a-home-in-a-bucket-is-worked-on-in-a-local-copy.md)."""
    import pyarrow.dataset as ds
    from pyarrow import fs

    bucket, _, prefix = exports.removeprefix("s3://").partition("/")
    s3 = arrow_filesystem()
    out = {}
    for ref in TABLES:
        folder = f"{bucket}/{prefix}/{ref.schema}/{ref.name}"
        if s3.get_file_info(folder).type == fs.FileType.Directory:
            # No partitioning: the files' own columns, as `rows` reads them.
            con.register("exported", ds.dataset(folder, filesystem=s3, format="parquet"))
            out[ref.qualified] = con.execute("SELECT * FROM exported ORDER BY ALL").fetchall()
            con.unregister("exported")
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The same days generated into a local home and run there: its tables, and the home under "home"."""
    home = tmp_path_factory.mktemp("local") / "home"
    assert tokenledger("generate", "--home", str(home), *GENERATE).returncode == 0
    done = tokenledger("run", "--home", str(home), "--start", START, "--end", END)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect() as con:
        return {**rows(con, str(home / "exports")), "home": str(home)}


class Bucket:
    """A home under its own prefix of the test server's bucket, and the environment its processes get."""

    def __init__(self, server: S3Server, work: Path) -> None:
        self.server = server
        self.prefix = f"homes/{uuid.uuid4().hex[:8]}"
        self.url = f"s3://{server.bucket}/{self.prefix}"
        self.work = work
        self.env = {**server.env(), "TOKENLEDGER_WORK_DIR": str(work / "first")}

    def run(self, *args: str, work: str = "first", **env: str) -> subprocess.CompletedProcess:
        return tokenledger(*args, env={**self.env, "TOKENLEDGER_WORK_DIR": str(self.work / work), **env})

    def get(self, relative: str) -> tuple[bytes, str]:
        got = self.server.client().get_object(Bucket=self.server.bucket, Key=f"{self.prefix}/{relative}")
        return got["Body"].read(), got["ETag"]

    def listing(self, relative: str) -> dict[str, str]:
        """Key (relative to the home) -> ETag of every object under `relative`."""
        pages = self.server.client().get_paginator("list_objects_v2").paginate(
            Bucket=self.server.bucket, Prefix=f"{self.prefix}/{relative}")
        return {o["Key"][len(self.prefix) + 1:]: o["ETag"] for p in pages for o in p.get("Contents", [])}

    def manifest(self) -> dict:
        return json.loads(self.get(".published/current.json")[0])

    def published(self) -> dict[str, list[tuple]]:
        with duckdb.connect() as con, pytest.MonkeyPatch.context() as env:
            for name, value in self.server.env().items():
                env.setenv(name, value)
            return bucket_rows(con, f"{self.url}/exports")


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Bucket:  # noqa: F811
    """The 3 days generated into the bucket and run there, once for the module."""
    home = Bucket(s3_server, tmp_path_factory.mktemp("work"))
    generated = home.run("generate", "--home", home.url, *GENERATE)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert f"to {home.url} (raw/, config/)" in generated.stdout
    done = home.run("run", "--home", home.url, "--start", START, "--end", END)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Published to {home.url}/exports " in done.stdout
    return home


def test_the_bucket_publishes_what_a_local_home_publishes(bucket: Bucket, reference: dict) -> None:
    published = bucket.published()  # DuckDB reading the bucket's exports/ through pyarrow's S3 datasets
    assert {"finance.cost_per_mtok_daily", "infra.slo_daily", "infra.capacity_trend"} <= set(published)
    assert published == {k: v for k, v in reference.items() if k != "home"}
    # pandas reads the same folder through pyarrow's S3 filesystem (no s3fs needed).
    with pytest.MonkeyPatch.context() as env:
        for name, value in bucket.server.env().items():
            env.setenv(name, value)
        slo = pd.read_parquet(f"{bucket.url}/exports/infra/slo_daily")
    assert len(slo) == len(reference["infra.slo_daily"])
    assert sorted(slo["day"].astype(str).unique()) == [START, MIDDLE, END]
    # The manifest names every published file under a key of its commit, with its checksum; the lake and the
    # reviews are in the bucket too.
    manifest = bucket.manifest()
    assert manifest["version"] == 2  # the days, then the trend
    entry = manifest["files"][f"exports/infra/slo_daily/day={MIDDLE}/data.parquet"]
    assert re.fullmatch(r"\.published/objects/\d{8}T\d{6}Z-[0-9a-f]{12}/exports/infra/slo_daily/day=2026-11-03/"
                        r"data\.parquet", entry["key"])
    # Nothing lost: every source of every day, and every day's cost, reconciles (4 sources a day: gateway, billing,
    # deployments and the generated GPU telemetry; 1 currency).
    with pytest.MonkeyPatch.context() as env:
        for name, value in bucket.server.env().items():
            env.setenv(name, value)
        for table, rows_a_day in (("quality/ingest_reconciliation_daily", 4), ("finance/cost_reconciliation_daily", 1)):
            balanced = pd.read_parquet(f"{bucket.url}/exports/{table}")["balanced"]
            assert len(balanced) == 3 * rows_a_day and balanced.all(), table
    assert f"lake/core/gateway_requests/day={END}/data.parquet" in bucket.listing("lake/")
    assert f"reports/capacity-review-{START}.html" in bucket.listing("reports/")


QUERY = ("SELECT (SELECT count(*) FROM infra.slo_daily) AS slo, (SELECT count(*) FROM core.gateway_requests) AS "
         "requests, (SELECT count(DISTINCT day) FROM core.gateway_requests) AS days, (SELECT sum(allocated_cost) FROM "
         "finance.cost_reconciliation_daily) AS allocated")


def test_another_work_folder_reads_the_published_days_through_the_bucket(bucket: Bucket, reference: dict) -> None:
    # A work folder that never ran anything (another machine): the exports are pulled, the core views read the
    # request-level tables in the bucket.
    elsewhere = bucket.run("sql", "--home", bucket.url, QUERY, work="elsewhere")
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    local = tokenledger("sql", "--home", reference["home"], QUERY)
    assert local.returncode == 0, local.stdout + local.stderr
    assert elsewhere.stdout == local.stdout
    assert re.search(r"│\s+\d+\s+│\s+[1-9]\d*\s+│\s+3\s+│", elsewhere.stdout), elsewhere.stdout


@pytest.mark.parametrize("point", ["publish:linking", "publish:before-switch"])
def test_a_run_killed_before_its_commit_leaves_the_bucket_as_it_was(bucket: Bucket, reference: dict,
                                                                    point: str) -> None:
    before = bucket.get(".published/current.json")
    plain = bucket.listing("exports/") | bucket.listing("reports/")
    killed = bucket.run("run", "--home", bucket.url, "--start", END, TOKENLEDGER_FAILPOINT=point)
    assert killed.returncode == -9, killed.stdout + killed.stderr  # SIGKILL: no cleanup, no message
    # Its uploads sit under a commit no manifest names: the manifest and every file readers list are as they were.
    assert bucket.get(".published/current.json") == before
    assert bucket.listing("exports/") | bucket.listing("reports/") == plain
    # The next run of the day publishes it again: the same rows (re-running a day replaces it whole).
    again = bucket.run("run", "--home", bucket.url, "--start", END)
    assert again.returncode == 0, again.stdout + again.stderr
    assert bucket.manifest()["version"] == json.loads(before[0])["version"] + 2
    assert bucket.published() == {k: v for k, v in reference.items() if k != "home"}


def test_overlapping_backfills_at_once_publish_each_day_whole_from_one_run(s3_server: S3Server,  # noqa: F811
                                                                          tmp_path: Path, reference: dict) -> None:
    home = Bucket(s3_server, tmp_path)
    assert home.run("generate", "--home", home.url, *GENERATE).returncode == 0
    # Two work folders (two machines) back-filling overlapping ranges at the same time: 11-03 is run by both.
    runs = [subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "run", "--home", home.url, "--start", first,
                              "--end", last], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, **home.env, "TOKENLEDGER_WORK_DIR": str(tmp_path / name)})
            for name, first, last in (("a", START, MIDDLE), ("b", MIDDLE, END))]
    for process in runs:
        out, _ = process.communicate(timeout=600)
        assert process.returncode == 0, out
    manifest = home.manifest()
    assert manifest["version"] == 4  # each run: its days, then the trend
    commits: dict[str, set[str]] = defaultdict(set)
    for relative, entry in manifest["files"].items():
        if day := re.search(r"day=(\d{4}-\d{2}-\d{2})", relative):
            commits[day.group(1)].add(entry["key"].split("/")[2])
    # Every file of a day (its tables, its manifest, its core tables) comes from one commit: one run's whole day.
    assert {day: len(found) for day, found in commits.items()} == {START: 1, MIDDLE: 1, END: 1}
    assert home.published() == {k: v for k, v in reference.items() if k != "home"}


def test_a_bucket_that_does_not_answer_or_exist_ends_the_run_in_one_line(s3_server: S3Server,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    home = Bucket(s3_server, tmp_path)
    missing = home.run("run", "--home", f"s3://no-such-bucket-{uuid.uuid4().hex[:6]}/x", "--start", START)
    assert missing.returncode == 2 and missing.stdout == ""
    assert re.fullmatch(r"error: the object store refused listing s3://no-such-bucket-\w+/x/config/ \(NoSuchBucket, "
                        r"HTTP 404: The specified bucket does not exist\): the bucket does not exist: create it or "
                        r"correct TOKENLEDGER_HOME\. Nothing half-written was published; re-run once it is fixed\.\n",
                        missing.stderr), missing.stderr
    with socket_closed() as port:
        gone = home.run("run", "--home", home.url, "--start", START, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    assert gone.returncode == 2 and gone.stdout == ""
    assert gone.stderr.startswith(f"error: cannot reach the object store at http://127.0.0.1:{port} while listing "
                                  f"{home.url}/config/ ("), (
        gone.stderr)
    assert gone.stderr.endswith("check AWS_ENDPOINT_URL, the network and the credentials; nothing half-written was "
                                "published, re-run once it answers.\n")
    assert len(gone.stderr.splitlines()) == 1


class socket_closed:  # noqa: N801  (a context manager used as a phrase)
    """A port on 127.0.0.1 that nothing listens on, for as long as the block runs."""

    def __enter__(self) -> int:
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        return self.socket.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.socket.close()


def test_a_bucket_that_refuses_writes_fails_the_day_in_one_line_and_publishes_nothing(tmp_path: Path) -> None:
    # A server of its own that checks every request against its users' policies once the set-up is done (the
    # bucket, then two users of three requests each): the landing zone is written by one allowed everything, the
    # run by one that may only read.
    with S3Server.start(authorized_after=7) as server:
        writer = server.iam_user("lander", ["*"])
        reader = server.iam_user("runner", ["s3:Get*", "s3:List*", "s3:Head*"])
        home = Bucket(writer, tmp_path)
        assert home.run("generate", "--home", home.url, *GENERATE).returncode == 0
        done = tokenledger("run", "--home", home.url, "--start", START,
                           env={**reader.env(), "TOKENLEDGER_WORK_DIR": str(tmp_path / "reader")})
        assert done.returncode == 1, done.stdout + done.stderr
        failure = re.search(r"^2026-11-02  FAILED\n((?:    .*\n)+)", done.stdout, re.M)
        assert failure, done.stdout
        message = failure.group(1).strip()
        assert message.startswith(f"publish/exports: the object store refused writing {home.url}/.published/objects/")
        assert message.endswith("(AccessDenied, HTTP 403: Access Denied): the credentials may not do this: check "
                                "AWS_ACCESS_KEY_ID / AWS_PROFILE and the bucket's policy. Nothing half-written was "
                                "published; re-run once it is fixed.")
        assert len(message.splitlines()) == 1
        assert home.listing(".published/current.json") == {}  # nothing published
        assert "Nothing of 2026-11-02 is published" in done.stdout


def test_the_late_data_sensor_sees_a_file_landed_late_in_the_bucket(bucket: Bucket,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from datetime import date

    import dagster as dg
    from tokenledger.pipelines.resources import LedgerResource
    from tokenledger.pipelines.sensors import late_days

    for name, value in bucket.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(bucket.work / "first" / ".dagster"))  # the run's instance
    ledger = LedgerResource(home=bucket.url)
    today = date(2026, 11, 20)
    with dg.DagsterInstance.get() as instance:
        assert late_days(instance, ledger, today) == {}  # every landed file is older than its day's last run
        time.sleep(1.1)  # the bucket's times are whole seconds
        key = f"{bucket.prefix}/raw/gateway/dt={MIDDLE}/late.jsonl"
        bucket.server.client().put_object(Bucket=bucket.server.bucket, Key=key, Body=b"{}\n")
        try:
            late = late_days(instance, ledger, today)
        finally:
            bucket.server.client().delete_object(Bucket=bucket.server.bucket, Key=key)
    assert list(late) == [date(2026, 11, 3)]
    assert late[date(2026, 11, 3)] > time.time() - 60


def test_a_stalled_object_store_fails_the_run_within_its_timeout_in_one_line(s3_server: S3Server,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    """The server frozen (SIGSTOP: it accepts connections and never answers, as a hung one does) before the run: the
    command ends within TOKENLEDGER_S3_TIMEOUT_S (and boto3's backoff), in one line naming the endpoint and the
    request, instead of waiting forever."""
    import signal
    import time

    home = Bucket(s3_server, tmp_path)
    assert s3_server.pid
    os.kill(s3_server.pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        stalled = home.run("run", "--home", home.url, "--start", START, TOKENLEDGER_S3_TIMEOUT_S="2")
        took = time.monotonic() - began
    finally:
        os.kill(s3_server.pid, signal.SIGCONT)
    assert (stalled.returncode, stalled.stdout) == (2, ""), stalled.stdout + stalled.stderr
    assert stalled.stderr == (f"error: the object store at {s3_server.endpoint} did not answer within 2 s while "
                              f"listing {home.url}/config/: check that it is up and reachable from this machine "
                              "(AWS_ENDPOINT_URL), then re-run; nothing half-written was published "
                              "(TOKENLEDGER_S3_TIMEOUT_S sets how long a request may wait)\n")
    assert took < 2 + 30, took  # the command's own start (Dagster's imports) included
