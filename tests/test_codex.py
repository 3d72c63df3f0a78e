"""Codex CLI session logs in raw/openai/ (issue 41), reasoning tokens carried to the published tables, and records
that are not requests counted apart from quarantine (issue 42, item 4).

The Codex lines follow openai/codex's codex-rs/protocol/src/protocol.rs (RolloutLine = timestamp + RolloutItem,
tagged `type`, content `payload`; TokenCountEvent's `info` = TokenUsageInfo with last_token_usage and
total_token_usage, each a TokenUsage of input, cached input, output, reasoning output and total tokens). One run
over two days serves the tests: 2026-11-16 holds a clean Codex session beside OpenAI responses with reasoning and
a Claude Code session; 2026-11-17 a Codex session whose turns do not add up to its last cumulative total.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import lenient, materialize, rows, write_jsonl
from tokenledger.errors import InputFileError
from tokenledger.ingest.adapters import adapters
from tokenledger.ingest.landing import landing_files
from tokenledger.ingest.sources import request_sources, stage_gateway_files

DAY, DAY2 = "2026-11-16", "2026-11-17"
T10 = 1794823200  # 2026-11-16T10:00:00Z in Unix seconds
S1, S2 = "0199a213-81c0-7800-8aa1-bbab2a035a53", "0199b7e4-2d15-7c21-9f3e-5a6b7c8d9e0f"
TABLES = ["core/gateway_requests", "quality/quarantine", "quality/ingest_reconciliation_daily",
          "infra/token_split_daily", "infra/token_split_hourly", "finance/tenant_showback_daily"]


def raw_dir(home: Path, source: str, day: str) -> Path:
    return home / "raw" / source / f"dt={day}"


# --- Codex CLI rollout lines -----------------------------------------------------------------------------------

def _line(at: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": at, "type": kind, "payload": payload}


def _usage(inp: int, cached: int, out: int, reasoning: int) -> dict[str, int]:
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": reasoning, "total_tokens": inp + out}


def _tokens(at: str, last: dict[str, int], total: dict[str, int]) -> dict[str, Any]:
    return _line(at, "event_msg", {"type": "token_count", "info": {
        "last_token_usage": last, "total_token_usage": total, "model_context_window": 272000},
        "rate_limits": {"primary": {"used_percent": 12.0, "window_minutes": 300, "resets_at": T10 + 9000}}})


def _meta(day: str, session: str) -> dict[str, Any]:
    return _line(f"{day}T10:00:00.000Z", "session_meta", {
        "id": session, "timestamp": f"{day}T10:00:00.000Z", "cwd": "/home/dev/SECRET-repo",
        "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": "SECRET INSTRUCTIONS",
        "source": "cli", "model_provider": "openai"})


def _context(day: str, at: str) -> dict[str, Any]:
    return _line(f"{day}T{at}", "turn_context", {
        "cwd": "/home/dev/SECRET-repo", "approval_policy": "on-request", "sandbox_policy": {"mode": "workspace-write"},
        "model": "m8", "effort": "medium", "summary": "auto"})


T1, T2, T3 = _usage(4000, 0, 600, 384), _usage(5200, 3968, 250, 128), _usage(6000, 5120, 90, 0)
CODEX = [
    _meta(DAY, S1),  # 1
    _context(DAY, "10:00:00.100Z"),  # 2
    _line(f"{DAY}T10:00:01.000Z", "response_item", {  # 3
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "SECRET PROMPT"}]}),
    _line(f"{DAY}T10:00:01.010Z", "event_msg", {"type": "user_message", "message": "SECRET PROMPT"}),  # 4
    _line(f"{DAY}T10:00:01.500Z", "event_msg", {"type": "token_count", "info": None,  # 5: rate limits only
                                               "rate_limits": {"primary": {"used_percent": 11.0}}}),
    _line(f"{DAY}T10:00:04.000Z", "response_item", {"type": "reasoning", "summary": [],  # 6
                                                    "encrypted_content": "SECRET"}),
    _tokens(f"{DAY}T10:00:05.000Z", T1, T1),  # 7: turn 1
    _line(f"{DAY}T10:00:05.100Z", "event_msg", {"type": "agent_message", "message": "SECRET REPLY"}),  # 8
    _tokens(f"{DAY}T10:00:09.000Z", T2, _usage(9200, 3968, 850, 512)),  # 9: turn 2
    _tokens(f"{DAY}T10:00:09.200Z", T2, _usage(9200, 3968, 850, 512)),  # 10: the same event again: merged
    '{"timestamp": "2026-11-16T10:00:10.000Z", "type": "event_msg", "payload": {"type": "token_c',  # 11: cut short
    _context(DAY, "10:01:00.000Z"),  # 12
    _line(f"{DAY}T10:01:00.500Z", "compacted", {"message": "SECRET SUMMARY"}),  # 13
    _tokens(f"{DAY}T10:01:04.000Z", T3, _usage(15200, 9088, 940, 512)),  # 14: turn 3
    _line(f"{DAY}T10:01:04.100Z", "event_msg", {"type": "task_complete", "last_agent_message": "SECRET"}),  # 15
]
# The next day: a session whose second turn's cumulative total counts 500 more input than its turns hold (a
# turn of a resumed session that is not in this file).
CODEX_GAP = [
    _meta(DAY2, S2),
    _context(DAY2, "08:00:00.100Z"),
    _tokens(f"{DAY2}T08:00:05.000Z", _usage(1000, 0, 100, 0), _usage(1000, 0, 100, 0)),
    _tokens(f"{DAY2}T08:00:09.000Z", _usage(2000, 1000, 50, 20), _usage(3500, 1000, 150, 20)),
]


# --- OpenAI responses with reasoning, beside the Codex log -----------------------------------------------------

def _response(rid: str, created_at: int, tenant: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": created_at, "status": "completed", "model": "m8",
            "metadata": {"tenant_id": tenant}, "output": [{"type": "message", "content": "SECRET"}], "usage": usage}


OPENAI = [
    # 2000 prompt tokens (1024 cached), 300 completion tokens of which 192 reasoning; a chat completion: no tenant.
    {"id": "chatcmpl-R1", "object": "chat.completion", "created": T10, "model": "m8", "choices": [], "usage": {
        "prompt_tokens": 2000, "completion_tokens": 300, "total_tokens": 2300,
        "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 192}}},
    # a Response of team-r: 500 output tokens, 320 of them reasoning
    _response("resp_R2", T10 + 60, "team-r", {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0},
                                              "output_tokens": 500, "output_tokens_details": {"reasoning_tokens": 320},
                                              "total_tokens": 1500}),
    # a server that reports no details: team-n's reasoning is unknown (NULL), not 0
    _response("resp_R3", T10 + 120, "team-n", {"input_tokens": 400, "output_tokens": 100, "total_tokens": 500}),
]


# --- a Claude Code session: replies, prompts, a summary and a line cut short -----------------------------------

def _cc(kind: str, at: str, message: dict[str, Any] | None = None) -> dict[str, Any]:
    record = {"parentUuid": "3f0b6c1e", "isSidechain": False, "userType": "external", "cwd": "/home/dev/repo",
              "sessionId": "k-sess", "version": "2.1.63", "type": kind, "uuid": f"u-{at}", "timestamp": at}
    return {**record, "message": message} if message is not None else record


def _reply(mid: str, block: str, stop: str | None) -> dict[str, Any]:
    usage = {"msg_K1": {"input_tokens": 3, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
                        "output_tokens": 50},
             "msg_K2": {"input_tokens": 5, "cache_read_input_tokens": 1200, "cache_creation_input_tokens": 0,
                        "output_tokens": 40}}[mid]
    return {"id": mid, "type": "message", "role": "assistant", "model": "m70",
            "content": [{"type": block, "text": "SECRET"}], "stop_reason": stop, "usage": usage}


CLAUDE_CODE = [
    _cc("user", f"{DAY}T09:00:00.000Z", {"role": "user", "content": "SECRET PROMPT"}),  # 1
    _cc("assistant", f"{DAY}T09:00:02.000Z", _reply("msg_K1", "thinking", None)),  # 2: merged into 3
    _cc("assistant", f"{DAY}T09:00:03.000Z", _reply("msg_K1", "text", "end_turn")),  # 3
    _cc("user", f"{DAY}T09:00:04.000Z", {"role": "user", "content": [{"type": "tool_result", "content": "SECRET"}]}),
    _cc("assistant", f"{DAY}T09:00:06.000Z", _reply("msg_K2", "text", "end_turn")),  # 5
    '{"type": "assistant", "sessionId": "k-sess", "message": {"id": "msg_K3", ',  # 6: cut short
    {"type": "summary", "summary": "SECRET SUMMARY", "leafUuid": "u-leaf"},  # 7
]


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    from tests.conftest import make_home

    home = make_home(tmp_path_factory.mktemp("codex") / "home")
    write_jsonl(raw_dir(home, "openai", DAY) / f"rollout-2026-11-16T10-00-00-{S1}.jsonl", CODEX)
    write_jsonl(raw_dir(home, "openai", DAY) / "responses.jsonl", OPENAI)
    write_jsonl(raw_dir(home, "anthropic", DAY) / "k-sess.jsonl", CLAUDE_CODE)
    write_jsonl(raw_dir(home, "openai", DAY2) / f"rollout-2026-11-17T08-00-00-{S2}.jsonl.gz", CODEX_GAP)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        # The cut-short lines are quarantined on purpose, far above the 0.1% tolerance.
        yield home, materialize(DAY, DAY2, upto=TABLES, run_config=lenient())


def _recon(home: Path, source: str, day: str = DAY) -> tuple:
    r = rows(home, "quality", "ingest_reconciliation_daily", day, where=f"source = '{source}'")[0]
    return (r["rows_read"], r["rows_accepted"], r["rows_quarantined"], r["duplicates_merged"],
            r["skipped_not_request"], r["balanced"], r["notes"])


def _quarantined(home: Path, source: str, day: str = DAY) -> dict[tuple[str, int], str]:
    return {(Path(r["file"]).name, r["line"]): r["reason"]
            for r in rows(home, "quality", "quarantine", day, where=f"source = '{source}'")}


def test_a_codex_session_is_one_request_per_turn(landed: tuple[Path, Any]) -> None:
    home, result = landed
    assert result.success
    got = {r["request_id"]: r for r in rows(home, "core", "gateway_requests", DAY,
                                            where="source = 'openai' AND request_id LIKE '0199%'")}
    figures = {rid: (r["input_tokens"], r["cached_input_tokens"], r["output_tokens"], r["reasoning_tokens"])
               for rid, r in got.items()}
    # input includes cached; reasoning is a part of output, kept beside it.
    assert figures == {f"{S1}:1": (4000, 0, 600, 384), f"{S1}:2": (5200, 3968, 250, 128),
                       f"{S1}:3": (6000, 5120, 90, 0)}
    assert {(r["model"], r["deployment_id"], r["session_id"], r["tenant_id"], r["status"], r["latency_measured"],
             r["cache_write_tokens"]) for r in got.values()} == {("m8", "m8-onprem", S1, "unattributed", "ok", False,
                                                                  None)}
    # Turn 2's first copy (line 9) is kept: both copies map to its values and time.
    assert got[f"{S1}:2"]["received_at"].isoformat() == "2026-11-16T10:00:09+00:00"
    assert {r["request_id"]: r["source_line"] for r in got.values()}[f"{S1}:3"] == 14
    assert _quarantined(home, "openai") == {(f"rollout-2026-11-16T10-00-00-{S1}.jsonl", 11): "line is not valid JSON"}
    # 15 Codex lines + 3 responses = 18 read: 3 turns + 3 responses accepted, line 11 quarantined, line 10 merged
    # into line 9, and 10 records skipped (session_meta, 2 turn_context, 2 response_item, user_message, the
    # token_count without info, agent_message, compacted, task_complete). The turns add up: no note.
    assert _recon(home, "openai") == (18, 6, 1, 1, 10, True, None)


def test_a_session_whose_turns_do_not_add_up_is_reported_with_its_file(landed: tuple[Path, Any]) -> None:
    home, result = landed
    got = {r["request_id"]: (r["input_tokens"], r["cached_input_tokens"], r["output_tokens"], r["reasoning_tokens"])
           for r in rows(home, "core", "gateway_requests", DAY2)}
    assert got == {f"{S2}:1": (1000, 0, 100, 0), f"{S2}:2": (2000, 1000, 50, 20)}  # accepted as they are
    # the file named by its place in the home, as every home that ran it publishes it
    path = f"raw/openai/dt={DAY2}/rollout-2026-11-17T08-00-00-{S2}.jsonl.gz"
    note = (f"{path}: its 2 turn(s) add up to input 3000, cached 1000, output 150, reasoning 20, total 3150 tokens, "
            "but its last total_token_usage says input 3500, cached 1000, output 150, reasoning 20, total 3650: a "
            "turn is not in the file (a session resumed from another file, or a file cut short); its turns are "
            "accepted as they are")
    assert _recon(home, "openai", DAY2) == (4, 2, 0, 0, 2, True, note)
    checks = {e.event_specific_data.asset_check_key.name: e.event_specific_data for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert not checks["source_notes_empty"].passed
    assert checks["source_notes_empty"].description == f"2026-11-17 openai: {note}"


def test_claude_code_records_that_are_not_requests_are_skipped_not_quarantined(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    got = {r["request_id"]: (r["input_tokens"], r["cached_input_tokens"], r["output_tokens"])
           for r in rows(home, "core", "gateway_requests", DAY, where="source = 'anthropic'")}
    assert got == {"msg_K1": (1203, 1000, 50), "msg_K2": (1205, 1200, 40)}  # 3 + 1000 + 200; 5 + 1200 + 0
    # Only the line cut short is quarantined: the two user records and the summary are skipped.
    assert _quarantined(home, "anthropic") == {("k-sess.jsonl", 6): "line is not valid JSON"}
    # 7 lines: 2 accepted, 1 quarantined, 1 merged (msg_K1's thinking record), 3 skipped.
    assert _recon(home, "anthropic") == (7, 2, 1, 1, 3, True, None)


def test_reasoning_tokens_reach_the_token_split_and_the_showback(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    split = {r["model"]: r for r in rows(home, "infra", "token_split_daily", DAY)}
    # m8: the 3 responses and the 3 Codex turns. Output keeps its value (reasoning inside, not added): 300 + 500 +
    # 100 + 600 + 250 + 90 = 1840; reasoning 192 + 320 + 384 + 128 + 0 = 1024 (resp_R3 reports none).
    assert (split["m8"]["requests"], split["m8"]["input_total"], split["m8"]["input_cached"],
            split["m8"]["output_tokens"], split["m8"]["reasoning_tokens"]) == (6, 18600, 10112, 1840, 1024)
    # m70: Claude Code reports no thinking tokens here, and moe has no requests: unknown, not 0.
    assert (split["m70"]["output_tokens"], split["m70"]["reasoning_tokens"]) == (90, None)
    assert split["moe"]["reasoning_tokens"] is None
    hourly = {r["hour"]: r["reasoning_tokens"] for r in rows(home, "infra", "token_split_hourly", DAY,
                                                              where="model = 'm8'")}
    assert hourly[10] == 1024 and hourly[9] is None
    showback = {r["tenant_id"]: r for r in rows(home, "finance", "tenant_showback_daily", DAY, where="model = 'm8'")}
    assert {t: (r["requests"], r["output_tokens"], r["reasoning_tokens"]) for t, r in showback.items()} == {
        "unattributed": (4, 1240, 704),  # chatcmpl-R1 and the 3 turns: 300 + 940 output, 192 + 512 reasoning
        "team-r": (1, 500, 320),
        "team-n": (1, 100, None),
    }
    # Weighted tokens price output once (cached 0.1, recomputed 1.0, output 5.0), reasoning inside it: team-r's
    # 1000 recomputed + 500 * 5 = 3500.
    assert showback["team-r"]["weighted_tokens"] == 3500.0


def test_prompt_and_session_text_are_never_stored(landed: tuple[Path, Any]) -> None:
    home, _ = landed
    for path in (home / "lake").rglob("*.parquet"):
        assert b"SECRET" not in path.read_bytes(), path


@pytest.mark.parametrize(("folder", "records", "message"), [
    ("openai", CLAUDE_CODE[:3], "its first records are those of a Claude Code session log, which tokenledger reads "
                                "from raw/anthropic/, not raw/openai/. Move it to raw/anthropic/dt=2026-11-16/"),
    ("anthropic", CODEX[:4], "its first records are those of a Codex CLI session log, which tokenledger reads from "
                             "raw/openai/, not raw/anthropic/. Move it to raw/openai/dt=2026-11-16/"),
    ("anthropic", [{"request_id": "chatcmpl-L1", "startTime": "2026-11-16T12:00:00.120", "model_group": "m70",
                    "prompt_tokens": 10, "completion_tokens": 2}],
     "its first records are those of a LiteLLM spend log, which tokenledger reads from raw/litellm/, not "
     "raw/anthropic/."),
    ("gateway", OPENAI, "its first records are those of an OpenAI response log, which tokenledger reads from "
                        "raw/openai/, not raw/gateway/."),
], ids=["claude-code-in-openai", "codex-in-anthropic", "litellm-in-anthropic", "openai-in-gateway"])
def test_a_file_in_the_wrong_folder_is_named_with_its_format(tmp_path: Path, folder: str, records: list,
                                                             message: str) -> None:
    path = write_jsonl(tmp_path / "raw" / folder / f"dt={DAY}" / "log.jsonl", records)
    title, formats, adapter = request_sources()[folder]
    with pytest.raises(InputFileError) as err:
        stage_gateway_files(duckdb.connect(), landing_files(path.parent, formats, title), tmp_path / "stage", adapter)
    assert str(err.value).startswith(f"{path}: {message}"), str(err.value)


def test_the_codex_adapter_is_a_variant_of_the_openai_folder() -> None:
    openai = adapters()["openai"]
    assert [v.contract for v in openai.variants] == ["source_codex"]
    assert openai.for_kind("codex").mapping == "adapt_codex" and openai.for_kind(None) is openai
    assert openai.for_kind("claude_code") is None
