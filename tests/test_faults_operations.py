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
import io
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

from tests.conftest import PROJECT_ROOT, gateway_dir, request, write_jsonl
from tests.processes import Forked, spawn
from tokenledger.cli import dagster_home_of, main
from tokenledger.faults import VARIABLE as FAILPOINT
from tokenledger.generate import generate_landing_zone
from tokenledger.publish.versions import csv_file, current_version, published_exports, verify_day
from tokenledger.publish.warehouse import connect, refresh_views, writable_database
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path
from tokenledger.storage.layout import HomeLayout

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


def _run_day(home: Path, select: str) -> dg.ExecuteInProcessResult:
    """A selection of the day's assets (with their checks), in this process, in the home's Dagster instance."""
    from tokenledger.pipelines.definitions import defs

    keys = [dg.AssetKey.from_user_string(k) for k in select.split(",")]
    with _home_env(home), dg.DagsterInstance.get() as instance:
        return defs.resolve_job_def("daily_pipeline").execute_in_process(
            partition_key=DAY.isoformat(), instance=instance, raise_on_error=False, asset_selection=keys)


def _materialize(home: Path, select: str, **env: str) -> Forked:
    """The Dagster CLI materializing a selection of the day in another process (forked: tests/processes.py)."""
    return spawn("dagster", ["asset", "materialize", "-m", "tokenledger.pipelines.definitions", "--select", select,
                             "--partition", DAY.isoformat()], _env(home, **env), PROJECT_ROOT)


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


def _hold_warehouse(path: Path) -> subprocess.Popen:
    """Another process holding the warehouse file open for writing, as an open notebook would."""
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(600)", str(path)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """A published day, run by `tokenledger run` while another process holds the warehouse: the day publishes,
    the views cannot be written, and the command says so and exits 3. Returns the home, the exit code and what
    the command printed on stderr."""
    base = tmp_path_factory.mktemp("ops")
    home = base / "h?me[x]*" / "home"
    generate_landing_zone(home, DAY, 1, 400, seed=5, bad_rows_per_day=0)
    write_jsonl(gateway_dir(home, DAY.isoformat()) / "formulas.jsonl",
                [request(f"formula-{i}", received_at=f"{DAY}T09:00:00Z", model=MODEL, deployment_id=DEPLOYMENT,
                         tenant_id=tenant, input_tokens=100, cached_input_tokens=0)
                 for i, tenant in enumerate(FORMULAS)])
    layout = HomeLayout.of(home)
    layout.warehouse.parent.mkdir(parents=True, exist_ok=True)
    holder = _hold_warehouse(writable_database(layout.warehouse))
    err = io.StringIO()
    try:
        with _home_env(home), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["run", "--home", str(home), "--start", DAY.isoformat()])
    finally:
        holder.kill()
        holder.wait()
    # What the glob h?me[x]* matches: a second home with the same files. A pattern read would double counts.
    _copy(home, base / "hamex-neighbour" / "home")
    return home, code, err.getvalue()


def test_a_held_warehouse_is_said_plainly_and_the_day_is_still_published(published) -> None:
    home, code, err = published
    assert code == 3
    assert "the warehouse views were not refreshed" in err and "is open for writing in another process" in err
    assert "Traceback" not in err
    assert _requests_published(home) > 0 and verify_day(HomeLayout.of(home), DAY) == []
    assert refresh_views(HomeLayout.of(home)).refreshed  # once the other process let go


def test_a_home_under_a_glob_like_path_reads_only_itself(published, monkeypatch: pytest.MonkeyPatch) -> None:
    home = published[0]
    layout = HomeLayout.of(home)
    refresh_views(layout)
    requests = _requests_published(home)

    def plain_from_home() -> duckdb.DuckDBPyConnection:
        monkeypatch.chdir(home)
        return duckdb.connect(str(layout.warehouse), read_only=True)

    # Through tokenledger, then as anyone opens it from the home (one at a time: DuckDB will not open one file
    # with two configurations in one process).
    for opened in (lambda: connect(layout), plain_from_home):
        con = opened()
        assert con.execute("SELECT count(*) FROM core.gateway_requests").fetchone()[0] == requests
        split = con.execute("SELECT sum(requests) FROM infra.token_split_daily").fetchone()[0]
        assert split == requests  # every request reached a model (no rejected ones in this small day)
        assert con.execute("SELECT count(DISTINCT day) FROM infra.slo_daily").fetchone()[0] == 1
        recon = con.execute("SELECT rows_read, rows_accepted FROM quality.ingest_reconciliation_daily "
                            "WHERE source = 'gateway'").fetchone()
        assert recon[1] == requests
        con.close()


def test_finance_csv_cells_are_never_formulas_and_parquet_keeps_the_value(published) -> None:
    home = published[0]
    folder = lake.day_dir(home / "exports", "finance", "tenant_showback_daily", DAY)
    with csv_file(home / "exports", "finance", "tenant_showback_daily", DAY).open(newline="", encoding="utf-8") as f:
        tenants = {row["tenant_id"] for row in csv.DictReader(f)}
    assert {"'" + t for t in FORMULAS} <= tenants
    assert not any(t[:1] in "=+-@" for t in tenants)
    parquet = set(pq.read_table(folder / "data.parquet", columns=["tenant_id"]).column("tenant_id").to_pylist())
    assert set(FORMULAS) <= parquet
    # Only text cells are neutralized: no number gets an apostrophe.
    with csv_file(home / "exports", "finance", "cost_per_mtok_daily", DAY).open() as f:
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


def _cli(home: Path) -> Forked:
    """`tokenledger run` of the day in another process (forked: tests/processes.py)."""
    return spawn("tokenledger", ["run", "--home", str(home), "--start", DAY.isoformat()], _env(home), PROJECT_ROOT)


def test_killed_runs_change_nothing_and_two_runs_at_once_complete_the_day(published, tmp_path: Path) -> None:
    home = _copy(published[0], tmp_path / "k?ll[1]" / "home")
    layout = HomeLayout.of(home)
    requests = _requests_published(home)
    _late_file(home, "zz-late.jsonl", 50, "late")
    before = _snapshot(home / "exports")
    for point, select in KILL_POINTS:
        proc = _materialize(home, select, **{FAILPOINT: point})
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == -signal.SIGKILL, f"{point}: {out[-2000:]}"
        assert _snapshot(home / "exports") == before, point
    assert _orphans(layout), "the kills left nothing behind to clean: the test did not reach its points"

    # Two runs of the day at once: one waits for the other, both complete, and together they leave what one
    # would: the late requests published once, every table whole, nothing orphaned, the killed runs failed.
    first, second = _cli(home), _cli(home)
    outputs = [p.communicate(timeout=900)[0] for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], [o[-3000:] for o in outputs]
    assert all("2026-11-16  published" in o for o in outputs)
    assert _requests_published(home) == requests + 50
    assert verify_day(layout, DAY) == []
    assert _orphans(layout) == []
    recon = lake.day_file(current_version(layout) / "exports", "quality", "ingest_reconciliation_daily", DAY)
    read, accepted, balanced = duckdb.connect().execute(
        "SELECT rows_read, rows_accepted, balanced FROM read_parquet($f) WHERE source = 'gateway'",
        {"f": literal_path(recon)}).fetchone()
    assert (accepted, balanced) == (requests + 50, True) and read >= accepted
    with _home_env(home), dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        failed = [r for r in runs if r.status == dg.DagsterRunStatus.FAILURE]
        messages = [e.message for r in failed for e in instance.all_logs(r.run_id)
                    if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_FAILURE"]
        waited = [e.message for r in runs for e in instance.all_logs(r.run_id)
                  if "another run of 2026-11-16 is in progress; waiting" in (e.message or "")]
    assert len(failed) == len(KILL_POINTS)
    assert all("ended without finishing this run" in m for m in messages), messages
    assert waited  # the second run waited for the first instead of interleaving its files with it


def test_a_run_killed_right_after_the_switch_has_published_the_day_whole(published, tmp_path: Path) -> None:
    home = _copy(published[0], tmp_path / "after" / "home")
    layout = HomeLayout.of(home)
    before = json.loads((published_exports(layout) / f"_manifests/day={DAY}.json").read_text())["run_id"]
    proc = _materialize(home, "publish/exports", **{FAILPOINT: "publish:after-switch"})
    proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL
    after = json.loads((published_exports(layout) / f"_manifests/day={DAY}.json").read_text())["run_id"]
    assert after != before  # the killed run's publication is the one readers see, and it is whole:
    assert verify_day(layout, DAY) == []


def _views(layout: HomeLayout, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A digest of what each view shows, read as anyone reads the warehouse: from its home folder."""
    con = _warehouse(layout, monkeypatch)
    views = con.execute("SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {v: con.execute(f"SELECT md5(string_agg(t::VARCHAR, '|' ORDER BY t::VARCHAR)) FROM {v} t").fetchone()[0]
            for (v,) in views}


def _warehouse(layout: HomeLayout, monkeypatch: pytest.MonkeyPatch) -> duckdb.DuckDBPyConnection:
    monkeypatch.chdir(layout.home)  # the views read paths relative to the home
    return duckdb.connect(str(layout.warehouse), read_only=True)


def test_a_blocked_day_leaves_every_view_unchanged(published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                   ) -> None:
    home = _copy(published[0], tmp_path / "blocked" / "home")
    layout = HomeLayout.of(home)
    refresh_views(layout)  # the fixture's run found the warehouse held; the copy's views read the copy
    views, exports = _views(layout, monkeypatch), _snapshot(home / "exports")
    assert "quality.quarantine_pending" in views
    write_jsonl(gateway_dir(home, DAY.isoformat()) / "zz-bad.jsonl",
                [request(f"bad-{i}", received_at=f"{DAY}T12:00:00Z", model=MODEL, deployment_id=DEPLOYMENT,
                         status="okay") for i in range(30)])  # 30 of ~430 rows: far above the 0.1% tolerance
    result = _run_day(home, INGEST)  # the day is blocked at its ingest checks: nothing downstream runs
    assert not result.success
    blocked = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
               and not e.event_specific_data.passed and e.event_specific_data.asset_check_key.name ==
               "quarantine_within_tolerance"]
    pending_file = lake.day_file(layout.lake, "quality", "quarantine", DAY)
    assert blocked and str(pending_file) in blocked[0].description, blocked
    after = _views(layout, monkeypatch)
    assert {v: h for v, h in after.items() if v != "quality.quarantine_pending"} == \
           {v: h for v, h in views.items() if v != "quality.quarantine_pending"}
    assert _snapshot(home / "exports") == exports
    con = _warehouse(layout, monkeypatch)
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
