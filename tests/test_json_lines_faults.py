"""JSON Lines faults judged alike in every request source (issue 56): a key the contract reads written twice in one
object, a line over the reader's limit (plain and gzip), and numbers that are not the form their field takes.

Each case is a small hand-written file landed in a home of its own, one day's request ingest run on it (config
loaded, deployments resolved, as the asset does), and the outcome read back: the quarantined line's number and
reason, the accepted count, and the day's reconciliation balanced.
"""

from __future__ import annotations

import gzip
import json
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import make_home, request
from tests.test_adapters import _message, _response, _spend
from tests.test_codex import CODEX
from tests.test_otel import T10, _attrs, _export, _span
from tokenledger.config import load_config
from tokenledger.errors import InputFileError
from tokenledger.ingest import sources
from tokenledger.ingest.lines import MAX_LINE_BYTES
from tokenledger.ingest.sources import ingest_deployments_day, ingest_gateway_day
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

DAY = "2026-11-16"
SPAN_A = _span("a1a1a1a1a1a1a1a1", "chat m70", T10, T10 + 2.5, _attrs(
    gen_ai__operation__name="chat", gen_ai__request__model="m70", gen_ai__usage__input_tokens=100,
    gen_ai__usage__output_tokens=20))
ONCE = "a record must hold each key once (which value is meant cannot be told)"


def _dup(at: str) -> str:
    return f'" in the object at {at}: {ONCE}'


def _land(tmp_path: Path, source: str, name: str, lines: list[bytes]) -> Path:
    home = make_home(tmp_path / "home")
    path = home / "raw" / source / f"dt={DAY}" / name
    path.parent.mkdir(parents=True)
    body = b"".join(line + b"\n" for line in lines)
    path.write_bytes(gzip.compress(body, compresslevel=1) if name.endswith(".gz") else body)
    return home


def _run(home: Path, source: str) -> tuple[dict[int, str], Any]:
    """One day's request ingest: the quarantined lines (line -> reason) and the reconciliation of raw/`source`/."""
    layout = HomeLayout.of(home)
    window = DayWindow(date.fromisoformat(DAY))
    with compute_connection(home / "tmp" / "spill") as con:
        load_config(con, layout)
        ingest_deployments_day(con, layout, window)
        counts = {c.source: c for c in ingest_gateway_day(con, layout, window, home / "tmp" / "stage")}
    part = home / "lake" / "quality_parts" / "quarantine_requests" / f"day={DAY}" / "data.parquet"
    quarantined = dict(duckdb.sql(f"SELECT line, reason FROM read_parquet('{part}')").fetchall())
    assert counts[source].balanced, counts[source]
    return quarantined, counts[source]


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


def _twice(record: dict[str, Any], written: str, again: str) -> bytes:
    """The record's line with `written` (as json.dumps writes it) followed by `again` in the same object."""
    line = json.dumps(record)
    assert line.count(written) == 1, written
    return line.replace(written, f"{written}, {again}", 1).encode()


# --- a key written twice -------------------------------------------------------------------------------------------

def test_a_gateway_field_written_twice_is_quarantined_naming_it(tmp_path: Path) -> None:
    """Line 2 holds input_tokens twice (one value would have been kept silently); line 3 holds the same value twice,
    still two keys; line 4 repeats a field outside the contract, which no reader reads: accepted."""
    home = _land(tmp_path, "gateway", "a.jsonl", [
        _line(request("r1")),
        _twice(request("r2"), '"input_tokens": 1000', '"input_tokens": 2000'),
        _twice(request("r3"), '"model": "m70"', '"model": "m70"'),
        _twice(request("r4"), '"model": "m70"', '"note": 1, "note": 2'),
    ])
    quarantined, counts = _run(home, "gateway")
    assert quarantined == {2: 'duplicate key "input_tokens' + _dup("$"), 3: 'duplicate key "model' + _dup("$")}
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined) == (4, 2, 2)


def test_the_json_reader_leaves_a_file_with_a_field_twice_to_the_line_reader(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """On the fast path (DuckDB's read_json, forced here for small files) a field written twice fails the file's read,
    so that file alone is read line by line and the line quarantined with the same reason; the clean file stays on
    read_json (the check costs the fast path nothing)."""
    monkeypatch.setattr(sources, "READ_JSON_MIN_BYTES", 0)
    home = _land(tmp_path, "gateway", "a.jsonl", [_line(request("a1")), _line(request("a2"))])
    (home / "raw" / "gateway" / f"dt={DAY}" / "b.jsonl").write_bytes(
        _line(request("b1")) + b"\n" + _twice(request("b2"), '"status": "ok"', '"status": "error"') + b"\n")
    reading: dict[Path, str] = {}
    real = sources.stage_gateway_files
    monkeypatch.setattr(sources, "stage_gateway_files", lambda *a, **k: real(*a, **{**k, "reading": reading}))
    quarantined, counts = _run(home, "gateway")
    assert {p.name: how for p, how in reading.items()} == {"a.jsonl": sources.READ_JSON,
                                                           "b.jsonl": sources.LINE_BY_LINE}
    assert quarantined == {2: 'duplicate key "status' + _dup("$")}
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined) == (4, 3, 1)


def test_an_openai_usage_count_written_twice_is_quarantined(tmp_path: Path) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    home = _land(tmp_path, "openai", "responses.jsonl", [
        _line(_response("resp_1", 1794823200, "completed", usage)),
        _twice(_response("resp_2", 1794823260, "completed", usage), '"input_tokens": 100', '"input_tokens": 900'),
    ])
    quarantined, counts = _run(home, "openai")
    assert quarantined == {2: 'duplicate key "input_tokens' + _dup("$.usage")}
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined) == (2, 1, 1)


def test_a_litellm_object_written_twice_is_quarantined(tmp_path: Path) -> None:
    """The parent object itself twice (two `usage_object`s: either's counts could be read) and a nested count."""
    spend = _spend("L1", "2026-11-16T12:00:00.000", "2026-11-16T12:00:01.000", None, prompt_tokens=10,
                   completion_tokens=5, metadata={"status": "success", "usage_object": {
                       "prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 4}}})
    home = _land(tmp_path, "litellm", "spend.jsonl", [
        _line(spend),
        _twice({**spend, "request_id": "L2"}, '"cached_tokens": 4', '"cached_tokens": 8'),
        _line({**spend, "request_id": "L3"}).replace(b'"metadata": {', b'"metadata": {"usage_object": {}, ', 1),
    ])
    quarantined, counts = _run(home, "litellm")
    assert quarantined == {
        2: 'duplicate key "cached_tokens' + _dup("$.metadata.usage_object.prompt_tokens_details"),
        3: 'duplicate key "usage_object' + _dup("$.metadata")}
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined) == (3, 1, 2)


def test_a_codex_token_count_written_twice_is_quarantined(tmp_path: Path) -> None:
    """A session's meta, context and two turns (tests/test_codex.py), the second's last usage holding input_tokens
    twice."""
    lines = [_line(CODEX[i]) for i in (0, 1, 6, 8)]
    lines[3] = lines[3].replace(b'"last_token_usage": {"input_tokens": ',
                                b'"last_token_usage": {"input_tokens": 1, "input_tokens": ', 1)
    home = _land(tmp_path, "openai", "rollout-2026-11-16T10-00-00-x.jsonl", lines)
    quarantined, counts = _run(home, "openai")
    assert quarantined == {4: 'duplicate key "input_tokens' + _dup("$.payload.info.last_token_usage")}
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined) == (4, 1, 1)


def test_an_otlp_span_field_written_twice_quarantines_its_line(tmp_path: Path) -> None:
    """The span's records are built from the line: the line holding a span with two spanIds is quarantined."""
    home = _land(tmp_path, "otel", "traces.jsonl", [
        _line(_export(("svc", [SPAN_A]))),
        _twice(_export(("svc", [{**SPAN_A, "spanId": "c3c3c3c3c3c3c3c3"}])), '"spanId": "c3c3c3c3c3c3c3c3"',
               '"spanId": "d4d4d4d4d4d4d4d4"'),
    ])
    quarantined, counts = _run(home, "otel")
    assert quarantined == {2: 'duplicate key "spanId' + _dup("$.resourceSpans[*].scopeSpans[*].spans[*]")}
    assert (counts.rows_accepted, counts.rows_quarantined) == (1, 1)


# --- a line over the reader's limit -------------------------------------------------------------------------------

LONG = b'{"request_id": "' + b"x" * MAX_LINE_BYTES + b'"}'
TOO_LONG = ("line longer than 16 MiB (line 2): tokenledger reads a line of at most 16,777,216 bytes, so this one is "
            "not read as a record")


@pytest.mark.parametrize("name", ["a.jsonl", "a.jsonl.gz"])
def test_a_line_over_the_limit_is_quarantined_naming_the_limit_and_line(name: str, tmp_path: Path) -> None:
    home = _land(tmp_path, "gateway", name, [_line(request("r1")), LONG, _line(request("r3"))])
    quarantined, counts = _run(home, "gateway")
    assert quarantined == {2: TOO_LONG}
    assert (counts.rows_read, counts.rows_accepted, counts.rows_quarantined) == (3, 2, 1)


def test_a_file_of_one_line_over_the_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    home = _land(tmp_path, "anthropic", "session.jsonl.gz", [LONG])
    with pytest.raises(InputFileError) as caught:
        _run(home, "anthropic")
    message = str(caught.value)
    assert "line 1 is longer than 16,777,216 bytes (16 MiB), the longest line it reads" in message
    assert "none of its" not in message


# --- numbers in the form their field takes ----------------------------------------------------------------------

NUMBERS = [  # (line, reason): conftest.request's fields, one changed
    (_line(request("n1", input_tokens="12abc")), "input_tokens: 12abc is not a valid integer"),
    (_line(request("n2", input_tokens="1,234")), "input_tokens: 1,234 is not a valid integer"),
    (_line(request("n3")).replace(b'"input_tokens": 1000', b'"input_tokens": 1e400'),
     "input_tokens: 1e400 is beyond the integers tokenledger reads exactly"),
    (_line(request("n4", output_tokens=1.5)), "output_tokens: 1.5 is not a valid integer"),
    (_line(request("n5", output_tokens=True)), "output_tokens: a value of type boolean is not a valid integer"),
    (_line(request("n6", ttft_ms="12abc")), "ttft_ms: 12abc is not a valid number"),
    (_line(request("n7")).replace(b'"ttft_ms": 300.0', b'"ttft_ms": 1e400'), "ttft_ms: 1e400 is not a valid number"),
    (_line(request("n8", ttft_ms="1,5")), "ttft_ms: 1,5 is not a valid number"),
    (_line(request("n9", queue_ms=False)), "queue_ms: a value of type boolean is not a valid number"),
]


def test_numbers_are_read_strictly_naming_the_value(tmp_path: Path) -> None:
    home = _land(tmp_path, "gateway", "a.jsonl", [line for line, _ in NUMBERS] + [_line(request("fine"))])
    quarantined, counts = _run(home, "gateway")
    assert {n: r.split("; ")[0][:len(NUMBERS[n - 1][1])] for n, r in quarantined.items()} == {
        n: reason for n, (_, reason) in enumerate(NUMBERS, start=1)}
    assert (counts.rows_read, counts.rows_accepted) == (len(NUMBERS) + 1, 1)


def test_an_epoch_time_is_a_json_number_within_range_or_quarantined(tmp_path: Path) -> None:
    """OTLP's startTimeUnixNano: "1_000" (DuckDB's cast reads it as 1000) and 1e30 s (beyond a timestamp: the cast
    used to stop the file) are quarantined with the form the field takes."""
    home = _land(tmp_path, "otel", "traces.jsonl", [
        _line(_export(("svc", [SPAN_A]))),
        _line(_export(("svc", [{**SPAN_A, "spanId": "e5e5e5e5e5e5e5e5", "startTimeUnixNano": "1_000"}]))),
        _line(_export(("svc", [{**SPAN_A, "spanId": "f6f6f6f6f6f6f6f6", "startTimeUnixNano": "1e39"}]))),
    ])
    quarantined, counts = _run(home, "otel")
    assert sorted(quarantined) == [2, 3]
    for line, value in ((2, "1_000"), (3, "1e39")):
        assert f"{value} is not a valid timestamp (ISO 8601" in quarantined[line]
        assert "nanoseconds since the Unix epoch" in quarantined[line]
    assert counts.rows_accepted == 1


def test_an_anthropic_usage_count_written_twice_is_quarantined(tmp_path: Path) -> None:
    usage = {"input_tokens": 12, "output_tokens": 50}
    home = _land(tmp_path, "anthropic", "messages.jsonl", [
        _line(_message("msg_1", "m70", usage, timestamp=1794823200)),
        _twice(_message("msg_2", "m70", usage, timestamp=1794823260), '"output_tokens": 50', '"output_tokens": 5'),
    ])
    quarantined, counts = _run(home, "anthropic")
    assert quarantined == {2: 'duplicate key "output_tokens' + _dup("$.usage")}
    assert (counts.rows_read, counts.rows_quarantined) == (2, 1)
