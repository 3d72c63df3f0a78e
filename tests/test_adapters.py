"""Request sources read through an adapter (tokenledger/ingest/adapters/): LiteLLM spend logs, OpenAI responses and
Anthropic messages / Claude Code session logs, each landed as a hand-written file in its raw/<source>/ folder
(written from the documented shapes cited in each adapter's docstring) and run through Dagster.

One run over two days serves every test (each materialize costs seconds): 2026-11-16 holds a file of each format
with its quirks; 2026-11-17 holds the final records alone of the streamed OpenAI and Claude Code logs, to compare
their totals with the repeated records of the day before. The run keeps the default quarantine tolerance, so its
verdict on each source is part of what is tested.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import COSTS_YAML, DEPLOYMENTS_YAML, SLO_YAML, materialize, rows, write_jsonl
from tokenledger.contracts import load_contract
from tokenledger.ingest.adapters import adapters
from tokenledger.ingest.adapters.base import NOT_A_REQUEST
from tokenledger.packaged import contract_file, sql_file

DAY, DAY2 = "2026-11-16", "2026-11-17"
T10 = 1794823200  # 2026-11-16T10:00:00Z in Unix seconds
ONE_DAY = 86400
SELECTION = ["core/deployments_daily", "core/gateway_requests", "core/billing_charges", "quality/quarantine",
             "quality/ingest_reconciliation_daily"]


def raw_dir(home: Path, source: str, day: str) -> Path:
    return home / "raw" / source / f"dt={day}"


# --- LiteLLM: spend log rows, 1.110 as JSON Lines (row_to_json) and 1.80 as a psql CSV export ----------------------

def _spend(rid: str, start: str, end: str, first: str | None, **fields: Any) -> dict[str, Any]:
    row = {"request_id": rid, "call_type": "acompletion", "api_key": "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df77",
           "spend": 0.0, "total_tokens": 0, "prompt_tokens": 0, "completion_tokens": 0, "startTime": start,
           "endTime": end, "completionStartTime": first or end, "model": "hosted_vllm/m70", "model_group": "m70",
           "custom_llm_provider": "hosted_vllm", "user": "", "team_id": "", "end_user": "", "cache_hit": "False",
           "cache_key": "Cache OFF", "messages": {"content": "SECRET PROMPT"}, "response": {"text": "SECRET REPLY"},
           "status": "success", "metadata": {"status": "success"}}
    row.update(fields)
    return row


def _failure(code: str | int, error_class: str) -> dict[str, Any]:
    return {"status": "failure", "metadata": {"status": "failure", "usage_object": None, "error_information": {
        "error_code": code, "error_class": error_class, "llm_provider": "hosted_vllm",
        "error_message": "SECRET ERROR TEXT"}}}


LITELLM = [
    # 1: streamed, 1480 prompt tokens of which 1024 cached, 82 completion tokens of which 30 reasoning.
    _spend("chatcmpl-L1", "2026-11-16T12:00:00.120", "2026-11-16T12:00:02.945", "2026-11-16T12:00:00.610",
           spend=0.00324, prompt_tokens=1480, completion_tokens=82, total_tokens=1562, request_duration_ms=2825,
           team_id="team-a1", session_id="sess-L",
           metadata={"status": "success", "user_api_key_team_id": "team-a1", "usage_object": {
               "prompt_tokens": 1480, "completion_tokens": 82, "total_tokens": 1562,
               "prompt_tokens_details": {"cached_tokens": 1024},
               "completion_tokens_details": {"reasoning_tokens": 30}}}),
    # 2: a server that reports no cached tokens; no team, so the end user is the tenant.
    _spend("chatcmpl-L2", "2026-11-16T12:05:00.000", "2026-11-16T12:05:01.000", "2026-11-16T12:05:00.300",
           model="hosted_vllm/m8", model_group="m8", prompt_tokens=200, completion_tokens=50, total_tokens=250,
           end_user="cust-9", session_id="sess-L",
           metadata={"status": "success", "usage_object": {"prompt_tokens": 200, "completion_tokens": 50}}),
    # 3-5: failures without usage: a 429 (rejected), a 500 (error) and a timeout.
    _spend("7d0c2a8e-3b9f-4c61-a2d4-9e8f7a6b5c4d", "2026-11-16T12:10:00.000", "2026-11-16T12:10:00.050", None,
           team_id="team-a1", session_id="2f1e-only-once", **_failure("429", "RateLimitError")),
    _spend("8e1d3b9f-4c0a-4d72-b3e5-0f9a8b7c6d5e", "2026-11-16T12:11:00.000", "2026-11-16T12:11:00.400", None,
           team_id="team-a1", **_failure("500", "InternalServerError")),
    _spend("9f2e4c0a-5d1b-4e83-c4f6-1a0b9c8d7e6f", "2026-11-16T12:12:00.000", "2026-11-16T12:13:00.000", None,
           team_id="team-a1", **_failure("408", "Timeout")),
    # 6: answered from LiteLLM's own cache: the whole prompt counts as cached, nothing was generated.
    _spend("chatcmpl-L1_cache_hit1794830400.5", "2026-11-16T12:20:00.000", "2026-11-16T12:20:00.020",
           "2026-11-16T12:20:00.010", prompt_tokens=300, completion_tokens=40, total_tokens=340,
           team_id="team-a1", cache_hit="True"),
    # 7: Anthropic through an old LiteLLM, whose prompt_tokens (100) left out cache reads (4000) and writes (500).
    _spend("msg_01LiteOld", "2026-11-16T12:30:00.000", "2026-11-16T12:30:02.000", "2026-11-16T12:30:00.800",
           model="anthropic/m70", custom_llm_provider="anthropic", prompt_tokens=100, completion_tokens=60,
           team_id="team-a1",
           metadata={"status": "success", "additional_usage_values": {
               "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 500}}),
    # 8: a negative count: quarantined, naming LiteLLM's field.
    _spend("chatcmpl-L8", "2026-11-16T12:40:00.000", "2026-11-16T12:40:01.000", None, prompt_tokens=10,
           completion_tokens=-5, team_id="team-a1"),
]
LITELLM.append(LITELLM[0])  # 9: the same row written twice: one request, one merged

LITELLM_CSV_HEADER = ["request_id", "call_type", "spend", "prompt_tokens", "completion_tokens", "startTime",
                      "endTime", "completionStartTime", "model", "model_group", "custom_llm_provider", "team_id",
                      "end_user", "user", "metadata", "cache_hit", "session_id"]
LITELLM_CSV = [  # LiteLLM 1.80: no status column (metadata.status), no request_duration_ms, psql timestamps
    ["chatcmpl-C1", "acompletion", "0.0011", "800", "100", "2026-11-16 13:00:00.000", "2026-11-16 13:00:03.250",
     "2026-11-16 13:00:00.250", "hosted_vllm/m8", "m8", "hosted_vllm", "", "", "u-42",
     json.dumps({"status": "success", "usage_object": {"prompt_tokens_details": {"cached_tokens": 600}}}),
     "False", "3c1f-only-once"],
    ["c1d2e3f4-0000-4000-8000-000000000002", "acompletion", "0", "0", "0", "2026-11-16 13:05:00.000",
     "2026-11-16 13:05:00.200", "2026-11-16 13:05:00.200", "hosted_vllm/m8", "m8", "hosted_vllm", "team-b", "", "",
     json.dumps({"status": "failure", "error_information": {"error_code": 503,
                                                             "error_class": "ServiceUnavailableError"}}),
     "None", ""],
]


# --- OpenAI: Chat Completions objects and chunks, Responses objects, Batch output lines ---------------------------

def _chat(cid: str, created: int, model: str, usage: dict[str, Any] | None, chunk: bool = False) -> dict[str, Any]:
    choice = {"index": 0, "delta": {"content": "SECRET"}} if chunk else {
        "index": 0, "message": {"role": "assistant", "content": "SECRET REPLY"}, "finish_reason": "stop"}
    return {"id": cid, "object": "chat.completion.chunk" if chunk else "chat.completion", "created": created,
            "model": model, "system_fingerprint": "fp_1a2b3c", "choices": [] if chunk and usage else [choice],
            "usage": usage}


def _response(rid: str, created_at: float, status: str, usage: dict[str, Any] | None, **fields: Any) -> dict:
    return {"id": rid, "object": "response", "created_at": created_at, "status": status, "model": "m70",
            "error": None, "incomplete_details": None, "instructions": "SECRET INSTRUCTIONS",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "SECRET"}]}],
            "usage": usage, **fields}


STREAM_O3 = [  # three content chunks without usage, then the usage chunk (stream_options.include_usage)
    _chat("chatcmpl-O3", T10 + 60, "m8", None, chunk=True),
    _chat("chatcmpl-O3", T10 + 60, "m8", None, chunk=True),
    _chat("chatcmpl-O3", T10 + 60, "m8", None, chunk=True),
    _chat("chatcmpl-O3", T10 + 60, "m8", {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
                                          "prompt_tokens_details": {"cached_tokens": 64}}, chunk=True),
]
OPENAI = [
    # 1: 2006 prompt tokens of which 1920 cached; 300 completion tokens of which 256 reasoning.
    _chat("chatcmpl-O1", T10, "m70", {
        "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0}}),
    # 2: an OpenAI-compatible server that sends no details: cached 0, reasoning unknown.
    _chat("chatcmpl-O2", T10 + 30, "m8", {"prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600}),
    *STREAM_O3,  # 3-6
    # 7: a Response with cache reads and writes, reasoning inside output, and a tenant in its metadata.
    _response("resp_O4", T10 + 100.25, "completed", {
        "input_tokens": 5120, "input_tokens_details": {"cached_tokens": 4096, "cache_write_tokens": 512},
        "output_tokens": 880, "output_tokens_details": {"reasoning_tokens": 640}, "total_tokens": 6000},
        metadata={"tenant_id": "team-r"}),
    # 8: a failed Response: usage is null, so no tokens; the end user is the tenant.
    _response("resp_O5", T10 + 200, "failed", None, user="u-7",
              error={"code": "server_error", "message": "SECRET ERROR TEXT"}),
    # 9-10: a background Response polled while in progress, then completed: one request.
    _response("resp_O6", T10 + 300, "in_progress", None),
    _response("resp_O6", T10 + 300, "completed", {
        "input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 200,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1200}),
    # 11: a Batch output line around a chat completion.
    {"id": "batch_req_1", "custom_id": "job-42-row-1", "response": {"status_code": 200, "request_id": "req_b1",
     "body": _chat("chatcmpl-B1", T10 + 500, "m8", {"prompt_tokens": 24, "completion_tokens": 8,
                                                     "total_tokens": 32})}, "error": None},
    # 12: a Batch request that expired: no response, so no model or time; a failure of no model, never quarantined.
    {"id": "batch_req_2", "custom_id": "job-42-row-2", "response": None,
     "error": {"code": "batch_expired", "message": "This request could not be executed before the completion "
                                                   "window expired."}},
    # 13: a stream logged without stream_options.include_usage: its tokens are unknown; quarantined.
    _chat("chatcmpl-N", T10 + 600, "m8", None, chunk=True),
]


# --- Anthropic: Messages logged with their arrival time, and a Claude Code session log -----------------------------

def _message(mid: str, model: str, usage: dict[str, Any], stop: str | None = "end_turn", **fields: Any) -> dict:
    return {"id": mid, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "SECRET REPLY"}], "stop_reason": stop, "stop_sequence": None,
            "usage": usage, **fields}


MESSAGES = [
    # 1: input 12 + cache reads 48210 + cache writes 2051 = 50273, cached 48210.
    _message("msg_A1", "m70", {"input_tokens": 12, "cache_creation_input_tokens": 2051,
                               "cache_read_input_tokens": 48210, "output_tokens": 503, "service_tier": "standard",
                               "cache_creation": {"ephemeral_5m_input_tokens": 2051, "ephemeral_1h_input_tokens": 0}},
             timestamp="2026-11-16T09:00:00Z", tenant_id="team-x"),
    # 2: no cache fields at all (an older API version): input 300, cached 0, cache writes unknown; Unix seconds.
    _message("msg_A2", "m8", {"input_tokens": 300, "output_tokens": 20}, timestamp=T10 - 3600),
    # 3: writes split by TTL (100 for 5 minutes + 400 for 1 hour = 500); 7 output tokens, 5 of them thinking.
    _message("msg_A3", "m70", {"input_tokens": 10, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 0,
                               "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 400},
                               "output_tokens": 7, "output_tokens_details": {"thinking_tokens": 5}},
             timestamp="2026-11-16T09:30:00Z"),
    # 4: an error body logged alone: the failed call names no model; counted as a failure of no model.
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_011E",
     "timestamp": "2026-11-16T09:40:00Z"},
    # 5: a Message logged without the time it arrived: quarantined.
    _message("msg_A5", "m8", {"input_tokens": 5, "output_tokens": 5}),
]


def _cc(kind: str, at: str, message: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    record = {"parentUuid": "3f0b6c1e", "isSidechain": False, "userType": "external", "cwd": "/home/dev/repo",
              "sessionId": "d25fe96c-sess-1", "version": "2.1.63", "gitBranch": "main", "type": kind,
              "uuid": f"u-{at}", "timestamp": at, **fields}
    if message is not None:
        record["message"] = message
    return record


def _reply(mid: str, block: str, stop: str | None, usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": mid, "type": "message", "role": "assistant", "model": "m70",
            "content": [{"type": block, "text": "SECRET"}], "stop_reason": stop, "usage": usage}


C1_EARLY = {"input_tokens": 2, "cache_creation_input_tokens": 812, "cache_read_input_tokens": 61608, "output_tokens": 5}
C1_FINAL = {**C1_EARLY, "output_tokens": 211}
C2_FINAL = {"input_tokens": 4, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 62420, "output_tokens": 90}
PROMPT = {"role": "user", "content": "SECRET PROMPT"}


def _session(day: str, final_only: bool) -> list[dict[str, Any]]:
    """A Claude Code session: two replies, the first written as three records (thinking, text, tool use) whose
    output grows from 5 to 211 tokens, the second replayed by a sidechain; prompts, a summary and a rate-limit
    notice beside them. `final_only` keeps each reply's final record alone."""
    at = f"{day}T10:31:"
    c1 = [_cc("assistant", at + "43.399Z", _reply("msg_C1", "thinking", None, C1_EARLY), requestId="req_011C1"),
          _cc("assistant", at + "44.020Z", _reply("msg_C1", "text", None, C1_FINAL), requestId="req_011C1"),
          _cc("assistant", at + "44.551Z", _reply("msg_C1", "tool_use", "tool_use", C1_FINAL), requestId="req_011C1")]
    c2 = [_cc("assistant", at + "50.000Z", _reply("msg_C2", "text", "end_turn", C2_FINAL), requestId="req_011C2"),
          _cc("assistant", f"{day}T10:32:10.000Z", _reply("msg_C2", "text", "end_turn", C2_FINAL),
              requestId="req_011C9", isSidechain=True)]
    records = [_cc("user", at + "40.000Z", PROMPT), *(c1[-1:] if final_only else c1),
               _cc("user", at + "45.000Z", {"role": "user", "content": [{"type": "tool_result", "content": "SECRET"}]}),
               *(c2[:1] if final_only else c2),
               {"type": "summary", "summary": "SECRET SUMMARY", "leafUuid": "u-leaf"}]
    if not final_only:
        records.append(_cc("assistant", f"{day}T10:40:00.000Z", {
            "id": "2b9e-synthetic", "model": "<synthetic>", "role": "assistant",
            "content": [{"type": "text", "text": "You've hit your limit"}],
            "usage": {"input_tokens": 0, "output_tokens": 0}}, isApiErrorMessage=True, error="rate_limit"))
    return records


# --- the shared run ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """A home with every file above landed, and the result of one run over both days."""
    home = tmp_path_factory.mktemp("adapters") / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML)
    (home / "config" / "slo.yaml").write_text(SLO_YAML)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML)
    (home / "raw" / "billing").mkdir(parents=True)
    write_jsonl(raw_dir(home, "litellm", DAY) / "spend_logs.jsonl", LITELLM)
    with (raw_dir(home, "litellm", DAY) / "spend_logs_1_80.csv").open("w", newline="") as f:
        csv.writer(f).writerows([LITELLM_CSV_HEADER, *LITELLM_CSV])
    write_jsonl(raw_dir(home, "openai", DAY) / "responses.jsonl", OPENAI)
    write_jsonl(raw_dir(home, "anthropic", DAY) / "messages.jsonl", MESSAGES)
    write_jsonl(raw_dir(home, "anthropic", DAY) / "d25fe96c-sess-1.jsonl.gz", _session(DAY, final_only=False))
    # The next day: the final records alone, one day later.
    write_jsonl(raw_dir(home, "openai", DAY2) / "responses.jsonl",
                [{**STREAM_O3[-1], "created": T10 + ONE_DAY + 60}])
    write_jsonl(raw_dir(home, "anthropic", DAY2) / "d25fe96c-sess-1.jsonl", _session(DAY2, final_only=True))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(DAY, DAY2, selection=SELECTION)
        yield home, result


def _accepted(home: Path, source: str, day: str = DAY) -> dict[str, dict[str, Any]]:
    return {r["request_id"]: r for r in rows(home, "core", "gateway_requests", day, where=f"source = '{source}'")}


def _quarantined(home: Path, source: str, day: str = DAY) -> dict[tuple[str, int], str]:
    return {(Path(r["file"]).name, r["line"]): r["reason"]
            for r in rows(home, "quality", "quarantine", day, where=f"source = '{source}'")}


def _recon(home: Path, source: str, day: str = DAY) -> tuple[int, int, int, int, int, int, bool]:
    """Rows read, accepted, quarantined, merged, skipped as not requests, failures that name no model, and whether
    they balance."""
    r = rows(home, "quality", "ingest_reconciliation_daily", day, where=f"source = '{source}'")[0]
    return (r["rows_read"], r["rows_accepted"], r["rows_quarantined"], r["duplicates_merged"],
            r["skipped_not_request"], r["failures_no_model"], r["balanced"])


def _notes(home: Path, source: str, day: str = DAY) -> str | None:
    return rows(home, "quality", "ingest_reconciliation_daily", day, where=f"source = '{source}'")[0]["notes"]


def _figures(r: dict[str, Any]) -> tuple:
    """input, cached, recomputed (input - cached), cache writes, output, reasoning."""
    return (r["input_tokens"], r["cached_input_tokens"], r["input_tokens"] - r["cached_input_tokens"],
            r["cache_write_tokens"], r["output_tokens"], r["reasoning_tokens"])


def _statuses(accepted: dict[str, dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in accepted.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def test_litellm_spend_logs(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    got = _accepted(home, "litellm")
    # prompt 1480 with 1024 cached: 456 recomputed; 82 out, 30 of them reasoning (kept beside, not added).
    assert _figures(got["chatcmpl-L1"]) == (1480, 1024, 456, None, 82, 30)
    # TTFT = completionStartTime - startTime = 00.610 - 00.120; e2e = request_duration_ms.
    assert (got["chatcmpl-L1"]["ttft_ms"], got["chatcmpl-L1"]["e2e_ms"]) == (490.0, 2825.0)
    assert (got["chatcmpl-L1"]["tenant_id"], got["chatcmpl-L1"]["source_cost"]) == ("team-a1", Decimal("0.00324"))
    assert got["chatcmpl-L1"]["latency_measured"] is True and got["chatcmpl-L1"]["model"] == "m70"
    # No cached tokens reported: 0. No team: the end user. e2e = endTime - startTime (no request_duration_ms).
    assert _figures(got["chatcmpl-L2"]) == (200, 0, 200, None, 50, None)
    assert (got["chatcmpl-L2"]["ttft_ms"], got["chatcmpl-L2"]["e2e_ms"]) == (300.0, 1000.0)
    assert (got["chatcmpl-L2"]["tenant_id"], got["chatcmpl-L2"]["deployment_id"]) == ("cust-9", "m8-onprem")
    # sess-L repeats (rows 1 and 2): kept; a session id seen once is LiteLLM's per-request uuid: dropped.
    assert got["chatcmpl-L1"]["session_id"] == got["chatcmpl-L2"]["session_id"] == "sess-L"
    assert got["7d0c2a8e-3b9f-4c61-a2d4-9e8f7a6b5c4d"]["session_id"] is None
    failures = {(r["status"], r["http_status"], r["error_type"], r["input_tokens"], r["output_tokens"])
                for r in got.values() if r["status"] != "ok"}
    # by kind (sql/common/failure_status.sql): a 429 and a 503 were refused before any model work, so rejected
    assert failures == {("rejected", 429, "RateLimitError", 0, 0), ("error", 500, "InternalServerError", 0, 0),
                        ("timeout", 408, "Timeout", 0, 0), ("rejected", 503, "ServiceUnavailableError", 0, 0)}
    # LiteLLM's own cache: all 300 prompt tokens cached, nothing generated.
    assert _figures(got["chatcmpl-L1_cache_hit1794830400.5"]) == (300, 300, 0, None, 0, 0)
    # Old LiteLLM + Anthropic: 100 + 4000 reads + 500 writes = 4600 input, 4000 cached, 600 recomputed.
    assert _figures(got["msg_01LiteOld"]) == (4600, 4000, 600, 500, 60, None)
    assert (got["msg_01LiteOld"]["ttft_ms"], got["msg_01LiteOld"]["e2e_ms"]) == (800.0, 2000.0)
    # The 1.80 CSV: psql timestamps, metadata as JSON text; 800 prompt, 600 cached; tenant = user u-42.
    assert _figures(got["chatcmpl-C1"]) == (800, 600, 200, None, 100, None)
    assert (got["chatcmpl-C1"]["ttft_ms"], got["chatcmpl-C1"]["e2e_ms"], got["chatcmpl-C1"]["tenant_id"]) \
        == (250.0, 3250.0, "u-42")
    assert _statuses(got) == {"ok": 5, "rejected": 2, "error": 1, "timeout": 1}
    assert _quarantined(home, "litellm") == {
        ("spend_logs.jsonl", 8): "completion_tokens: -5 is below the minimum 0"}
    # 9 JSON lines + 2 CSV rows = 11 read: 9 accepted, line 8 quarantined, line 9 (a copy of line 1) merged.
    assert _recon(home, "litellm") == (11, 9, 1, 1, 0, 0, True)


def test_openai_responses(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    got = _accepted(home, "openai")
    # Cached tokens are part of the input: 2006 - 1920 = 86 recomputed; 256 reasoning inside the 300 output.
    assert _figures(got["chatcmpl-O1"]) == (2006, 1920, 86, None, 300, 256)
    assert got["chatcmpl-O1"]["received_at"].isoformat() == "2026-11-16T10:00:00+00:00"
    assert _figures(got["chatcmpl-O2"]) == (500, 0, 500, None, 100, None)  # no details reported: 0 cached
    assert _figures(got["chatcmpl-O3"]) == (120, 64, 56, None, 40, None)  # the usage chunk of the stream
    assert _figures(got["resp_O4"]) == (5120, 4096, 1024, 512, 880, 640)
    assert got["resp_O4"]["received_at"].isoformat() == "2026-11-16T10:01:40.250000+00:00"
    assert _figures(got["resp_O6"]) == (1000, 0, 1000, None, 200, 0)  # the completed copy, not the snapshot
    assert _figures(got["chatcmpl-B1"]) == (24, 0, 24, None, 8, None)  # inside a Batch output line
    assert (got["resp_O5"]["status"], got["resp_O5"]["error_type"], got["resp_O5"]["input_tokens"],
            got["resp_O5"]["output_tokens"]) == ("error", "server_error", 0, 0)
    assert {rid: r["tenant_id"] for rid, r in got.items() if r["tenant_id"] != "unattributed"} \
        == {"resp_O4": "team-r", "resp_O5": "u-7"}
    # No latency in any of them: not judged against the SLO, TTFT and e2e unknown.
    assert {(r["latency_measured"], r["ttft_ms"], r["e2e_ms"]) for r in got.values()} == {(False, None, None)}
    assert _statuses(got) == {"ok": 6, "error": 1}
    assert _quarantined(home, "openai") == {
        ("responses.jsonl", 13): "usage: missing on every chunk of this stream: request it with "
                                 "stream_options.include_usage",
    }
    # 13 lines: 7 requests accepted, line 13 quarantined, 3 chunks of chatcmpl-O3 and the resp_O6 snapshot merged
    # into their final copies, and line 12, the expired Batch request, a failure that names no model: refused
    # before it ran, so rejected.
    assert _recon(home, "openai") == (13, 7, 1, 4, 0, 1, True)
    assert _notes(home, "openai") == "failures that name no model: rejected 1 (batch_expired)"


def test_anthropic_messages_and_claude_code_sessions(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    got = _accepted(home, "anthropic")
    # input_tokens excludes the cache: 12 + 48210 + 2051 = 50273; recomputed 50273 - 48210 = 12 + 2051 = 2063.
    assert _figures(got["msg_A1"]) == (50273, 48210, 2063, 2051, 503, None)
    assert got["msg_A1"]["tenant_id"] == "team-x"
    assert _figures(got["msg_A2"]) == (300, 0, 300, None, 20, None)  # no cache fields: 0 cached, writes unknown
    assert got["msg_A2"]["received_at"].isoformat() == "2026-11-16T09:00:00+00:00"  # Unix seconds
    assert _figures(got["msg_A3"]) == (510, 0, 510, 500, 7, 5)  # 10 + 0 + 500; 5 thinking inside 7
    # Claude Code: 2 + 61608 + 812 = 62422 input; the final output 211, not the early 5 nor 211 counted thrice.
    assert _figures(got["msg_C1"]) == (62422, 61608, 814, 812, 211, None)
    assert got["msg_C1"]["received_at"].isoformat() == "2026-11-16T10:31:43.399000+00:00"  # the first record
    assert _figures(got["msg_C2"]) == (62424, 62420, 4, 0, 90, None)
    assert {got[m]["session_id"] for m in ("msg_C1", "msg_C2")} == {"d25fe96c-sess-1"}
    assert {(r["status"], r["latency_measured"], r["ttft_ms"]) for r in got.values()} == {("ok", False, None)}
    # Records Claude Code writes beside its replies by design (prompts, tool results, a summary) are skipped and
    # failed calls (an error body, a rate-limit notice) counted, none quarantined: only the bad line is.
    assert _quarantined(home, "anthropic") == {
        ("messages.jsonl", 5): "timestamp: missing: a Message carries no time of its own; log the time its response "
                               "arrived beside it as timestamp (ISO 8601 or Unix seconds)",
    }
    # 5 message lines + 9 session lines = 14 read: 5 accepted, 1 quarantined, 3 merged (msg_C1's two earlier
    # records, msg_C2's sidechain replay), 3 skipped (lines 1 and 5: user, 8: summary) and 2 failures that name no
    # model: the overloaded error body (line 4) and Claude Code's rate-limit notice (line 9 of the session).
    assert _recon(home, "anthropic") == (14, 5, 1, 3, 3, 2, True)
    assert _notes(home, "anthropic") == \
        "failures that name no model: rejected 1 (overloaded_error), rejected 1 (rate_limit)"


def test_repeated_records_total_the_same_as_the_final_records_alone(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    streamed = ("chatcmpl-O3", "msg_C1", "msg_C2")

    def totals(day: str) -> tuple[int, ...]:
        got = [r for r in rows(home, "core", "gateway_requests", day) if r["request_id"] in streamed]
        return (len(got), *(sum(r[k] or 0 for r in got) for k in ("input_tokens", "cached_input_tokens",
                                                                  "cache_write_tokens", "output_tokens")))

    # 3 requests: 120 + 62422 + 62424 input, 64 + 61608 + 62420 cached, 812 writes, 40 + 211 + 90 output.
    assert totals(DAY) == totals(DAY2) == (3, 124966, 124092, 812, 341)
    assert _recon(home, "anthropic", DAY2) == (5, 2, 0, 0, 3, 0, True)  # the 3 skipped: 2 prompts and a summary
    assert _recon(home, "openai", DAY2) == (1, 1, 0, 0, 0, 0, True)


def test_records_that_are_not_requests_are_neither_quarantined_nor_held_against_the_tolerance(
        landed: tuple[Path, Any]) -> None:
    _, result = landed
    # A ranged run evaluates each check on each of its days (the failed day's evaluation kept).
    checks = {e.event_specific_data.asset_check_key.name: e.event_specific_data
              for e in sorted((e for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"),
                              key=lambda e: not e.event_specific_data.passed)}
    assert checks["ingest_reconciliation_balanced"].passed
    tolerance = checks["quarantine_within_tolerance"]
    # On the 16th each format quarantines real failures on purpose, far above 0.1%; the anthropic source is held
    # to its 2 bad lines of 14, its 4 records that are not requests are skipped. The 17th quarantines nothing.
    assert not tolerance.passed
    assert "2026-11-16 anthropic: 1 of 14 rows (7.14%) quarantined" in tolerance.description
    assert "2026-11-16 litellm: 1 of 11 rows" in tolerance.description
    assert "2026-11-16 openai: 1 of 13 rows" in tolerance.description
    assert "2026-11-17" not in tolerance.description
    # The warning lists the quarantined rows only: the 17th's prompts and summary are not among them.
    warning = checks["quarantine_empty"].description
    assert "2026-11-16 anthropic: 1 row(s) quarantined" in warning and "2026-11-17" not in warning


def test_prompt_and_reply_text_are_never_stored(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    for path in (home / "lake").rglob("*.parquet"):
        assert b"SECRET" not in path.read_bytes(), path


def test_every_adapter_maps_every_canonical_field_and_is_a_known_source() -> None:
    canonical = load_contract("gateway_request").table().column_names
    for contract in ("quality_quarantine", "quality_ingest_reconciliation_daily"):
        doc = yaml.safe_load(contract_file(contract).read_text())
        source = next(p for p in doc["schema"][0]["properties"] if p["name"] == "source")
        assert set(adapters()) <= set(source["quality"][0]["arguments"]["validValues"]), contract
    for adapter in [a for top in adapters().values() for a in (top, *top.variants)]:
        name = adapter.mapping
        mapping = sql_file(adapter.mapping).read_text()
        assert [c for c in canonical if f"{c}__text" not in mapping or f"{c}__kind" not in mapping] == [], name
        assert "not_request" in mapping and "source_note" in mapping, name
        assert all(c.paths for c in load_contract(adapter.contract).table().columns), name
        assert set(adapter.labels) <= set(canonical), name
        assert adapter.kinds, name
    for name in ("adapt_anthropic", "adapt_codex"):
        assert f"'{NOT_A_REQUEST}: " in sql_file(name).read_text(), name


def test_a_line_of_an_adapter_file_that_does_not_parse_is_quarantined_with_its_number(tmp_path: Path) -> None:
    # A line that starts like an object is parsed once, by the adapter's reader; one that cannot be an object is
    # judged by sql/ingest/gateway_lines.sql. Either way the line is a row with its number and reason, never lost.
    import duckdb

    from tokenledger.ingest.landing import landing_files
    from tokenledger.ingest.sources import request_sources, stage_gateway_files

    title, formats, adapter = request_sources()["litellm"]
    folder = tmp_path / "raw"
    folder.mkdir()
    valid = json.dumps(LITELLM[0])
    (folder / "spend.jsonl").write_text("\n".join([valid, '{"request_id": "x", ', "[1, 2]", valid[:-1] + "} x"]) + "\n")
    con = duckdb.connect()
    staged = stage_gateway_files(con, landing_files(folder, formats, title), tmp_path / "stage", adapter)
    got = dict(con.execute("SELECT source_line, reason FROM read_parquet($f) ORDER BY 1",
                           {"f": [str(p) for p in staged]}).fetchall())
    assert got[1] is None
    assert got[2] == "line is not valid JSON"
    assert got[3] == "line is a JSON array, not an object"
    assert got[4] == "line is not valid JSON"


def test_a_line_nested_deeper_than_python_parses_leaves_detection_to_the_reader(tmp_path: Path) -> None:
    """Detection reads a folder's first records with Python's json, which cannot parse 200,000 nested arrays
    (RecursionError, which crashed the day as a failure inside tokenledger, issue 56): such a line says nothing of
    the file's format, so the next records decide, and the reader quarantines the line itself."""
    from tokenledger.ingest.adapters.detect import sniff

    deep = '{"a": ' + "[" * 200_000 + "]" * 200_000 + "}"
    openai = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt5", "created": 1794823200,
              "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    path = write_jsonl(tmp_path / "deep.jsonl", [deep, openai])
    assert sniff(path) == "openai"
    assert sniff(write_jsonl(tmp_path / "only.jsonl", [deep])) is None
