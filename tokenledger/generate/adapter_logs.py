"""One day of request logs in the formats the adapters read (tokenledger/ingest/adapters/), for the hosted-API models of
``scenario.API_DEPLOYMENTS``: what `tokenledger generate` lands beside the canonical gateway logs on its first day.

- ``raw/litellm/dt=D/spend_logs.jsonl``: LiteLLM 1.110 ``LiteLLM_SpendLogs`` rows (as ``row_to_json`` dumps them)
  for Claude Haiku 4.5 behind the teams' proxy: steady calls over business hours with a cached 4,608-token system
  prompt (read while it was used within the last five minutes, written again after), and a batch job's burst in
  one minute whose calls beyond the 50 a minute the organization may send fail with HTTP 429. ``spend`` is
  LiteLLM's own cost at the price map's prices;
- ``raw/openai/dt=D/responses.jsonl``: GPT-5 mini's Chat Completions and Responses objects as returned: cached
  tokens in multiples of 128 from 1,024 (how OpenAI caches prompt prefixes), reasoning tokens in multiples of 64
  inside the output, a tenant in each Response's metadata, and two Responses that failed with a server error;
- ``raw/anthropic/dt=D/<sessionId>.jsonl``: Claude Code 2.1 session transcripts on Claude Sonnet 4.5: each reply is
  written as one record per content block (thinking, text, tool use) repeating the message id and usage, the first
  with the small output count of the stream's start; each session's first reply writes its prompt to the one-hour
  cache, later replies read the growing context and write what was added; the prompt and tool results are user
  records and the session ends with a summary record.

Field shapes are those of tests/test_adapters.py, which cites each format's version. Prompts, replies and tool
output are never written (placeholders stand in: the pipeline reads none of them). Each format is drawn from its
own stream ``rng_for(seed, day, <format>)``, so the files depend only on the seed and the day.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import numpy as np

from .scenario import (
    API_DEPLOYMENTS,
    CLAUDE_CODE_REPLIES,
    CLAUDE_CODE_SESSIONS,
    LITELLM_BURST_AT,
    LITELLM_BURST_REQUESTS,
    LITELLM_PRICE_MAP,
    LITELLM_STEADY_REQUESTS,
    OPENAI_CHAT_COMPLETIONS,
    OPENAI_FAILED_RESPONSES,
    OPENAI_RESPONSES,
    rng_for,
)

API_BY_SOURCE = {d.source: d for d in API_DEPLOYMENTS}
MS_PER_HOUR = 3_600_000
NOT_LOGGED = "(not logged)"
_BASE62 = np.array(list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))


@dataclass(frozen=True)
class FormatLog:
    """One file written in an adapter's format: its source folder, path, lines and the requests they hold."""

    source: str
    path: Path
    records: int
    requests: int


def _token(rng: np.random.Generator, n: int) -> str:
    return "".join(_BASE62[rng.integers(0, 62, n)])


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _lognormal(rng: np.random.Generator, median: float, sigma: float, lo: int, hi: int, n: int) -> np.ndarray:
    return np.clip(np.rint(median * np.exp(sigma * rng.standard_normal(n))), lo, hi).astype(np.int64)


def _at(day: date, ms: int, zone: str = "Z") -> str:
    """``day`` + ``ms`` milliseconds as ISO 8601 with milliseconds; ``zone`` "" for LiteLLM's zone-less UTC."""
    s, milli = divmod(int(ms), 1000)
    return f"{day.isoformat()}T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{milli:03d}{zone}"


def _tenants(rng: np.random.Generator, mix: tuple[tuple[str, float], ...], n: int) -> list[str]:
    names, shares = zip(*mix, strict=True)
    return [names[i] for i in rng.choice(len(names), size=n, p=np.asarray(shares) / sum(shares))]


# ------------------------------------------------------------------------------------------------ LiteLLM

#: Claude Haiku 4.5 caches a prompt prefix of at least 4,096 tokens: the callers' shared system prompt.
HAIKU_SYSTEM_TOKENS = 4_608
HAIKU_UNDERLYING_MODEL = "claude-haiku-4-5-20251001"
CACHE_TTL_MS = 300_000  # Anthropic's default (five-minute) cache, refreshed by every read
LITELLM_TENANTS = (("team-support", 0.6), ("team-search", 0.25), ("globex-labs", 0.15))
BURST_TENANT = "team-search"  # its re-ranking batch job
RATE_LIMIT_MESSAGE = (
    'litellm.RateLimitError: AnthropicException - {"type":"error","error":{"type":"rate_limit_error","message":'
    '"This request would exceed the rate limit for your organization of 50 requests per minute."}}'
)


def _spend(uncached: int, read: int, write: int, output: int) -> float:
    """LiteLLM's own cost of a call, at its price map's per-token prices."""
    p = LITELLM_PRICE_MAP[API_BY_SOURCE["litellm"].price_sheet]
    cost = (uncached * p["input_cost_per_token"] + read * p["cache_read_input_token_cost"]
            + write * p["cache_creation_input_token_cost"] + output * p["output_cost_per_token"])
    return round(cost, 12)


def litellm_spend_logs(seed: int, day: date) -> list[dict[str, Any]]:
    """The day's spend log rows for the LiteLLM model, in time order."""
    rng = rng_for(seed, day, "litellm")
    dep = API_BY_SOURCE["litellm"]
    burst_ms = (LITELLM_BURST_AT.hour * 60 + LITELLM_BURST_AT.minute) * 60_000
    # Steady calls from 08:00 to 18:00 outside the burst's minute, so that minute holds the burst alone.
    u = rng.integers(8 * MS_PER_HOUR, 18 * MS_PER_HOUR - 60_000, LITELLM_STEADY_REQUESTS)
    t = np.concatenate([np.where(u < burst_ms, u, u + 60_000),
                        burst_ms + rng.integers(0, 60_000, LITELLM_BURST_REQUESTS)])
    in_burst = np.arange(len(t)) >= LITELLM_STEADY_REQUESTS
    order = np.argsort(t, kind="stable")
    t, in_burst = t[order], in_burst[order]
    n = len(t)
    tenants = _tenants(rng, LITELLM_TENANTS, n)
    user_part = _lognormal(rng, 900, 0.7, 40, 24_000, n)
    output = _lognormal(rng, 220, 0.6, 5, 4_096, n)
    ttft = np.rint(550 * np.exp(0.3 * rng.standard_normal(n)) + user_part * 0.02).astype(np.int64)
    decode = np.rint(output / 170 * 1000 * np.exp(0.15 * rng.standard_normal(n))).astype(np.int64)
    refused_ms = rng.integers(25, 90, n)
    ids = [f"msg_01{_token(rng, 22)}" for _ in range(n)]
    calls = [_uuid(rng) for _ in range(n)]  # LiteLLM's call id: a failed call's request_id, every call's session

    rows, last_cached_at, burst_sent = [], None, 0
    for i in range(n):
        start, team = int(t[i]), (BURST_TENANT if in_burst[i] else tenants[i])
        common = {"call_type": "acompletion", "api_key": hashlib.sha256(f"sk-{team}".encode()).hexdigest()}
        meta = {"user_api_key_alias": f"{team}-svc", "user_api_key_team_id": team, "user_api_key_team_alias": team}
        burst_sent += int(in_burst[i])
        if in_burst[i] and burst_sent > dep.rate_limit_rpm:
            end = start + int(refused_ms[i])
            rows.append({
                "request_id": calls[i], **common, "spend": 0.0, "total_tokens": 0, "prompt_tokens": 0,
                "completion_tokens": 0, "startTime": _at(day, start, ""), "endTime": _at(day, end, ""),
                "completionStartTime": _at(day, end, ""), "request_duration_ms": end - start,
                "model": HAIKU_UNDERLYING_MODEL, "model_group": dep.model, "custom_llm_provider": "anthropic",
                "api_base": "https://api.anthropic.com/v1/messages", "user": "", "team_id": team, "end_user": "",
                "session_id": calls[i], "cache_hit": "None", "cache_key": "Cache OFF", "request_tags": [],
                "messages": {}, "response": {}, "status": "failure",
                "metadata": {"status": "failure", **meta, "usage_object": None, "error_information": {
                    "error_code": "429", "error_class": "RateLimitError", "llm_provider": "anthropic",
                    "error_message": RATE_LIMIT_MESSAGE}},
            })
            continue
        hit = last_cached_at is not None and start - last_cached_at <= CACHE_TTL_MS
        last_cached_at = start
        read, write = (HAIKU_SYSTEM_TOKENS, 0) if hit else (0, HAIKU_SYSTEM_TOKENS)
        uncached, out = int(user_part[i]), int(output[i])
        prompt = uncached + read + write  # LiteLLM's prompt_tokens include Anthropic's cache reads and writes
        first, end = start + int(ttft[i]), start + int(ttft[i]) + int(decode[i])
        usage = {"completion_tokens": out, "prompt_tokens": prompt, "total_tokens": prompt + out,
                 "prompt_tokens_details": {"cached_tokens": read, "cache_creation_tokens": write},
                 "cache_creation_input_tokens": write, "cache_read_input_tokens": read}
        rows.append({
            "request_id": ids[i], **common, "spend": _spend(uncached, read, write, out),
            "total_tokens": prompt + out, "prompt_tokens": prompt, "completion_tokens": out,
            "startTime": _at(day, start, ""), "endTime": _at(day, end, ""), "completionStartTime": _at(day, first, ""),
            "request_duration_ms": end - start, "model": HAIKU_UNDERLYING_MODEL, "model_group": dep.model,
            "custom_llm_provider": "anthropic", "api_base": "https://api.anthropic.com/v1/messages", "user": "",
            "team_id": team, "end_user": "", "session_id": calls[i], "cache_hit": "False", "cache_key": "Cache OFF",
            "request_tags": [], "messages": {}, "response": {}, "status": "success",
            "metadata": {"status": "success", **meta, "usage_object": usage,
                         "additional_usage_values": {"cache_creation_input_tokens": write,
                                                     "cache_read_input_tokens": read}},
        })
    return rows


# ------------------------------------------------------------------------------------------------ OpenAI

INSTRUCTIONS_TOKENS = 1_536  # the callers' shared instructions, the prefix OpenAI caches
RESPONSE_TENANTS = (("team-search", 0.5), ("acme-corp", 0.3), ("agent-platform", 0.2))
SERVER_ERROR = ("The server had an error processing your request. Sorry about that! You can retry your request, or "
                "contact us through our help center at help.openai.com if you keep seeing this error.")


def openai_objects(seed: int, day: date) -> list[dict[str, Any]]:
    """The day's chat completions and Responses of the OpenAI model, in time order."""
    rng = rng_for(seed, day, "openai")
    model = API_BY_SOURCE["openai"].model
    n = OPENAI_CHAT_COMPLETIONS + OPENAI_RESPONSES
    midnight = int(datetime.combine(day, time(0), tzinfo=UTC).timestamp())
    created = midnight + np.sort(rng.integers(7 * 3600, 21 * 3600, n))  # Unix seconds
    is_response = rng.permutation(np.arange(n) < OPENAI_RESPONSES)
    failed = set(rng.choice(np.flatnonzero(is_response), OPENAI_FAILED_RESPONSES, replace=False).tolist())
    tenants = _tenants(rng, RESPONSE_TENANTS, n)
    user_part = _lognormal(rng, 650, 1.0, 20, 100_000, n)
    new_turn = _lognormal(rng, 120, 0.8, 5, 4_000, n)
    hit, follow_up = rng.random(n) < 0.65, rng.random(n) < 0.3
    # reasoning_effort minimal for a quarter of the calls (no reasoning tokens), medium for the rest
    reasoning = np.where(rng.random(n) < 0.25, 0, 64 * np.ceil(_lognormal(rng, 448, 0.8, 1, 16_384, n) / 64))
    visible = _lognormal(rng, 280, 0.7, 4, 8_000, n)

    objects = []
    for i in range(n):
        prompt = INSTRUCTIONS_TOKENS + int(user_part[i])
        # cached in 128-token steps from 1,024: the instructions, or the whole earlier conversation of a follow-up
        prefix = max(prompt - int(new_turn[i]), INSTRUCTIONS_TOKENS) if follow_up[i] else INSTRUCTIONS_TOKENS
        cached = 128 * (prefix // 128) if hit[i] and prefix >= 1_024 else 0
        thought, out = int(reasoning[i]), int(reasoning[i]) + int(visible[i])
        if not is_response[i]:
            objects.append({
                "id": f"chatcmpl-{_token(rng, 29)}", "object": "chat.completion", "created": int(created[i]),
                "model": model, "choices": [{"index": 0, "message": {
                    "role": "assistant", "content": NOT_LOGGED, "refusal": None, "annotations": []},
                    "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
                          "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                          "completion_tokens_details": {"reasoning_tokens": thought, "audio_tokens": 0,
                                                        "accepted_prediction_tokens": 0,
                                                        "rejected_prediction_tokens": 0}},
                "service_tier": "default", "system_fingerprint": None,
            })
            continue
        rid = f"resp_{rng.bytes(25).hex()}"
        response = {"id": rid, "object": "response", "created_at": int(created[i]), "status": "completed",
                    "model": model, "error": None, "incomplete_details": None, "instructions": NOT_LOGGED,
                    "metadata": {"tenant_id": tenants[i]},
                    "reasoning": {"effort": "medium" if thought else "minimal", "summary": None}}
        if i in failed:
            objects.append({**response, "status": "failed", "error": {"code": "server_error",
                                                                      "message": SERVER_ERROR},
                            "output": [], "usage": None})
            continue
        objects.append({
            **response,
            "output": [{"type": "reasoning", "id": f"rs_{rid[5:]}", "summary": []},
                       {"type": "message", "id": f"msg_{rid[5:]}", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": NOT_LOGGED, "annotations": []}]}],
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": out, "output_tokens_details": {"reasoning_tokens": thought},
                      "total_tokens": prompt + out},
        })
    return objects


# ------------------------------------------------------------------------------------------------ Claude Code

CLAUDE_CODE_VERSION = "2.1.63"
SYSTEM_AND_TOOLS_TOKENS = 17_408  # Claude Code's system prompt and tool definitions
MEMORY_TOKENS = 1_800  # the project's CLAUDE.md
TOOLS = ("Read", "Edit", "Bash", "Grep", "Glob", "Write")
REPOSITORIES = ("billing-service", "web-app", "data-pipeline", "search-indexer", "mobile-api", "infra")
SESSION_TITLES = ("Fix flaky retry test in the export job", "Add pagination to the invoices endpoint",
                  "Backfill missing partitions after the outage", "Speed up the indexer's cold start",
                  "Upgrade the HTTP client and fix the breaking changes", "Tidy the Terraform module layout")


def _session(rng: np.random.Generator, day: date, index: int, start_ms: int) -> tuple[str, list[dict[str, Any]]]:
    """One Claude Code session of CLAUDE_CODE_REPLIES replies: (sessionId, its records in order)."""
    model = API_BY_SOURCE["anthropic"].model
    session_id = _uuid(rng)
    base = {"isSidechain": False, "userType": "external", "cwd": f"/home/dev/{REPOSITORIES[index]}",
            "sessionId": session_id, "version": CLAUDE_CODE_VERSION, "gitBranch": "main"}
    records: list[dict[str, Any]] = []

    def add(kind: str, at_ms: int, message: dict[str, Any], **fields: Any) -> None:
        parent = records[-1]["uuid"] if records else None
        records.append({"parentUuid": parent, **base, **fields, "type": kind, "message": message,
                        "uuid": _uuid(rng), "timestamp": _at(day, at_ms)})

    now = start_ms
    add("user", now, {"role": "user", "content": NOT_LOGGED})
    context, added = SYSTEM_AND_TOOLS_TOKENS + MEMORY_TOKENS + int(_lognormal(rng, 350, 0.8, 20, 4_000, 1)[0]), 0
    for k in range(CLAUDE_CODE_REPLIES):
        last = k == CLAUDE_CODE_REPLIES - 1
        fresh = int(rng.integers(1, 9))  # the few tokens after the last cache breakpoint
        if k == 0:  # the session's prompt, written to the one-hour cache
            read, write_5m, write_1h = 0, 0, context - fresh
        else:  # the earlier context read back; the last reply and its tool's result written for five minutes
            read, write_5m, write_1h = context, added, 0
        write = write_5m + write_1h
        total = fresh + read + write
        thinking = rng.random() < 0.5
        output = int(_lognormal(rng, 180, 1.0, 6, 12_000, 1)[0]) + (
            int(_lognormal(rng, 150, 0.8, 10, 8_000, 1)[0]) if thinking else 0)
        blocks = (["thinking"] if thinking else []) + (["text"] if last or rng.random() < 0.6 else [])
        if not last:
            blocks.append("tool_use")
        usage = {"input_tokens": fresh, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
                 "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
                 "output_tokens": output, "service_tier": "standard"}
        ttft = int(1_800 * np.exp(0.35 * rng.standard_normal()) + total * 0.02)
        decode = int(output / 65 * 1000)
        message_id, request_id, tool_id = f"msg_01{_token(rng, 22)}", f"req_011C{_token(rng, 20)}", ""
        for j, block in enumerate(blocks):
            final = j == len(blocks) - 1
            content: dict[str, Any] = {"type": block, block: NOT_LOGGED} if block != "tool_use" else {
                "type": "tool_use", "id": (tool_id := f"toolu_01{_token(rng, 22)}"),
                "name": TOOLS[int(rng.integers(0, len(TOOLS)))], "input": {}}
            if block == "thinking":
                content["signature"] = _token(rng, 32)
            early = j == 0 and not final  # the stream's start: its output count is not final yet
            add("assistant", now + ttft + decode * j // len(blocks) if not final else now + ttft + decode, {
                "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [content],
                "stop_reason": None if not final else ("end_turn" if last else "tool_use"), "stop_sequence": None,
                "usage": {**usage, "output_tokens": int(rng.integers(1, 12))} if early else usage,
            }, requestId=request_id)
        now += ttft + decode
        if last:
            break
        tool_tokens = int(_lognormal(rng, 1_100, 1.1, 20, 25_000, 1)[0])
        now += int(_lognormal(rng, 3_500, 1.1, 200, 180_000, 1)[0])
        add("user", now, {"role": "user", "content": [
            {"tool_use_id": tool_id, "type": "tool_result", "content": NOT_LOGGED}]})
        now += 100
        context, added = total, output + tool_tokens
    records.append({"type": "summary", "summary": SESSION_TITLES[index], "leafUuid": records[-1]["uuid"]})
    return session_id, records


def claude_code_sessions(seed: int, day: date) -> list[tuple[str, list[dict[str, Any]]]]:
    """The day's Claude Code sessions on the Anthropic model, each (sessionId, records), in order of start."""
    rng = rng_for(seed, day, "claude-code")
    starts = np.sort(rng.integers(9 * MS_PER_HOUR, 16 * MS_PER_HOUR, CLAUDE_CODE_SESSIONS))
    return [_session(rng, day, i, int(s)) for i, s in enumerate(starts)]


# ------------------------------------------------------------------------------------------------ files


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def write_adapter_logs(home: Path, day: date, seed: int) -> tuple[FormatLog, ...]:
    """Write the day's LiteLLM, OpenAI and Claude Code logs under ``home/raw``; what was written, per file."""
    out = []

    def folder(source: str) -> Path:
        return Path(home) / "raw" / source / f"dt={day.isoformat()}"

    spend = litellm_spend_logs(seed, day)
    _write_jsonl(path := folder("litellm") / "spend_logs.jsonl", spend)
    out.append(FormatLog("litellm", path, len(spend), len(spend)))
    objects = openai_objects(seed, day)
    _write_jsonl(path := folder("openai") / "responses.jsonl", objects)
    out.append(FormatLog("openai", path, len(objects), len(objects)))
    for session_id, records in claude_code_sessions(seed, day):
        _write_jsonl(path := folder("anthropic") / f"{session_id}.jsonl", records)
        out.append(FormatLog("anthropic", path, len(records), CLAUDE_CODE_REPLIES))
    return tuple(out)
