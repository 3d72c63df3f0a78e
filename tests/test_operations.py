"""Daily operation: backfills give the same tables as running each day alone, days can run in parallel, and a run
that dies or fails midway leaves the published days exactly as they were."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import signal
import time
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT, gateway_dir, request, write_jsonl
from tests.processes import Forked, spawn
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES
from tokenledger.errors import LedgerError
from tokenledger.generate import generate_landing_zone
from tokenledger.publish import versions as publishing
from tokenledger.storage import lake
from tokenledger.storage.layout import HomeLayout

# Friday to Monday: the generator's 70B adds a replica on the fourth day (day_offset 3, the Monday), so every way of
# running these days crosses a weekend and an inventory change. A whole week, as before, covered no more and cost
# this module 86 s of `make test`'s ~260 (two weeks, before that, doubled it again).
START = date(2026, 11, 13)
DAYS = 4
END = START + timedelta(days=DAYS - 1)
# A guard against a hung run, not a speed test: a week of small days on 2 shared cores, with the rest of the suite
# running beside them, once took several minutes.
TIMEOUT_S = 1800


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ, TOKENLEDGER_HOME=str(home), DAGSTER_HOME=str(home / ".dagster"))
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _cli(home: Path, start: date, end: date, *options: str) -> Forked:
    """`tokenledger run` in another process (forked: tests/processes.py)."""
    return spawn("tokenledger", ["run", "--home", str(home), "--start", str(start), "--end", str(end), *options],
                 _env(home), PROJECT_ROOT)


def _content(home: Path) -> dict[str, str]:
    """Every published file's rows, sorted and hashed, with the home's own path taken out of the values."""
    con = duckdb.connect()
    out = {}
    for path in sorted(p for p in (home / "exports").rglob("*") if p.suffix in (".parquet", ".csv")):
        reader = "read_parquet" if path.suffix == ".parquet" else "read_csv"
        text = con.execute(f"SELECT string_agg(replace(t::VARCHAR, $home, '$HOME'), chr(10) ORDER BY t::VARCHAR) "
                           f"FROM {reader}($p) t", {"p": str(path), "home": str(home)}).fetchone()[0] or ""
        out[str(path.relative_to(home / "exports"))] = hashlib.sha256(text.encode()).hexdigest()
    return out


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four days of generated landing zone, shared (copied) by every home of this module."""
    source = tmp_path_factory.mktemp("landing") / "home"
    generate_landing_zone(source, START, DAYS, 1_500, seed=3, bad_rows_per_day=0)
    return source


def _home_from(landing: Path, tmp_path: Path, name: str) -> Path:
    home = tmp_path / name
    shutil.copytree(landing / "raw", home / "raw")
    shutil.copytree(landing / "config", home / "config")
    return home


@pytest.fixture(scope="module")
def day_by_day(landing: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: `tokenledger run` over the days, one Dagster run per day (its default is ranged runs), in
    this process (the other ways of running the days below start processes of their own)."""
    from tokenledger.cli import main

    home = _home_from(landing, tmp_path_factory.mktemp("day_by_day"), "home")
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(out):
        for name in ("TOKENLEDGER_HOME", "DAGSTER_HOME"):  # main() points them at the home: restored after
            mp.setenv(name, os.environ.get(name, ""))
        code = main(["run", "--home", str(home), "--start", str(START), "--end", str(END), "--days-per-run", "1"])
    assert code == 0, out.getvalue()
    assert out.getvalue().count("  published") == DAYS
    return home


def test_a_dagster_range_backfill_gives_the_same_tables_as_each_day_alone(landing, day_by_day, tmp_path) -> None:
    from tokenledger.cli import DAGSTER_YAML

    home = _home_from(landing, tmp_path, "range")
    (home / ".dagster").mkdir()
    # The home as the README has users prepare it (`tokenledger run` or `ui` once): its instance's dagster.yaml,
    # the event log of pipelines/event_log.py. Dagster's defaults cost its run ~10 s of ~33 s.
    (home / ".dagster" / "dagster.yaml").write_text(DAGSTER_YAML)
    # Dagster's own CLI (forked: tests/processes.py; `make test` starts the `dagster` executable itself).
    done = spawn("dagster", ["asset", "materialize", "-m", "tokenledger.pipelines.definitions", "--select", "*",
                             "--partition-range", f"{START}...{END}"], _env(home), PROJECT_ROOT)
    output, _ = done.communicate(timeout=TIMEOUT_S)
    assert done.returncode == 0, output[-3000:]
    reference = _content(day_by_day)
    # every day table a file a day, and the trend and the traces tables one file each
    assert len([k for k in reference if k.endswith("data.parquet")]) == DAYS * len(PUBLISHED_TABLES) + 2
    assert _content(home) == reference


def test_days_run_in_parallel_give_the_same_tables(landing, day_by_day, tmp_path) -> None:
    home = _home_from(landing, tmp_path, "parallel")
    days = [START + timedelta(days=i) for i in range(DAYS)]
    procs = [_cli(home, day, day) for day in days]  # four processes at once, one home, one warehouse
    outputs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out
        assert "lock" not in out.lower(), out
    parallel, reference = _content(home), _content(day_by_day)
    per_day = {k for k in reference if any(f"day={d}/" in k or k.endswith(f"_{d}.csv") for d in days)}
    assert len(per_day) == len(days) * (len(PUBLISHED_TABLES) + 3)  # + the CSVs of the three finance tables
    assert {k: parallel[k] for k in per_day} == {k: reference[k] for k in per_day}
    assert {k for k in parallel if "day=" in k or k.endswith(".csv")} == per_day


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_killed_run_leaves_the_published_day_exactly_as_it_was(landing, day_by_day, tmp_path) -> None:
    home = tmp_path / "killed"
    shutil.copytree(day_by_day, home, symlinks=True, ignore=shutil.ignore_patterns(".dagster", "tmp"))
    before = _snapshot(home / "exports")
    day = START + timedelta(days=2)
    write_jsonl(gateway_dir(home, str(day)) / "zz-late.jsonl",
                [request(f"late-{i}", received_at=f"{day}T12:00:00Z", model="llama-3.1-8b-instruct",
                         deployment_id="llama8b-l40s-onprem", input_tokens=100, cached_input_tokens=0)
                 for i in range(50)])
    ingested = lake.day_file(home / "lake", "core", "gateway_requests", day)
    stamp = ingested.stat().st_mtime_ns
    proc = _cli(home, day, day)
    deadline = time.monotonic() + 300
    while ingested.stat().st_mtime_ns == stamp and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ingested.stat().st_mtime_ns != stamp  # it was killed midway: the day's inputs were re-ingested
    assert _snapshot(home / "exports") == before
    assert publishing.verify_day(HomeLayout.of(home), day) == []


def test_a_publish_that_fails_midway_changes_nothing(landing, day_by_day, tmp_path, monkeypatch) -> None:
    home = tmp_path / "failing"
    shutil.copytree(day_by_day, home, symlinks=True, ignore=shutil.ignore_patterns(".dagster", "tmp"))
    layout = HomeLayout.of(home)
    day = START + timedelta(days=3)
    before = _snapshot(home / "exports")
    # New content in the lake for every table of the day, then a failure while building the new version.
    for ref in PUBLISHED_TABLES:
        path = lake.day_file(layout.lake, ref.schema, ref.name, day)
        duckdb.connect().execute(f"COPY (SELECT * FROM read_parquet('{path}') LIMIT 0) TO '{path}.new' "
                                 "(FORMAT PARQUET)")
        Path(f"{path}.new").replace(path)
    calls = {"n": 0}
    real = publishing._link_or_copy

    def failing_link(source: Path, target: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError("disk full")
        real(source, target)

    monkeypatch.setattr(publishing, "_link_or_copy", failing_link)
    staging = publishing.Staging(layout)
    with duckdb.connect() as con:
        publishing.stage_day(con, layout, staging, day, PUBLISHED_TABLES, CORE_TABLES, run_id="test")
    with pytest.raises(OSError, match="disk full"):
        publishing.publish_files(layout, staging)
    staging.discard()
    assert _snapshot(home / "exports") == before  # what readers see did not change
    missing = lake.day_file(layout.lake, PUBLISHED_TABLES[0].schema, PUBLISHED_TABLES[0].name, day)
    missing.unlink()
    with pytest.raises(LedgerError, match="Nothing of the day was published"), duckdb.connect() as con:
        publishing.stage_day(con, layout, publishing.Staging(layout), day, PUBLISHED_TABLES, CORE_TABLES, "test")
    assert _snapshot(home / "exports") == before


def test_a_day_that_fails_in_a_ranged_run_stops_only_itself(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture) -> None:
    """`tokenledger run` over three days whose middle one has no log: the ranged run fails whole, its days are run
    one by one, the first and last are published and the middle one is named with its message."""
    from tokenledger.cli import main

    monkeypatch.delenv("TOKENLEDGER_IDLE_DAYS")
    monkeypatch.setenv("DAGSTER_HOME", str(home / ".dagster"))  # restored after the test: main() points it there
    for day in ("2026-11-16", "2026-11-18"):
        write_jsonl(gateway_dir(home, day) / "a.jsonl", [request(f"{day}-{i}", received_at=f"{day}T14:00:00Z")
                                                         for i in range(20)])
    assert main(["run", "--home", str(home), "--start", "2026-11-16", "--end", "2026-11-18"]) == 1
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "2026-11-16...2026-11-18  a day failed in the ranged run, so none of it was published" in out
    assert [line for line in out.splitlines() if line.endswith("  published")] == [
        "2026-11-16  published", "2026-11-18  published"]
    assert "no request logs for 2026-11-17" in out
    manifests = sorted(p.name for p in (home / "exports" / "_manifests").iterdir())
    assert manifests == ["day=2026-11-16.json", "day=2026-11-18.json"]
