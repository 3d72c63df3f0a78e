"""Gateway ingest, materialized through Dagster into a temporary home, checked against a hand-made day."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.conftest import failure_text, gateway_dir, lenient, make_home, materialize, request, rows, write_jsonl

DAY = "2026-11-16"


def _write_day(home: Path) -> None:
    a = [
        request("ok-1", prompt="SECRET PROMPT TEXT", response="SECRET ANSWER"),      # line 1
        request("neg", input_tokens=-5),                                           # line 2
        request("cached", cached_input_tokens=1200),                               # line 3
        request("e2e", e2e_ms=100.0),                                              # line 4
        request("status", status="okay"),                                          # line 5
        request(...),                                                               # line 6
        "{not json",                                                               # line 7
        request("ts", received_at="yesterday"),                                    # line 8
        request("out", output_tokens="many"),                                      # line 9
        request("late", received_at="2026-11-17T00:00:00Z"),                       # line 10
        request("ambiguous", model="moe", deployment_id=...),                      # line 11
        request("no-ttft", ttft_ms=..., queue_ms=...),                             # line 12
        "",                                                                        # line 13: empty
        request("dup-1", e2e_ms=1000.0),                                           # line 14
        request("dup-2", e2e_ms=1000.0, tenant_id="first-read"),                   # line 15
        request("dup-3", e2e_ms=9000.0, tenant_id="finished-last"),                # line 16
        request("err", status="error", output_tokens=0, ttft_ms=..., queue_ms=..., itl_max_ms=...,
                e2e_ms=50.0, http_status=500, error_type="upstream"),              # line 17
        request("timeout", status="timeout", output_tokens=0, ttft_ms=..., queue_ms=..., itl_max_ms=...,
                e2e_ms=60000.0),                                                   # line 18
        request("rejected", status="rejected", output_tokens=0, ttft_ms=..., queue_ms=..., itl_max_ms=...,
                e2e_ms=..., http_status=429),                                      # line 19
        request("cancelled", status="cancelled", output_tokens=3, e2e_ms=800.0),   # line 20
        request("disc", status="disconnected", output_tokens=10),                  # line 21
        request("small", model="m8", deployment_id=..., input_tokens=200, cached_input_tokens=0),  # line 22
        request("offset", received_at="2026-11-16T08:00:00+08:00"),               # line 23
    ]
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", a)
    b = [
        request("dup-1", e2e_ms=2000.0, tenant_id="finished-last"),
        request("dup-2", e2e_ms=1000.0, tenant_id="last-read"),
        request("dup-3", e2e_ms=400.0),
        request("dup-3", e2e_ms=500.0),
    ]
    write_jsonl(gateway_dir(home, DAY) / "b.jsonl.gz", b)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        "COPY (SELECT * FROM (VALUES "
        "('pq-1', TIMESTAMPTZ '2026-11-16 23:59:59.5+00', 'm70', 'm70-h100', 'team-c', 'ok', 5000, 4800, 20, "
        " 900.0, 2000.0), "
        "('pq-2', TIMESTAMPTZ '2026-11-16 12:00:00+00', 'moe', 'moe-b', 'team-c', 'ok', 40000, 38400, 200, "
        " 1500.0, 9000.0)) "
        "t(request_id, received_at, model, deployment_id, tenant_id, status, input_tokens, cached_input_tokens, "
        "  output_tokens, ttft_ms, e2e_ms)) TO $p (FORMAT PARQUET)",
        {"p": str(gateway_dir(home, DAY) / "c.parquet")},
    )


def test_every_row_is_accepted_quarantined_or_merged(home: Path) -> None:
    _write_day(home)
    result = materialize(DAY, run_config=lenient(), upto=["core/gateway_requests", "quality/quarantine",
                                                          "quality/ingest_reconciliation_daily"])
    assert result.success, failure_text(result)

    accepted = {r["request_id"]: r for r in rows(home, "core", "gateway_requests", DAY)}
    quarantined = {(Path(r["file"]).name, r["line"]): r["reason"]
                   for r in rows(home, "quality", "quarantine", DAY, where="source = 'gateway'")}
    assert set(quarantined) == {("a.jsonl", line) for line in range(2, 14)}
    quarantined = {line: reason for (_, line), reason in quarantined.items()}
    assert quarantined == {
        # Every broken rule is listed: -5 is negative, and below the 400 cached tokens too.
        2: "input_tokens: -5 is below the minimum 0; cached_within_input: cached_input_tokens must not exceed "
           "input_tokens (input_tokens=-5, cached_input_tokens=400)",
        3: "cached_within_input: cached_input_tokens must not exceed input_tokens "
           "(input_tokens=1000, cached_input_tokens=1200)",
        4: "e2e_after_ttft: e2e_ms must not be below ttft_ms (e2e_ms=100.0, ttft_ms=300.0)",
        5: "status: okay is not one of ok, error, timeout, disconnected, rejected, cancelled",
        6: "request_id: required but missing",
        7: "line is not valid JSON",
        8: "received_at: yesterday is not a valid timestamp (ISO 8601, with its offset, e.g. "
           "2026-11-16T10:00:00Z)",
        9: "output_tokens: many is not a valid integer",
        10: "received_at: 2026-11-17T00:00:00Z falls on 2026-11-17, not on the folder's day 2026-11-16",
        11: "deployment_id: missing, and model moe has 2 deployments in force on 2026-11-16",
        12: "ttft_ms: required when output_tokens > 0 and latency_measured",
        13: "empty line: no record",  # every physical line is counted: an empty one is quarantined, not skipped
    }
    # 23 lines of a.jsonl, 4 lines of b.jsonl.gz, 2 rows of c.parquet: 29 read; lines 2-13 of a.jsonl quarantined.
    recon = {r["source"]: r for r in rows(home, "quality", "ingest_reconciliation_daily", DAY)}
    assert recon["gateway"] == {"day": recon["gateway"]["day"], "source": "gateway", "rows_read": 29,
                                "rows_accepted": 13, "rows_quarantined": 12, "duplicates_merged": 4,
                                "skipped_not_request": 0, "failures_no_model": 0, "balanced": True,
                                "notes": None}
    statuses: dict[str, int] = {}
    for r in accepted.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    assert statuses == {"ok": 8, "error": 1, "timeout": 1, "rejected": 1, "cancelled": 1, "disconnected": 1}

    # Duplicates: the copy that finished last wins; on a tie, the last one read (b.jsonl.gz after a.jsonl).
    assert accepted["dup-1"]["tenant_id"] == "finished-last" and accepted["dup-1"]["e2e_ms"] == 2000.0
    assert accepted["dup-2"]["tenant_id"] == "last-read"
    assert accepted["dup-3"]["tenant_id"] == "finished-last"
    assert accepted["dup-1"]["source_file"].endswith("b.jsonl.gz") and accepted["dup-1"]["source_line"] == 1
    # The model's only deployment fills a missing deployment_id; an offset is converted to UTC.
    assert accepted["small"]["deployment_id"] == "m8-onprem"
    assert accepted["offset"]["received_at"].isoformat() == "2026-11-16T00:00:00+00:00"
    # Parquet rows keep their types; the row number is the line.
    assert accepted["pq-2"]["cached_input_tokens"] == 38400 and accepted["pq-2"]["source_line"] == 2
    assert accepted["rejected"]["e2e_ms"] is None


@pytest.fixture(scope="module")
def whole_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The hand-made day through the whole job (leniently), once for the module, in a home as the `home` fixture
    makes it: the text test reads it, then the re-run test runs the day again in place, asserting that this leaves
    every table's rows as they were (the lake's rows name their raw files by absolute path: a copy elsewhere
    would not re-run to the same rows)."""
    home = make_home(tmp_path_factory.mktemp("whole_day") / "home")
    _write_day(home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        mp.setenv("TOKENLEDGER_IDLE_DAYS", "all")
        assert materialize(DAY, run_config=lenient()).success
    yield home


def test_prompt_and_response_text_are_never_stored(whole_day: Path) -> None:
    home = whole_day
    for path in (home / "lake").rglob("*.parquet"):
        assert b"SECRET" not in path.read_bytes(), path
    for path in (home / "exports").rglob("*"):
        if path.is_file():
            assert b"SECRET" not in path.read_bytes(), path
    raw = rows(home, "quality", "quarantine", DAY, where="line = 2")[0]["raw"]
    assert '"input_tokens":"-5"' in raw and "prompt" not in raw


def _fingerprint(home: Path) -> dict[str, str]:
    """The content of every lake and export file, as a hash of its sorted rows."""
    con = duckdb.connect()
    out = {}
    for root in ("lake", "exports"):
        for path in sorted((home / root).rglob("data.parquet")):
            text = con.execute("SELECT string_agg(t::VARCHAR, '\n' ORDER BY t::VARCHAR) "
                               "FROM read_parquet($p) t", {"p": str(path)}).fetchone()[0] or ""
            out[str(path.relative_to(home))] = hashlib.sha256(text.encode()).hexdigest()
    return out


def test_rerunning_a_day_leaves_every_table_identical(whole_day: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = whole_day  # the day's first run: the fixture's
    monkeypatch.setenv("TOKENLEDGER_HOME", str(home))
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")
    first = _fingerprint(home)
    assert materialize(DAY, run_config=lenient()).success
    assert _fingerprint(home) == first
    assert len(rows(home, "core", "gateway_requests", DAY)) == 13


def test_a_late_file_is_included_when_the_day_runs_again(home: Path) -> None:
    _write_day(home)
    # the reconciliation's quarantine checks read quality/quarantine too
    tables = ["core/gateway_requests", "quality/quarantine", "quality/ingest_reconciliation_daily"]
    assert materialize(DAY, run_config=lenient(), upto=tables).success
    write_jsonl(gateway_dir(home, DAY) / "z-late.jsonl", [
        request("late-1"),
        request("late-2", status="cancelled"),
        request("ok-1", e2e_ms=99999.0, tenant_id="late-copy"),
    ])
    assert materialize(DAY, run_config=lenient(), upto=tables).success
    accepted = {r["request_id"]: r for r in rows(home, "core", "gateway_requests", DAY)}
    assert len(accepted) == 15
    assert accepted["ok-1"]["tenant_id"] == "late-copy"
    recon = rows(home, "quality", "ingest_reconciliation_daily", DAY, where="source = 'gateway'")[0]
    assert (recon["rows_read"], recon["rows_accepted"], recon["rows_quarantined"], recon["duplicates_merged"]) \
        == (32, 15, 12, 5)


def test_a_day_without_any_request_log_fails_unless_declared_idle(home: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENLEDGER_IDLE_DAYS")
    failed = materialize("2026-11-20")
    assert not failed.success
    assert ("2026-11-20: no request logs for 2026-11-20: none of " + str(home / "raw" / "gateway" / "dt=2026-11-20")
            in failure_text(failed))
    assert "declare it idle: tokenledger run --idle" in failure_text(failed)
    assert not (home / "exports").exists()
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "2026-11-20")
    # deployments_with_requests is a check of core/gateway_requests: inside the selection (the reconciliation's
    # quarantine checks read quality/quarantine too)
    result = materialize("2026-11-20", upto=["core/gateway_requests", "quality/quarantine",
                                             "quality/ingest_reconciliation_daily"])
    assert result.success
    warnings = {e.event_specific_data.asset_check_key.name: e.event_specific_data for e in result.all_events
                if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    # an idle day's deployments served nothing: a warning naming them, not a failure
    assert not warnings["deployments_with_requests"].passed
    assert warnings["deployments_with_requests"].description.startswith(
        "self-hosted deployments in force with no request that day: 2026-11-20 m70-h100 (model m70); "
        "2026-11-20 m8-onprem")
    assert rows(home, "core", "gateway_requests", "2026-11-20") == []
    recon = rows(home, "quality", "ingest_reconciliation_daily", "2026-11-20", where="source = 'gateway'")[0]
    assert recon["rows_read"] == 0 and recon["balanced"]


def test_deployments_resolve_a_mid_day_scale_up(home: Path) -> None:
    assert materialize(DAY, selection=["core/deployments_daily"]).success
    versions = rows(home, "core", "deployments_daily", DAY, where="deployment_id = 'm70-h100'",
                    order="in_force_from")
    assert [(v["gpus"], v["hours_in_force"], v["gpu_hours"]) for v in versions] == [(16, 12.0, 192.0),
                                                                                   (24, 12.0, 288.0)]
    # Time-weighted GPUs for the day: 480 GPU-hours / 24 h = 20.
    assert sum(v["gpu_hours"] for v in versions) / 24 == 20.0


def test_an_unbalanced_reconciliation_blocks_publishing(home: Path) -> None:
    _write_day(home)
    assert materialize(DAY, selection=["core/deployments_daily", "core/gateway_requests",
                                       "core/billing_charges"]).success
    part = home / "lake/quality_parts/ingest_reconciliation_requests" / f"day={DAY}" / "data.parquet"
    con = duckdb.connect()
    con.execute("COPY (SELECT * REPLACE (rows_accepted + 1 AS rows_accepted) FROM read_parquet($p)) TO $t "
                "(FORMAT PARQUET)",
                {"p": str(part), "t": str(part) + ".tmp"})
    Path(str(part) + ".tmp").replace(part)
    result = materialize(DAY, selection=["quality/quarantine", "quality/ingest_reconciliation_daily",
                                         "publish/exports"], run_config=lenient())
    assert not result.success
    evaluations = {e.event_specific_data.asset_check_key.name: e.event_specific_data for e in result.all_events
                   if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    balanced = evaluations["ingest_reconciliation_balanced"]
    assert not balanced.passed
    assert balanced.description == ("quality.ingest_reconciliation_daily does not balance: 2026-11-16 gateway: "
                                    "read 29 != accepted 14 + quarantined 12 + merged 4 + skipped 0")
    assert not (home / "exports").exists()


def test_json_lines_files_staged_together_keep_each_line_s_file_and_number(tmp_path: Path) -> None:
    """A day's JSON Lines files are staged together (small files: one batch, read line by line): every row still
    carries its own file's position in the day (file_index), its name and its line, around a Parquet file staged on
    its own."""
    from tokenledger.ingest.landing import LandingFile
    from tokenledger.ingest.sources import stage_gateway_files

    a = write_jsonl(tmp_path / "a.jsonl", [request("a1"), "{not json", request("a3")])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    b = tmp_path / "b.parquet"
    con.execute(f"COPY (SELECT 'b1' AS request_id) TO '{b}' (FORMAT PARQUET)")
    c = write_jsonl(tmp_path / "c.jsonl.gz", [request("c1"), request("c2", input_tokens=-1)])
    files = [LandingFile(a, "jsonl"), LandingFile(b, "parquet"), LandingFile(c, "jsonl")]
    staged = stage_gateway_files(con, files, tmp_path / "stage", first_index=4)
    assert [p.name for p in staged] == ["000005.parquet", "jsonl-000004.parquet"]
    got = con.execute("SELECT file_index, source_file, source_line, request_id, reason IS NULL FROM read_parquet($f) "
                      "ORDER BY file_index, source_line", {"f": [str(p) for p in staged]}).fetchall()
    assert got == [(4, str(a), 1, "a1", True), (4, str(a), 2, None, False), (4, str(a), 3, "a3", True),
                   (5, str(b), 1, "b1", False), (6, str(c), 1, "c1", True), (6, str(c), 2, "c2", False)]


def test_a_broken_file_among_json_lines_staged_together_is_named_alone(tmp_path: Path) -> None:
    from tokenledger.errors import InputFileError
    from tokenledger.ingest.landing import LandingFile
    from tokenledger.ingest.sources import stage_gateway_files

    good = write_jsonl(tmp_path / "a.jsonl", [request("a1")])
    broken = write_jsonl(tmp_path / "b.jsonl.gz", [request(f"b{i}") for i in range(200)])
    broken.write_bytes(broken.read_bytes()[:-40])  # a truncated gzip: its lines cannot be counted
    con = duckdb.connect()
    with pytest.raises(InputFileError) as caught:
        stage_gateway_files(con, [LandingFile(good, "jsonl"), LandingFile(broken, "jsonl")], tmp_path / "stage")
    assert str(caught.value).startswith(f"{broken}: is not a readable gzip file")


def test_parquet_files_of_one_shape_are_staged_together_keeping_each_row_s_file_and_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hourly Parquet files of one schema are typed and judged in one statement; a file of another schema is
    staged alone; each row keeps its file's position in the day, its name and its row number, exactly as when
    every file is staged on its own (which is also what a failed statement of a group falls back to)."""
    from tokenledger.ingest.landing import LandingFile
    from tokenledger.ingest.sources import stage_gateway_files
    from tokenledger.storage import lake

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    paths = []
    for name, values in (("h00", "('a1', 10), ('a2', -5)"), ("h01", "('b1', 7)"), ("h02", "('c1', 3), ('c2', 4)")):
        path = tmp_path / f"{name}.parquet"
        con.execute(f"COPY (SELECT request_id, input_tokens::BIGINT AS input_tokens FROM (VALUES {values}) "
                    f"v(request_id, input_tokens)) TO '{path}' (FORMAT PARQUET)")
        paths.append(path)
    other = tmp_path / "h03.parquet"  # input_tokens as text: another shape
    con.execute(f"COPY (SELECT 'd1' AS request_id, '12' AS input_tokens) TO '{other}' (FORMAT PARQUET)")
    files = [LandingFile(p, "parquet") for p in [*paths, other]]

    def staged_rows(stage: Path) -> tuple[list[str], list[tuple]]:
        staged = stage_gateway_files(con, files, stage, first_index=2)
        got = con.execute("SELECT file_index, source_file, source_line, request_id, input_tokens, reason "
                          "FROM read_parquet($f) ORDER BY file_index, source_line",
                          {"f": [str(p) for p in staged]}).fetchall()
        return sorted(p.name for p in staged), got

    names, together = staged_rows(tmp_path / "together")
    assert names == ["000005.parquet", "parquet-000002.parquet"]
    assert [(i, Path(f).name, line, rid, tokens) for i, f, line, rid, tokens, _ in together] == [
        (2, "h00.parquet", 1, "a1", 10), (2, "h00.parquet", 2, "a2", -5), (3, "h01.parquet", 1, "b1", 7),
        (4, "h02.parquet", 1, "c1", 3), (4, "h02.parquet", 2, "c2", 4), (5, "h03.parquet", 1, "d1", 12)]
    assert "input_tokens: -5 is below the minimum 0" in together[1][5]

    # A group's statement that fails is staged file by file: the same rows.
    write_query = lake.write_query

    def failing_for_groups(con, query, target, params=None, fmt="parquet", scratch=False, ordered=True):
        if target.name.startswith("parquet-"):
            raise duckdb.InvalidInputException("simulated")
        return write_query(con, query, target, params, fmt, scratch, ordered)

    monkeypatch.setattr(lake, "write_query", failing_for_groups)
    names, alone = staged_rows(tmp_path / "alone")
    assert names == ["000002.parquet", "000003.parquet", "000004.parquet", "000005.parquet"]
    assert alone == together
