"""`tokenledger run --parallel N`: runs submitted to the home's Dagster instance, dequeued by its daemon and launched
by its run launcher (pipelines/submitted.py), instead of executed in the command's process.

A generated 4-day home is run in process and, on a copy, with --parallel 2: two ranged runs of two days each, each
in a run worker process of its own, publishing the same tables row for row. A day whose logs are missing fails its
ranged run, whose days are then submitted one run each: the good day of that range is published, the bad one
named; `--idle` (carried to the submitted runs in their run config) publishes it. These tests start real Dagster
daemons and run workers, so they run in `make test-distributed` (a step of .ci/run), not in `make test`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tests.daemons import watch_daemons
from tokenledger.catalog import PUBLISHED_TABLES, WHOLE_TABLES

pytestmark = pytest.mark.distributed

START, END = "2026-11-02", "2026-11-05"


def tokenledger(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenledger.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("parallel") / "home"
    done = tokenledger("generate", "--home", str(home), "--start", START, "--days", "4", "--requests-per-day", "300",
                       "--seed", "3", "--bad-rows-per-day", "0", "--canonical-only")
    assert done.returncode == 0, done.stderr
    return home


def copy_of(generated: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(generated, target, ignore=shutil.ignore_patterns(".dagster"))
    return target


def published(home: Path) -> dict[str, list[tuple]]:
    """Every published table's rows (the day tables and the two kept whole), in one order."""
    out = {}
    with duckdb.connect() as con:
        for ref in (*PUBLISHED_TABLES, *WHOLE_TABLES):
            folder = home / "exports" / ref.schema / ref.name
            if folder.is_dir():
                out[ref.qualified] = con.execute(
                    f"SELECT * FROM read_parquet('{folder}/**/*.parquet', hive_partitioning = false) ORDER BY ALL"
                ).fetchall()
    return out


def runs_of(home: Path) -> list[dict]:
    """The home's Dagster runs: their days, status and the process each ran in (from its own event log)."""
    script = (
        "import json, re, warnings; warnings.filterwarnings('ignore')\n"
        "from dagster import DagsterInstance\n"
        "with DagsterInstance.get() as i:\n"
        "    out = []\n"
        "    for r in i.get_runs():\n"
        "        events = [e.dagster_event for e in i.all_logs(r.run_id) if e.dagster_event]\n"
        "        pids = {e.pid for e in events if e.pid}\n"
        "        t = r.tags\n"
        "        days = t.get('dagster/partition') or t.get('dagster/asset_partition_range_start') + '...' + "
        "t.get('dagster/asset_partition_range_end')\n"
        "        out.append({'days': days, 'status': r.status.value, 'pids': sorted(pids)})\n"
        "    print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DAGSTER_HOME": str(home / ".dagster")})
    assert done.returncode == 0, done.stderr
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def test_parallel_runs_publish_what_one_process_publishes(generated: Path, tmp_path: Path) -> None:
    alone, fanned = copy_of(generated, tmp_path, "alone"), copy_of(generated, tmp_path, "fanned")
    one = tokenledger("run", "--home", str(alone), "--start", START, "--end", END)
    assert one.returncode == 0, one.stdout + one.stderr
    two = tokenledger("run", "--home", str(fanned), "--start", START, "--end", END, "--parallel", "2")
    assert two.returncode == 0, two.stdout + two.stderr
    out = two.stdout
    # Two ranged runs of two days, submitted together, each announced and followed step by step.
    assert re.search(r"^2026-11-02\.\.\.2026-11-03  submitted as run [0-9a-f]{8} \(2 days, one run\)$", out, re.M)
    assert re.search(r"^2026-11-04\.\.\.2026-11-05  submitted as run [0-9a-f]{8} \(2 days, one run\)$", out, re.M)
    assert re.search(r"2026-11-04\.\.\.2026-11-05  publish/exports done$", out, re.M)
    for day in ("2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"):
        assert f"{day}  published" in out
    runs = runs_of(fanned)
    assert sorted((r["days"], r["status"]) for r in runs) == [
        ("2026-11-02...2026-11-03", "SUCCESS"), ("2026-11-04...2026-11-05", "SUCCESS")]
    # Each run's steps ran in a run worker of its own, neither the command nor the other run.
    workers = [set(r["pids"]) for r in runs]
    assert all(workers) and not workers[0] & workers[1]
    # The in-process home ran one ranged run of four days, in the command's own process.
    assert [r["days"] for r in runs_of(alone)] == ["2026-11-02...2026-11-05"]
    tables_alone, tables_fanned = published(alone), published(fanned)
    assert {"finance.cost_per_mtok_daily", "infra.capacity_plan_daily", "focus.cost_and_usage_daily"} <= set(
        t for t, r in tables_alone.items() if r)
    assert tables_fanned == tables_alone
    assert len(tables_fanned["infra.capacity_trend"]) == len(tables_alone["infra.capacity_trend"]) > 0


def test_a_failed_range_is_resubmitted_day_by_day_and_idle_reaches_the_runs(generated: Path, tmp_path: Path) -> None:
    home = copy_of(generated, tmp_path, "gap")
    shutil.rmtree(home / "raw" / "gateway" / "dt=2026-11-03")
    done = tokenledger("run", "--home", str(home), "--start", START, "--end", END, "--parallel", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert ("2026-11-02...2026-11-03  a day failed in the ranged run, so none of it was published: running its days "
            "one by one") in out
    assert "2026-11-02  published" in out and "2026-11-03  FAILED" in out
    assert "2026-11-04  published" in out and "2026-11-05  published" in out
    assert "core/gateway_requests: no request logs for 2026-11-03: none of " in out, out
    assert "1 day(s) failed: 2026-11-03." in out
    assert sorted((r["days"], r["status"]) for r in runs_of(home)) == [
        ("2026-11-02", "SUCCESS"), ("2026-11-02...2026-11-03", "FAILURE"), ("2026-11-03", "FAILURE"),
        ("2026-11-04...2026-11-05", "SUCCESS")]
    assert not (home / "exports" / "infra" / "slo_daily" / "day=2026-11-03").exists()
    # Declared idle, the day is published as a day without traffic: --idle reaches the submitted run.
    idle = tokenledger("run", "--home", str(home), "--start", "2026-11-03", "--parallel", "1", "--idle")
    assert idle.returncode == 0, idle.stdout + idle.stderr
    assert "2026-11-03  published" in idle.stdout
    assert (home / "exports" / "infra" / "slo_daily" / "day=2026-11-03").is_dir()


def published_state(home: Path) -> dict[str, str]:
    """What readers see: the version `current` names, and every file under exports/ and reports/ with its bytes'
    digest."""
    import hashlib

    state = {"current": os.readlink(home / ".published" / "current")}
    for folder in ("exports", "reports"):
        for path in sorted((home / folder).resolve().rglob("*")):
            if path.is_file():
                state[f"{folder}/{path.relative_to((home / folder).resolve())}"] = hashlib.sha256(
                    path.read_bytes()).hexdigest()
    return state


def test_a_run_worker_killed_mid_publish_leaves_the_published_days_and_fails_only_them(
        generated: Path, tmp_path: Path) -> None:
    home = copy_of(generated, tmp_path, "killed")
    first = tokenledger("run", "--home", str(home), "--start", START, "--end", END, "--parallel", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    before, tables = published_state(home), published(home)
    # The run worker of 11-04...11-05 (another process than the command's) is killed as it switches versions.
    killed = tokenledger("run", "--home", str(home), "--start", "2026-11-04", "--end", END, "--parallel", "1",
                         env={"TOKENLEDGER_FAILPOINT": "publish:before-switch"})
    assert killed.returncode == 1, killed.stdout + killed.stderr
    out = killed.stdout
    assert "2026-11-04...2026-11-05  a day failed in the ranged run" in out
    assert "2026-11-04  FAILED" in out and "2026-11-05  FAILED" in out
    assert re.search(r"run [0-9a-f]{8}: its process ended without finishing \(signal 9, SIGKILL: killed", out), out
    assert published_state(home) == before
    # Re-running the days publishes them again, whole: the same rows.
    again = tokenledger("run", "--home", str(home), "--start", "2026-11-04", "--end", END, "--parallel", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert published(home) == tables


def test_two_overlapping_backfills_at_once_run_and_publish_each_day_once(generated: Path, tmp_path: Path) -> None:
    alone, home = copy_of(generated, tmp_path, "alone"), copy_of(generated, tmp_path, "both")
    assert tokenledger("run", "--home", str(alone), "--start", START, "--end", END).returncode == 0
    # Two commands on one home at once, 11-03 and 11-04 in both: one starts the daemon, the other uses it; a day one
    # command has submitted is followed by the other, not run again.
    commands = [subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "run", "--home", str(home), "--start",
                                  first, "--end", last, "--parallel", "2", "--days-per-run", "1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for first, last in ((START, "2026-11-04"), ("2026-11-03", END))]
    outputs, seen = watch_daemons(home, commands)
    assert max(seen) == 1, (seen, outputs)
    assert [c.returncode for c in commands] == [0, 0], outputs
    runs = runs_of(home)
    assert sorted(r["days"] for r in runs) == ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]
    assert {r["status"] for r in runs} == {"SUCCESS"}
    # Each command says the truth of each of its days: published by its own run, or by the other command's.
    submitted = [set(re.findall(r"^(\S+)  submitted as run", out, re.M)) for out in outputs]
    assert submitted[0] | submitted[1] == {"2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"}
    assert not submitted[0] & submitted[1]
    for out, days, mine in zip(outputs, (("2026-11-02", "2026-11-03", "2026-11-04"),
                                         ("2026-11-03", "2026-11-04", "2026-11-05")), submitted, strict=True):
        for day in days:
            line = re.search(rf"^{day}  published( \(by run [0-9a-f]{{8}}, another command's\))?$", out, re.M)
            assert line, out
            assert (line.group(1) is None) == (day in mine), out
        assert "Nothing of" not in out
    # Every day is published once in what readers see, whole (its manifest matches its files), as run alone.
    from tokenledger.publish.versions import verify_day
    from tokenledger.storage.layout import HomeLayout

    assert all(verify_day(HomeLayout.of(home), day) == [] for day in (date(2026, 11, d) for d in range(2, 6)))
    assert published(home) == published(alone)
    # Nothing lost: every source of every day (gateway, billing, deployments, the generated GPU telemetry), and every
    # day's cost, reconciles.
    with duckdb.connect() as con:
        for table, per_day in (("quality/ingest_reconciliation_daily", 4), ("finance/cost_reconciliation_daily", 1)):
            days, rows, balanced = con.execute(
                "SELECT count(DISTINCT day), count(*), count(*) FILTER (WHERE balanced) FROM read_parquet("
                f"'{home}/exports/{table}/**/*.parquet', hive_partitioning = true)").fetchone()
            assert (days, rows, balanced) == (4, 4 * per_day, 4 * per_day), table
