"""Fault injection, operations side: runs killed at every stage, two runs of one day at once, a day blocked by a
check, a home whose path DuckDB would read as a pattern, a warehouse held by another process, a read-only home,
a full disk and settings that make no sense.

One small day is published once into a home under `h?me[x]*/`, beside a copy of it under `hamex-neighbour/`:
the glob the first path spells matches the second, so any reader that expands a pattern reads two homes and
doubles every count. Each test works on its own copy of that home.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import gateway_dir, request, write_jsonl
from tokenledger import lake
from tokenledger.cli import dagster_home_of, main
from tokenledger.faults import VARIABLE as FAILPOINT
from tokenledger.generate import generate_landing_zone
from tokenledger.paths import PROJECT_ROOT, HomeLayout
from tokenledger.publishing import current_version, published_exports, verify_day
from tokenledger.warehouse import refresh_views

DAY = date(2026, 11, 16)
MODEL, DEPLOYMENT = "llama-3.1-8b-instruct", "llama8b-l40s-onprem"
FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"click\")", "+1+1", "-2-2", "@SUM(A1)"]
INGEST = "core/deployments_daily,core/gateway_requests,core/billing_charges,quality/quarantine," \
         "quality/ingest_reconciliation_daily"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, TOKENLEDGER_HOME=str(home), DAGSTER_HOME=str(dagster_home_of(home)), **extra)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


@contextlib.contextmanager
def _home_env(home: Path):
    saved = {k: os.environ.get(k) for k in ("TOKENLEDGER_HOME", "DAGSTER_HOME")}
    os.environ.update(TOKENLEDGER_HOME=str(home), DAGSTER_HOME=str(dagster_home_of(home)))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_day(home: Path) -> dg.ExecuteInProcessResult:
    """The whole day, in this process, recorded in the home's own Dagster instance."""
    from pipelines.definitions import defs

    with _home_env(home), dg.DagsterInstance.get() as instance:
        return defs.resolve_job_def("daily_pipeline").execute_in_process(
            partition_key=DAY.isoformat(), instance=instance, raise_on_error=False)


def _materialize(home: Path, select: str, **env: str) -> subprocess.Popen:
    """The Dagster CLI materializing a selection of the day in another process."""
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster")), "asset", "materialize", "-m", "pipelines.definitions",
         "--select", select, "--partition", DAY.isoformat()],
        cwd=PROJECT_ROOT, env=_env(home, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under root (followed through the exports symlink) with a hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _copy(home: Path, to: Path) -> Path:
    shutil.copytree(home, to, symlinks=True, ignore=shutil.ignore_patterns("tmp"))
    return to


def _late_file(home: Path, name: str, count: int, prefix: str) -> None:
    write_jsonl(gateway_dir(home, DAY.isoformat()) / name,
                [request(f"{prefix}-{i}", received_at=f"{DAY}T12:00:00Z", model=MODEL, deployment_id=DEPLOYMENT,
                         input_tokens=100, cached_input_tokens=0) for i in range(count)])


def _requests_published(home: Path) -> int:
    """core.gateway_requests rows of the day as published, read by pyarrow (no DuckDB glob involved)."""
    version = current_version(HomeLayout.of(home))
    return pq.read_metadata(lake.day_file(version / "lake", "core", "gateway_requests", DAY)).num_rows


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ops")
    home = base / "h?me[x]*" / "home"
    generate_landing_zone(home, DAY, 1, 400, seed=5, bad_rows_per_day=0)
    write_jsonl(gateway_dir(home, DAY.isoformat()) / "formulas.jsonl",
                [request(f"formula-{i}", received_at=f"{DAY}T09:00:00Z", model=MODEL, deployment_id=DEPLOYMENT,
                         tenant_id=tenant, input_tokens=100, cached_input_tokens=0)
                 for i, tenant in enumerate(FORMULAS)])
    result = _run_day(home)
    assert result.success, [e.message for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    # What the glob h?me[x]* matches: a second home with the same files. A pattern read would double counts.
    _copy(home, base / "hamex-neighbour" / "home")
    return home


def test_a_home_under_a_glob_like_path_reads_only_itself(published: Path) -> None:
    layout = HomeLayout.of(published)
    requests = _requests_published(published)
    con = duckdb.connect(str(layout.warehouse), read_only=True)
    assert con.execute("SELECT count(*) FROM core.gateway_requests").fetchone()[0] == requests
    split = con.execute("SELECT sum(requests) FROM infra.token_split_daily").fetchone()[0]
    assert split == requests  # every request reached a model (no rejected ones in this small day)
    assert con.execute("SELECT count(DISTINCT day) FROM infra.slo_daily").fetchone()[0] == 1
    recon = con.execute("SELECT rows_read, rows_accepted FROM quality.ingest_reconciliation_daily "
                        "WHERE source = 'gateway'").fetchone()
    assert recon[1] == requests


def test_finance_csv_cells_are_never_formulas_and_parquet_keeps_the_value(published: Path) -> None:
    folder = lake.day_dir(published / "exports", "finance", "tenant_showback_daily", DAY)
    with (folder / "data.csv").open(newline="", encoding="utf-8") as f:
        tenants = {row["tenant_id"] for row in csv.DictReader(f)}
    assert {"'" + t for t in FORMULAS} <= tenants
    assert not any(t[:1] in "=+-@" for t in tenants)
    parquet = set(pq.read_table(folder / "data.parquet", columns=["tenant_id"]).column("tenant_id").to_pylist())
    assert set(FORMULAS) <= parquet
    # Only text cells are neutralized: no number gets an apostrophe.
    with (lake.day_dir(published / "exports", "finance", "cost_per_mtok_daily", DAY) / "data.csv").open() as f:
        assert all(not row["cost_total"].startswith("'") for row in csv.DictReader(f))


KILL_POINTS = [
    # (failpoint, what the killed run materializes)
    ("ingest:staged", "core/deployments_daily,core/gateway_requests"),
    ("checks:core.gateway_requests", "core/deployments_daily,core/gateway_requests"),
    ("publish:staged", "publish/exports"),
    ("publish:linking", "publish/exports"),
    ("publish:before-switch", "publish/exports"),
]


def _orphans(layout: HomeLayout) -> list[str]:
    found = [str(p) for p in layout.scratch.glob("step-*")]
    found += [str(p) for p in (layout.published / "staging").glob("*")]
    found += [str(p) for folder in layout.lake.glob(f"*/*/day={DAY}") for p in folder.glob(".*.tmp")]
    current = current_version(layout)
    found += [str(v) for v in layout.published.glob("v*") if current and v.name > current.name]
    return found


def test_a_run_killed_anywhere_changes_nothing_and_the_next_run_completes(published: Path, tmp_path: Path) -> None:
    home = _copy(published, tmp_path / "k?ll[1]" / "home")
    layout = HomeLayout.of(home)
    requests = _requests_published(home)
    _late_file(home, "zz-late.jsonl", 50, "late")
    before = _snapshot(home / "exports")
    killed_runs = []
    for point, select in KILL_POINTS:
        proc = _materialize(home, select, **{FAILPOINT: point})
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == -signal.SIGKILL, f"{point}: {out[-2000:]}"
        assert _snapshot(home / "exports") == before, point
        killed_runs.append(point)
    assert _orphans(layout), "the kills left nothing behind to clean: the test did not reach its points"

    # The next run, while another process holds the warehouse file for writing and the views need rewriting:
    # the day is published, the run says plainly why the views are stale and exits non-zero.
    (layout.warehouse.with_name(layout.warehouse.name + ".views")).unlink()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(600)", str(layout.warehouse)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with _home_env(home):
            code = main(["run", "--home", str(home), "--start", DAY.isoformat()])
    finally:
        holder.kill()
        holder.wait()
    assert code == 3
    assert _requests_published(home) == requests + 50  # published despite the stale views
    assert verify_day(layout, DAY) == []
    assert _orphans(layout) == []
    with _home_env(home), dg.DagsterInstance.get() as instance:
        failed = [r for r in instance.get_runs() if r.status == dg.DagsterRunStatus.FAILURE]
        messages = [e.message for r in failed for e in instance.all_logs(r.run_id)
                    if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_FAILURE"]
    assert len(failed) == len(KILL_POINTS)
    assert all("ended without finishing this run" in m for m in messages), messages


def test_a_run_killed_right_after_the_switch_has_published_the_day_whole(published: Path, tmp_path: Path) -> None:
    home = _copy(published, tmp_path / "after" / "home")
    layout = HomeLayout.of(home)
    before = json.loads((published_exports(layout) / f"_manifests/day={DAY}.json").read_text())["run_id"]
    proc = _materialize(home, "publish/exports", **{FAILPOINT: "publish:after-switch"})
    proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL
    after = json.loads((published_exports(layout) / f"_manifests/day={DAY}.json").read_text())["run_id"]
    assert after != before  # the killed run's publication is the one readers see, and it is whole:
    assert verify_day(layout, DAY) == []


def _run_day_selection(home: Path, select: str) -> subprocess.CompletedProcess:
    proc = _materialize(home, select)
    out, _ = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


def test_two_runs_of_one_day_at_once_give_the_result_of_one(published: Path, tmp_path: Path) -> None:
    home = _copy(published, tmp_path / "twice" / "home")
    requests = _requests_published(home)
    _late_file(home, "zz-late.jsonl", 20, "late")
    first, second = _materialize(home, INGEST), _materialize(home, INGEST)
    outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], [o[-2000:] for o in outputs]
    assert any("another run of 2026-11-16 is in progress; waiting" in o for o in outputs)
    con = duckdb.connect()
    recon = lake.day_file(home / "lake", "quality", "ingest_reconciliation_daily", DAY)
    read, accepted, balanced = con.execute(
        "SELECT rows_read, rows_accepted, balanced FROM read_parquet($f) WHERE source = 'gateway'",
        {"f": str(recon)}).fetchone()
    assert (accepted, balanced) == (requests + 20, True)
    tables = ["core/gateway_requests", "quality/quarantine", "quality/ingest_reconciliation_daily"]
    together = {t: _rows_digest(lake.day_file(home / "lake", *t.split("/"), DAY)) for t in tables}
    assert _run_day_selection(home, INGEST).returncode == 0  # the same day alone, once more
    alone = {t: _rows_digest(lake.day_file(home / "lake", *t.split("/"), DAY)) for t in tables}
    assert together == alone


def _rows_digest(path: Path) -> str:
    """A digest of a Parquet file's rows, in any order (a parallel writer may order them differently)."""
    return duckdb.connect().execute("SELECT md5(string_agg(t::VARCHAR, '|' ORDER BY t::VARCHAR)) "
                                    "FROM read_parquet($p) t", {"p": str(path)}).fetchone()[0]


def _views(layout: HomeLayout) -> dict[str, str]:
    con = duckdb.connect(str(layout.warehouse), read_only=True)
    views = con.execute("SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {v: con.execute(f"SELECT md5(string_agg(t::VARCHAR, '|' ORDER BY t::VARCHAR)) FROM {v} t").fetchone()[0]
            for (v,) in views}


def test_a_blocked_day_leaves_every_view_unchanged(published: Path, tmp_path: Path) -> None:
    home = _copy(published, tmp_path / "blocked" / "home")
    layout = HomeLayout.of(home)
    assert refresh_views(layout).refreshed  # the copy's views read the copy (absolute paths, until issue 13)
    views, exports = _views(layout), _snapshot(home / "exports")
    assert "quality.quarantine_pending" in views
    write_jsonl(gateway_dir(home, DAY.isoformat()) / "zz-bad.jsonl",
                [request(f"bad-{i}", received_at=f"{DAY}T12:00:00Z", model=MODEL, deployment_id=DEPLOYMENT,
                         status="okay") for i in range(30)])  # 30 of ~430 rows: far above the 0.1% tolerance
    result = _run_day(home)
    assert not result.success
    blocked = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
               and not e.event_specific_data.passed and e.event_specific_data.asset_check_key.name ==
               "quarantine_within_tolerance"]
    pending_file = lake.day_file(layout.lake, "quality", "quarantine", DAY)
    assert blocked and str(pending_file) in blocked[0].description, blocked
    after = _views(layout)
    assert {v: h for v, h in after.items() if v != "quality.quarantine_pending"} == \
           {v: h for v, h in views.items() if v != "quality.quarantine_pending"}
    assert _snapshot(home / "exports") == exports
    con = duckdb.connect(str(layout.warehouse), read_only=True)
    assert con.execute("SELECT count(*) FROM quality.quarantine_pending WHERE reason LIKE 'status: okay%'"
                       ).fetchone()[0] == 30
    assert con.execute("SELECT count(*) FROM quality.quarantine WHERE reason LIKE 'status: okay%'").fetchone()[0] == 0


# --- the machine and the settings ----------------------------------------------------------------------------------

def _tmpfs(path: Path, size: str) -> bool:
    """Mount a small tmpfs at path (root with mount rights only); False when this machine does not allow it."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def _small_landing(to: Path) -> Path:
    generate_landing_zone(to, DAY, 1, 300, seed=9, bad_rows_per_day=0)
    return to


def test_a_full_disk_is_named_as_the_cause(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = _small_landing(tmp_path / "landing")
    raw_kb = sum(p.stat().st_size for p in source.rglob("*") if p.is_file()) // 1024
    mount = tmp_path / "full"
    if not _tmpfs(mount, f"{raw_kb + 400}k"):
        pytest.skip("this machine does not let the test mount a small file system to fill")
    try:
        home = mount / "home"
        shutil.copytree(source, home)
        with _home_env(home):
            code = main(["run", "--home", str(home), "--start", DAY.isoformat()])
        out = capsys.readouterr()
        text = out.out + out.err
        assert code != 0
        assert "Traceback" not in text
        assert "the disk is full (" in text or "the disk failed to read or write (" in text, text[-3000:]
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_read_only_home_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    mount = tmp_path / "ro"
    if os.geteuid() == 0:
        if not _tmpfs(mount, "20m"):
            pytest.skip("root cannot be refused a write by permissions, and no file system can be mounted")
        _small_landing(mount / "home")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    else:
        _small_landing(mount / "home")
        mount.joinpath("home").chmod(0o555)
    try:
        code = main(["run", "--home", str(mount / "home"), "--start", DAY.isoformat()])
        err = capsys.readouterr().err
        assert code == 2
        assert err.count("\n") == 1 and "cannot write (" in err and "make it writable" in err, err
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        else:
            mount.joinpath("home").chmod(0o755)


def test_a_start_date_that_is_not_a_date_is_one_line(tmp_path: Path) -> None:
    home = _small_landing(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "tokenledger.cli", "run", "--home", str(home), "--start",
                           DAY.isoformat()], cwd=PROJECT_ROOT, env=_env(home, TOKENLEDGER_START_DATE="garbage"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: TOKENLEDGER_START_DATE='garbage' is not a date: write the first day "
                                   "partitions may reach as YYYY-MM-DD (for example 2024-01-01), or unset it.")


@pytest.mark.parametrize("start,end,message", [
    ("2023-06-01", "2023-06-01", "--start 2023-06-01 is before the first day partitions reach, 2024-01-01"),
    ("2026-11-16", "2099-01-01", "--end 2099-01-01 is not a complete UTC day yet"),
])
def test_a_range_outside_the_partitions_is_one_line(start: str, end: str, message: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    home = _small_landing(tmp_path / "home")
    with _home_env(home):
        code = main(["run", "--home", str(home), "--start", start, "--end", end])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
