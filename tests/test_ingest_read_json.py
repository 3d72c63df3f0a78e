"""Canonical JSON Lines logs read through DuckDB's JSON reader, and line by line where that reader cannot be exact.

Every value the gateway_request contract rejects is quarantined through the JSON reader with the reason worked out
by hand below, byte for byte what the line-by-line reader gives the same line; a file the JSON reader cannot read
exactly (a line that is not JSON, an empty line, a line `null`, a form feed, a repeated key, a NUL byte) is read line
by line on its own, the day's other files staying on the JSON reader.
"""

from __future__ import annotations

import gzip
import json
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tests.conftest import failure_text, gateway_dir, lenient, materialize, request, rows, write_jsonl
from tests.test_faults import LINES
from tokenledger.ingest import sources as ingest
from tokenledger.ingest.landing import LandingFile
from tokenledger.ingest.lines import physical_lines
from tokenledger.ingest.sources import LINE_BY_LINE, READ_JSON, _stage_gateway_lines, stage_gateway_files
from tokenledger.storage.lake import DayWindow

WINDOW = DayWindow(date(2026, 11, 16))
DAY = "2026-11-16"

# One line per kind of value the contract rejects (conftest.request: input 1000, cached 400, output 50, ttft 300.0,
# e2e 1500.0, queue 20.0), with the reason worked out from data_contracts/inputs/gateway_request.odcs.yaml.
REJECTED = [
    (request("obj", tenant_id={"prompt": "SECRET"}), "tenant_id: a value of type object is not a valid string"),
    (request("arr", model=["m70"]), "model: a value of type array is not a valid string"),
    (request("bool", session_id=True), "session_id: a value of type boolean is not a valid string"),
    (request("num", model=70), "model: the number 70 is not text (write it as a JSON string)"),
    (request("str", output_tokens="many"), "output_tokens: many is not a valid integer"),
    (request("frac", output_tokens=12.5), "output_tokens: 12.5 is not a valid integer"),
    # -5 is below 0, and below the 0 cached tokens too: every broken rule is listed.
    (request("neg", input_tokens=-5, cached_input_tokens=0), "input_tokens: -5 is below the minimum 0; "
     "cached_within_input: cached_input_tokens must not exceed input_tokens (input_tokens=-5, cached_input_tokens=0)"),
    (request("http", status="error", output_tokens=0, ttft_ms=..., queue_ms=..., http_status=99),
     "http_status: 99 is below the minimum 100"),
    (request("big", input_tokens=2**64), "input_tokens: 18446744073709551616 is beyond the integers tokenledger "
     "reads exactly (up to 2^63 - 1 written as digits, 2^53 with a fraction or exponent)"),
    # A bad timestamp's reason shows a form it takes (the gateway log's received_at is ISO 8601 text only).
    (request("ts", received_at="yesterday"), "received_at: yesterday is not a valid timestamp (ISO 8601, with its "
     "offset, e.g. 2026-11-16T10:00:00Z)"),
    (request("epoch", received_at=1763287200), "received_at: 1763287200 is not a valid timestamp (ISO 8601, with its "
     "offset, e.g. 2026-11-16T10:00:00Z)"),
    (request("status", status="okay"), "status: okay is not one of ok, error, timeout, disconnected, rejected, "
     "cancelled"),
    (request("key", tenant_id="sk-proj-4f9Qx2LmZt7Rk1VbN8cYp3WdE6aHs0Jg"),
     "tenant_id: looks like a raw API key, which is never stored; log a key alias or team name instead"),
    (request("long", tenant_id="t" * 300), "tenant_id: 300 characters, above the maximum length 256"),
    (request("cached", cached_input_tokens=1200), "cached_within_input: cached_input_tokens must not exceed "
     "input_tokens (input_tokens=1000, cached_input_tokens=1200)"),
    (request("e2e", e2e_ms=100.0), "e2e_after_ttft: e2e_ms must not be below ttft_ms (e2e_ms=100.0, ttft_ms=300.0)"),
    (request("hashes", prefix_block_hashes=[1, 2.5]), "prefix_block_hashes: [1,2.5] is not a JSON array of integers "
     "(each within signed 64 bits)"),
]

# A required field missing: the JSON reader's rows carry no line to name a misspelt field from, so such a file is
# staged again line by line, where the reason names the closest unknown field within a misspelling (1 edit for a name
# of up to 7 characters, 2 beyond), and nothing when none is.
MISSING = [
    (request(...), "request_id: required but missing"),
    (request("null-input", input_tokens=None), "input_tokens: required but missing"),
    (request("no-ttft", ttft_ms=..., queue_ms=...), "ttft_ms: required when output_tokens > 0 and latency_measured"),
    # input_tokens (12 characters) against input_tokns: one deletion, within 2.
    ({**request("tokns", input_tokens=...), "input_tokns": 1000},
     "input_tokens: required but missing, and the row has an unknown field input_tokns (did you mean input_tokens?)"),
    # model (5 characters) against modle: one transposition, within 1; against mdl: 2 edits, beyond it.
    ({**request("modle", model=...), "modle": "m70"},
     "model: required but missing, and the row has an unknown field modle (did you mean model?)"),
    ({**request("mdl", model=...), "mdl": "m70"}, "model: required but missing"),
    # the closest of two: Input_Tokens (case aside, 0 edits) before inputtokens (1).
    ({**request("two", input_tokens=...), "inputtokens": 1, "Input_Tokens": 2},
     "input_tokens: required but missing, and the row has an unknown field Input_Tokens (did you mean "
     "input_tokens?)"),
    # ttft_ms (7 characters): ttftms is 1 edit away, ttft 3.
    ({**request("ttftms", ttft_ms=..., queue_ms=...), "ttftms": 300.0, "ttft": 300.0},
     "ttft_ms: required when output_tokens > 0 and latency_measured, and the row has an unknown field ttftms (did "
     "you mean ttft_ms?)"),
]


def _staged(con: duckdb.DuckDBPyConnection, staged: list[Path]) -> list[tuple]:
    return con.execute("SELECT * EXCLUDE (file_index) FROM read_parquet($f, union_by_name = true) "
                       "ORDER BY source_file, source_line", {"f": [str(p) for p in staged]}).fetchall()


def _line_by_line(con: duckdb.DuckDBPyConnection, path: Path, stage: Path) -> list[tuple]:
    stage.mkdir(parents=True)
    return _staged(con, _stage_gateway_lines(con, {0: LandingFile(path, "jsonl")}, stage / "jsonl.parquet", WINDOW))


def _stage_alone(con: duckdb.DuckDBPyConnection, path: Path, tmp_path: Path) -> tuple[str, list[tuple], list[Path]]:
    """Stage `path` as the day's only log: how it was read, each line's (number, reason), and the staged files."""
    reading: dict[Path, str] = {}
    staged = stage_gateway_files(con, [LandingFile(path, "jsonl")], tmp_path / "stage", window=WINDOW,
                                 reading=reading)
    got = con.execute("SELECT source_line, reason FROM read_parquet($f) ORDER BY source_line",
                      {"f": [str(p) for p in staged]}).fetchall()
    return reading[path], got, staged


@pytest.fixture(autouse=True)
def small_files_read_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """These files are small: below READ_JSON_MIN_BYTES a day's logs are read line by line, which is cheaper."""
    monkeypatch.setattr(ingest, "READ_JSON_MIN_BYTES", 0)


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    return con


@pytest.mark.parametrize("name", ["rejected.jsonl", "rejected.jsonl.gz"])
def test_every_rejected_value_has_its_reason_through_the_json_reader(name: str, tmp_path: Path, con) -> None:
    path = write_jsonl(tmp_path / name, [request("ok-first"), *(r for r, _ in REJECTED), request("ok-last")])
    how, got, staged = _stage_alone(con, path, tmp_path)
    assert how == READ_JSON
    # 19 lines: the first and the last valid, lines 2-18 each quarantined for its one broken rule.
    assert len(REJECTED) == 17
    assert got == [(1, None), *((line, reason) for line, (_, reason) in enumerate(REJECTED, start=2)), (19, None)]
    # Every column of every row, `raw` included, is what the line-by-line reader gives the same file.
    assert _staged(con, staged) == _line_by_line(con, path, tmp_path / "lines")


@pytest.mark.parametrize("name", ["missing.jsonl", "missing.jsonl.gz"])
def test_a_missing_required_field_names_a_misspelt_one_beside_it(name: str, tmp_path: Path, con) -> None:
    path = write_jsonl(tmp_path / name, [request("ok-first"), *(r for r, _ in MISSING), request("ok-last")])
    how, got, _ = _stage_alone(con, path, tmp_path)
    assert how == LINE_BY_LINE
    assert got == [(1, None), *((line, reason) for line, (_, reason) in enumerate(MISSING, start=2)),
                   (len(MISSING) + 2, None)]


def test_every_fault_line_gets_the_same_row_through_either_reader(tmp_path: Path, con) -> None:
    """Each line of tests/test_faults.py's gateway files in a file of its own (after a valid line: a file of no
    record stops the day), all staged as one day: the files the JSON reader reads exactly (most of the field cases)
    and those it leaves (the line cases) give every column of every row, `raw` and reason included, exactly as all
    of them read line by line."""
    cases = [case for name in ("fields.jsonl", "dups.jsonl", "lines.jsonl") for case in LINES[name]]
    paths = []
    for number, case in enumerate(cases):
        path = tmp_path / "day" / f"{number:03d}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(json.dumps(request(f"lead-{number}")).encode() + b"\n" + case.line + b"\n")
        paths.append(path)
    files = [LandingFile(path, "jsonl") for path in paths]
    reading: dict[Path, str] = {}
    staged = stage_gateway_files(con, files, tmp_path / "stage", window=WINDOW, reading=reading)
    # 43 of the 64 through the JSON reader: the 37 field cases but the repeated key and the 3 of a required field
    # missing (null, absent, empty request_id), the 6 duplicate cases, and of the 21 line cases the CRLF ending, the
    # unicode labels, the unknown fields and the last line without a newline.
    assert sum(how == READ_JSON for how in reading.values()) == 43, reading
    (tmp_path / "lines").mkdir()
    by_line = _stage_gateway_lines(con, dict(enumerate(files)), tmp_path / "lines" / "jsonl.parquet", WINDOW)
    assert _staged(con, staged) == _staged(con, by_line)


# Files the JSON reader cannot read exactly, each read line by line; their second line is the trouble.
NOT_EXACT = {
    "not JSON": (b"{not json", "line is not valid JSON"),
    "empty line": (b"", "empty line: no record"),
    "whitespace only": (b" \t\r", "empty line: no record"),
    "JSON null": (b"null", "line is a JSON null, not an object"),
    "JSON array": (b"[1, 2]", "line is a JSON array, not an object"),
    "form feed before a record": (b"\x0c" + json.dumps(request("ff")).encode(), "line is not valid JSON"),
    "NUL byte": (b"\x00" + json.dumps(request("nul")).encode(), "holds NUL bytes, which JSON text never does"),
    "not UTF-8": (b'{"request_id": "\xff"}', "not UTF-8 text: save the file as UTF-8"),
    "repeated key": (b'{"request_id": "a", "request_id": "b"}', 'duplicate key "request_id" in the object at $: a '
                     "record must hold each key once (which value is meant cannot be told)"),
}


@pytest.mark.parametrize("kind", sorted(NOT_EXACT))
def test_a_file_the_json_reader_cannot_read_exactly_is_read_line_by_line(kind: str, tmp_path: Path, con) -> None:
    line, reason = NOT_EXACT[kind]
    body = b"\n".join([json.dumps(request("first")).encode(), line, json.dumps(request("third")).encode()]) + b"\n"
    path = tmp_path / "day.jsonl.gz"
    path.write_bytes(gzip.compress(body))
    reading: dict[Path, str] = {}
    staged = stage_gateway_files(con, [LandingFile(path, "jsonl")], tmp_path / "stage", window=WINDOW,
                                 reading=reading)
    assert reading == {path: LINE_BY_LINE}
    got = con.execute("SELECT source_line, reason FROM read_parquet($f) ORDER BY source_line",
                      {"f": [str(p) for p in staged]}).fetchall()
    assert [(n, r if r is None else r.split("; ")[0]) for n, r in got] == [(1, None), (2, reason), (3, None)]


def test_the_file_the_json_reader_fails_on_leaves_its_batch_the_others_read_together(tmp_path: Path, con) -> None:
    """Three small files are one batch; the reader fails on b*.jsonl (its second line is not JSON) and names it:
    a.jsonl and c.jsonl.gz are read again together (one file, json-000000), b*.jsonl alone line by line."""
    files = [write_jsonl(tmp_path / "a.jsonl", [request("a1")]),
             write_jsonl(tmp_path / "b*.jsonl", [request("b1"), "{not json"]),
             write_jsonl(tmp_path / "c.jsonl.gz", [request("c1"), request("c2")])]
    reading: dict[Path, str] = {}
    staged = stage_gateway_files(con, [LandingFile(f, "jsonl") for f in files], tmp_path / "stage", window=WINDOW,
                                 reading=reading)
    assert reading == {files[0]: READ_JSON, files[1]: LINE_BY_LINE, files[2]: READ_JSON}
    got = {p.name: con.execute("SELECT list(request_id ORDER BY file_index, source_line) FROM read_parquet($f)",
                               {"f": str(p)}).fetchone()[0] for p in staged}
    assert got == {"json-000000.parquet": ["a1", "c1", "c2"], "jsonl-000001.parquet": ["b1", None]}


def test_physical_lines_counts_as_the_line_reader_does(tmp_path: Path) -> None:
    cases = {b"": 0, b"\xef\xbb\xbf": 0, b"{}": 1, b"{}\n": 1, b"{}\n{}": 2, b"\n": 1, b"\n\n{}\n": 3,
             b"{}\x0b\n": None, b"\xff\xfe{\x00}\x00": None}
    for body, lines in cases.items():
        path = tmp_path / "f.jsonl"
        path.write_bytes(body)
        assert physical_lines(path) == lines, body
    path.write_bytes(b"{}\n" + b"x" * 40 + b"\n{}")
    assert physical_lines(path, max_line=41) == 3 and physical_lines(path, max_line=40) is None
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b"{}\n" * 1000)[:-20])
    assert physical_lines(tmp_path / "cut.jsonl.gz") is None


def test_a_day_reads_each_file_its_own_way_and_says_which(home: Path) -> None:
    """Three logs of one day: a.jsonl (3 lines, the second not JSON) is read line by line; b.jsonl.gz (2 lines) and
    c.jsonl (1 line) through the JSON reader. 6 lines read, 1 quarantined, 5 accepted; the step says so."""
    folder = gateway_dir(home, DAY)
    write_jsonl(folder / "a.jsonl", [request("a1"), "{not json", request("a3")])
    write_jsonl(folder / "b.jsonl.gz", [request("b1"), request("b2", status="cancelled")])
    write_jsonl(folder / "c.jsonl", [request("c1", tenant_id="team-c")])
    result = materialize(DAY, run_config=lenient(), upto=["core/gateway_requests", "quality/quarantine",
                                                          "quality/ingest_reconciliation_daily"])
    assert result.success, failure_text(result)
    metadata = next(e.event_specific_data.materialization.metadata for e in result.all_events
                    if e.event_type_value == "ASSET_MATERIALIZATION"
                    and e.event_specific_data.materialization.asset_key.to_user_string() == "core/gateway_requests")
    assert (metadata["jsonl_files_read_json"].value, metadata["jsonl_files_line_by_line"].value,
            metadata["jsonl_read_line_by_line"].value) == (2, 1, "a.jsonl")
    accepted = {(Path(r["source_file"]).name, r["source_line"]): r["request_id"]
                for r in rows(home, "core", "gateway_requests", DAY)}
    assert accepted == {("a.jsonl", 1): "a1", ("a.jsonl", 3): "a3", ("b.jsonl.gz", 1): "b1",
                        ("b.jsonl.gz", 2): "b2", ("c.jsonl", 1): "c1"}
    quarantined = [(Path(r["file"]).name, r["line"], r["reason"])
                   for r in rows(home, "quality", "quarantine", DAY, where="source = 'gateway'")]
    assert quarantined == [("a.jsonl", 2, "line is not valid JSON")]
    recon = rows(home, "quality", "ingest_reconciliation_daily", DAY, where="source = 'gateway'")[0]
    assert (recon["rows_read"], recon["rows_accepted"], recon["rows_quarantined"], recon["balanced"]) == \
        (6, 5, 1, True)
