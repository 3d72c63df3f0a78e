"""OpenTelemetry GenAI spans as a request source: OTLP JSON files as the Collector's file exporter writes them (one
ExportTraceServiceRequest per line), written here from the GenAI semantic conventions, unnested in DuckDB
(sql/ingest/otel_spans.sql), one model-call span one request, every other record counted. Prices: the sheets of
tests/test_api_pricing.py (GPT-5 from LiteLLM's map, `whole` for opus)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import failure_text, lenient, materialize, rows, write_jsonl
from tests.test_api_pricing import _home

DAY = "2026-11-16"
T10 = 1794823200  # 2026-11-16T10:00:00Z in seconds


def _ns(seconds: float) -> str:
    return str(int(seconds * 1_000_000_000))  # OTLP JSON writes 64-bit integers as decimal strings


def _attrs(**values: Any) -> list[dict[str, Any]]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": v}
    return [{"key": k.replace("__", "."), "value": value(v)} for k, v in values.items()]


def _span(span_id: str, name: str, start: float, end: float, attributes: list, error: bool = False) -> dict:
    return {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": span_id, "parentSpanId": "", "name": name,
            "kind": 3, "startTimeUnixNano": _ns(start), "endTimeUnixNano": _ns(end), "attributes": attributes,
            "events": [], "status": {"code": 2, "message": "rate limited"} if error else {}}


def _export(*resources: tuple[str, list[dict]]) -> dict:
    """One ExportTraceServiceRequest: per resource (its service.name), one scope holding its spans."""
    return {"resourceSpans": [
        {"resource": {"attributes": _attrs(service__name=service)},
         "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.openai_v2", "version": "2.1b0"},
                         "spans": spans}]}
        for service, spans in resources]}


# A: a chat call to GPT-5 served at priority (10,000 input of which 4,000 cache reads; 2,000 output of which 1,500
# reasoning), 2.5 s long. B: the agent span around it, whose usage repeats A's (not a request). C: the HTTP client
# span under it (no gen_ai attribute). D: another service's chat call to opus with cache reads and writes.
SPAN_A = _span("a1a1a1a1a1a1a1a1", "chat gpt5", T10, T10 + 2.5, _attrs(
    gen_ai__operation__name="chat", gen_ai__provider__name="openai", gen_ai__request__model="gpt5",
    gen_ai__response__model="gpt5", gen_ai__usage__input_tokens=10_000, gen_ai__usage__output_tokens=2_000,
    gen_ai__usage__cache_read__input_tokens=4_000, gen_ai__usage__reasoning__output_tokens=1_500,
    gen_ai__conversation__id="conv-1", openai__response__service_tier="priority",
    gen_ai__input__messages='[{"role": "user", "parts": [{"type": "text", "content": "SECRET"}]}]'))
SPAN_B = _span("b2b2b2b2b2b2b2b2", "invoke_agent support", T10, T10 + 3, _attrs(
    gen_ai__operation__name="invoke_agent", gen_ai__provider__name="openai", gen_ai__request__model="gpt5",
    gen_ai__usage__input_tokens=10_000, gen_ai__usage__output_tokens=2_000))
SPAN_C = _span("c3c3c3c3c3c3c3c3", "POST", T10, T10 + 2.4, _attrs(http__request__method="POST",
                                                                   http__response__status_code=200))
SPAN_D = _span("d4d4d4d4d4d4d4d4", "chat opus", T10 + 60, T10 + 61, _attrs(
    gen_ai__operation__name="chat", gen_ai__provider__name="anthropic", gen_ai__request__model="opus",
    gen_ai__usage__input_tokens=2_000, gen_ai__usage__cache_read__input_tokens=500,
    gen_ai__usage__cache_creation__input_tokens=300, gen_ai__usage__output_tokens=100))
# E: a call the provider turned away (status error, error.type a rate limit, no usage). F: a usage that breaks the
# contract.
SPAN_E = _span("e5e5e5e5e5e5e5e5", "chat gpt5", T10 + 120, T10 + 120.2, _attrs(
    gen_ai__operation__name="chat", gen_ai__request__model="gpt5", error__type="rate_limit_exceeded"), error=True)
SPAN_F = _span("f6f6f6f6f6f6f6f6", "chat gpt5", T10 + 130, T10 + 131, _attrs(
    gen_ai__operation__name="chat", gen_ai__request__model="gpt5", gen_ai__usage__input_tokens=-5,
    gen_ai__usage__output_tokens=10))
HTTP_1 = _span("0101010101010101", "GET /health", T10, T10 + 0.01, _attrs(http__request__method="GET"))
HTTP_2 = _span("0202020202020202", "SELECT orders", T10, T10 + 0.02, _attrs(db__system__name="postgresql"))


def _write(home: Path) -> None:
    folder = home / "raw" / "otel" / f"dt={DAY}"
    batch = _export(("support-bot", [SPAN_A, SPAN_B, SPAN_C]), ("batch-job", [SPAN_D]))
    write_jsonl(folder / "genai.jsonl", [
        batch,                                  # line 1: 4 spans, A and D model calls
        batch,                                  # line 2: the exporter's retry of line 1
        "{\"resourceSpans\": [",                # line 3: cut short
        {"resourceSpans": []},                  # line 4: an export with no span
        _export(("support-bot", [SPAN_E, SPAN_F])),  # line 5
    ])
    write_jsonl(folder / "other.jsonl", [
        _export(("shop", [HTTP_1, HTTP_2])),    # spans of another kind of service
        "not json",
    ])


@pytest.fixture(scope="module")
def otel_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mp = pytest.MonkeyPatch()
    home = _home(tmp_path_factory.mktemp("otel") / "home")
    mp.setenv("TOKENLEDGER_HOME", str(home))
    _write(home)
    # 3 of 15 records quarantined on purpose: over the 0.1% tolerance, so run leniently
    result = materialize(DAY, run_config=lenient(),
                         upto=["core/api_request_costs", "quality/ingest_reconciliation_daily", "quality/quarantine"])
    assert result.success, failure_text(result)
    yield home
    mp.undo()


def test_every_record_of_the_export_is_counted(otel_day: Path) -> None:
    (rec,) = rows(otel_day, "quality", "ingest_reconciliation_daily", DAY, "source = 'otel'")
    # read: genai.jsonl 4 + 4 + 1 + 1 + 2 = 12 records, other.jsonl 2 + 1 = 3: 15
    # accepted A, D, E; quarantined line 3, span F, "not json"; merged the retry's A and D; skipped B and C twice,
    # line 4, and the two spans of other.jsonl: 2 * 2 + 1 + 2 = 7. 3 + 3 + 2 + 7 = 15
    assert (rec["rows_read"], rec["rows_accepted"], rec["rows_quarantined"], rec["duplicates_merged"],
            rec["skipped_not_request"], rec["balanced"]) == (15, 3, 3, 2, 7, True)
    reasons = {(Path(r["file"]).name, r["line"]): r["reason"]
               for r in rows(otel_day, "quality", "quarantine", DAY, "source = 'otel'")}
    assert set(reasons) == {("genai.jsonl", 3), ("genai.jsonl", 5), ("other.jsonl", 2)}
    assert reasons[("genai.jsonl", 5)].startswith("span f6f6f6f6f6f6f6f6: input_tokens")
    assert "-5" in reasons[("genai.jsonl", 5)]


def test_a_model_call_span_becomes_one_request(otel_day: Path) -> None:
    got = {r["request_id"]: r for r in rows(otel_day, "core", "gateway_requests", DAY, "source = 'otel'")}
    assert set(got) == {"a1a1a1a1a1a1a1a1", "d4d4d4d4d4d4d4d4", "e5e5e5e5e5e5e5e5"}
    a, d, e = got["a1a1a1a1a1a1a1a1"], got["d4d4d4d4d4d4d4d4"], got["e5e5e5e5e5e5e5e5"]
    assert (a["model"], a["deployment_id"], a["tenant_id"], a["session_id"]) \
        == ("gpt5", "gpt5-api", "support-bot", "conv-1")
    assert (a["input_tokens"], a["cached_input_tokens"], a["output_tokens"], a["reasoning_tokens"]) \
        == (10_000, 4_000, 2_000, 1_500)
    assert (a["e2e_ms"], a["ttft_ms"], a["latency_measured"], a["service_tier"]) == (2500, None, False, "priority")
    assert a["received_at"].isoformat() == "2026-11-16T10:00:00+00:00"
    # input includes the cache buckets, as the conventions define it: 2,000 = 1,200 uncached + 500 + 300
    assert (d["tenant_id"], d["input_tokens"], d["cached_input_tokens"], d["cache_write_tokens"]) \
        == ("batch-job", 2_000, 500, 300)
    assert (e["status"], e["error_type"], e["input_tokens"]) == ("rejected", "rate_limit_exceeded", 0)


def test_spans_are_priced_like_any_request(otel_day: Path) -> None:
    costs = {r["request_id"]: r["cost"] for r in rows(otel_day, "core", "api_request_costs", DAY)}
    # A at GPT-5's priority rate: 6,000 * 2.5 + 4,000 * 0.25 + 2,000 * 20 = 56,000 per 1M; D on opus's standard
    # rate: 1,200 * 5 + 500 * 0.50 + 300 * 6.25 + 100 * 25 = 6,000 + 250 + 1,875 + 2,500 = 10,625 per 1M; E was
    # rejected: never billed, not priced
    assert costs == {"a1a1a1a1a1a1a1a1": Decimal("0.056"), "d4d4d4d4d4d4d4d4": Decimal("0.010625")}


def test_a_file_is_never_loaded_into_python(otel_day: Path) -> None:
    # the prompt text of span A's gen_ai.input.messages is never read: not in any kept table
    text = json.dumps([rows(otel_day, "core", "gateway_requests", DAY),
                       rows(otel_day, "quality", "quarantine", DAY)], default=str)
    assert "SECRET" not in text


def test_a_span_twice_in_one_line_keeps_the_first_copy_and_quarantines_the_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One export request holding span A twice (a broken export, not a retry): the later copy is quarantined with
    its line and the day goes on (issue 56: both copies were accepted, then the day was blocked by the uniqueness
    rule, naming no file or line). 3 records read = 2 accepted (A, D) + 1 quarantined."""
    home = _home(tmp_path / "home")
    monkeypatch.setenv("TOKENLEDGER_HOME", str(home))
    write_jsonl(home / "raw" / "otel" / f"dt={DAY}" / "broken.jsonl", [_export(("bot", [SPAN_A, SPAN_D, SPAN_A]))])
    result = materialize(DAY, run_config=lenient(),
                         upto=["quality/ingest_reconciliation_daily", "quality/quarantine"])
    assert result.success, failure_text(result)
    (rec,) = rows(home, "quality", "ingest_reconciliation_daily", DAY, "source = 'otel'")
    assert (rec["rows_read"], rec["rows_accepted"], rec["rows_quarantined"], rec["duplicates_merged"],
            rec["balanced"]) == (3, 2, 1, 0, True)
    assert [(Path(r["file"]).name, r["line"], r["reason"])
            for r in rows(home, "quality", "quarantine", DAY, "source = 'otel'")] == [
        ("broken.jsonl", 1, "spanId: a1a1a1a1a1a1a1a1 appears more than once in this line (one export request); the "
                            "first copy is accounted")]
    assert sorted(r["request_id"] for r in rows(home, "core", "gateway_requests", DAY)) == [
        "a1a1a1a1a1a1a1a1", "d4d4d4d4d4d4d4d4"]
