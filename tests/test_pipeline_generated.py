"""The generated landing zone through `tokenledger run`: what the generator planted is what the pipeline finds."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import pytest

from tokenledger.cli import main
from tokenledger.generate import generate_landing_zone

START = date(2026, 11, 16)
REASON_BY_KIND = {
    "negative_input_tokens": "input_tokens: ",
    "cached_above_input": "cached_within_input: ",
    "e2e_below_ttft": "e2e_after_ttft: ",
    "unknown_status": "status: ",
    "missing_request_id": "request_id: required but missing",
    "invalid_json": "line is not valid JSON",
    "unparseable_received_at": "received_at: ",
    "non_numeric_output_tokens": "output_tokens: ",
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("generated") / "home"
    summary = generate_landing_zone(home, START, 2, 20_000, seed=11)
    return home, summary


def test_run_publishes_every_day_and_finds_every_planted_problem(generated, capsys) -> None:
    home, summary = generated
    assert main(["run", "--home", str(home), "--start", "2026-11-16", "--end", "2026-11-17"]) == 0
    out = capsys.readouterr().out
    assert "2026-11-16  published" in out and "2026-11-17  published" in out
    assert "NOT BALANCED" not in out

    con = duckdb.connect()
    quarantine = con.execute(
        "SELECT day, file, line, reason FROM read_parquet($g)",
        {"g": str(home / "exports/quality/quarantine/day=*/data.parquet")}).fetchall()
    found = {(d, str(Path(f).relative_to(home)), line): reason for d, f, line, reason in quarantine}
    assert len(found) == len(summary.bad_rows) == 16
    for bad in summary.bad_rows:
        reason = found[(bad.day, bad.file, bad.line)]
        assert reason.startswith(REASON_BY_KIND[bad.kind]), (bad, reason)


def test_status_counts_match_the_raw_files_counted_independently(generated) -> None:
    home, summary = generated
    if not (home / "exports").exists():
        assert main(["run", "--home", str(home), "--start", "2026-11-16", "--end", "2026-11-17"]) == 0
    con = duckdb.connect()
    day = "2026-11-16"
    # DuckDB's own JSON and Parquet readers over the raw files, ignoring malformed lines, one row per request id.
    raw = con.execute(
        "WITH r AS ("
        "  SELECT request_id, status FROM read_json($j, format='newline_delimited', ignore_errors=true, "
        "         columns={'request_id': 'VARCHAR', 'status': 'VARCHAR'}) "
        "  UNION ALL SELECT request_id, status FROM read_parquet($p)) "
        "SELECT status, count(DISTINCT request_id) FROM r WHERE request_id IS NOT NULL "
        "AND status IN ('ok','error','timeout','disconnected','rejected','cancelled') GROUP BY status",
        {"j": str(home / f"raw/gateway/dt={day}/*.jsonl*"), "p": str(home / f"raw/gateway/dt={day}/*.parquet")},
    ).fetchall()
    ingested = con.execute(
        "SELECT status, count(*) FROM read_parquet($g) GROUP BY status",
        {"g": str(home / f"lake/core/gateway_requests/day={day}/data.parquet")}).fetchall()
    planted = {b.request_id for b in summary.bad_rows if b.day == date(2026, 11, 16) and b.request_id}
    # The raw count includes the planted rows whose status still reads as valid; remove them per status.
    bad_statuses = dict(con.execute(
        "SELECT status, count(*) FROM (SELECT request_id, status FROM read_json($j, format='newline_delimited', "
        "ignore_errors=true, columns={'request_id': 'VARCHAR', 'status': 'VARCHAR'}) UNION ALL "
        "SELECT request_id, status FROM read_parquet($p)) WHERE list_contains($ids, request_id) GROUP BY status",
        {"j": str(home / f"raw/gateway/dt={day}/*.jsonl*"), "p": str(home / f"raw/gateway/dt={day}/*.parquet"),
         "ids": sorted(planted)}).fetchall())
    expected = {s: n - bad_statuses.get(s, 0) for s, n in raw}
    assert dict(ingested) == {s: n for s, n in expected.items() if n}
    assert sum(n for _, n in ingested) == summary.per_day[0].requests
