"""Codex CLI session logs (rollout files), as JSON Lines, in raw/openai/ beside OpenAI's responses.

Source: openai/codex (codex-rs/protocol/src/protocol.rs: RolloutLine, RolloutItem, SessionMeta, TurnContextItem,
EventMsg::TokenCount, TokenCountEvent, TokenUsageInfo, TokenUsage). Codex writes one file per session,
~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl; a line is `{"timestamp": ISO 8601 UTC, "type":
session_meta | response_item | event_msg | turn_context | compacted, "payload": {...}}`:

- session_meta: `payload.id` (the session id), `cwd`, `originator`, `cli_version`, ...;
- turn_context: the context of the turns that follow, `payload.model` among it (a session may change model);
- event_msg with `payload.type` token_count: `payload.info` = {`last_token_usage`, `total_token_usage`,
  `model_context_window`}, each usage `{input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens,
  total_tokens}`: the last model call's and the session's cumulative, written when the call's response completed;
  `info` is null on an event that only updates the rate limits;
- response_item (the messages, reasoning, tool calls and their output), the other event_msg types (user and agent
  messages, turn started and completed, ...) and compacted records: the session's content, never read.

Codex's files are told from OpenAI's responses by their first records (tokenledger/ingest/adapters/detect.py), so both
land in raw/openai/ and their rows are that folder's (`source` openai). The fields read, their paths and rules are
data_contracts/inputs/source_codex.odcs.yaml; the mapping is sql/ingest/adapt_codex.sql:

- one request per turn: a token_count event with info, its `last_token_usage`. Codex may write the same event
  again (its cumulative total unchanged): those copies are one turn, merged by the day's de-duplication;
- request_id = `<session id>:<turn>`, the turn numbered from 1 in the file's order of cumulative totals, so a
  re-read file gives the same ids; the session id is session_meta's `payload.id`, else the uuid that ends the
  file's name;
- input = input_tokens, which INCLUDES cached_input_tokens; cached input = cached_input_tokens; output =
  output_tokens, reasoning included (reasoning_output_tokens kept beside as reasoning_tokens, never added); cache
  writes are not reported (NULL);
- received_at = the token_count record's timestamp (the end of the call: the log has no start time);
- model = `payload.model` of the last turn_context before the event; deployment_id is not given (the model's only
  deployment in force is used); tenant `unattributed` (a session log has no tenant); session_id = the session id
  (a Codex session is one agent task); status ok (a failed call writes no token count);
- the file's turns are checked against its last `total_token_usage`: when they do not add up (a turn missing
  from the file, a session resumed from another one), the reconciliation row's notes name the file and both
  figures; the turns are still accepted;
- every record that is not a token count with info (session_meta, turn_context, response_item, compacted, the
  other event_msg types, a token_count whose info is null) is skipped as not a request (skipped_not_request),
  never quarantined; a line that is not JSON, a record without `type`, or an event_msg that carries token usage
  (`payload.info`) but no `payload.type` (it cannot be told a token count or not: counting it or skipping it would
  both be a guess) is quarantined, the last naming payload_type;
- latency: a token count measures none, so the requests count in tokens and cost but are not judged against the
  SLO (latency_measured false).
"""

from tokenledger.ingest.adapters.base import Adapter

ADAPTER = Adapter(
    name="openai",
    title="Codex CLI session log",
    contract="source_codex",
    mapping="adapt_codex",
    formats={".jsonl": "jsonl", ".jsonl.gz": "jsonl"},
    kinds=("codex",),
    labels={
        "request_id": "session_meta.id + turn",
        "received_at": "timestamp",
        "model": "turn_context.model",
        "session_id": "session_meta.id",
        "input_tokens": "last_token_usage.input_tokens",
        "cached_input_tokens": "last_token_usage.cached_input_tokens",
        "output_tokens": "last_token_usage.output_tokens",
        "reasoning_tokens": "last_token_usage.reasoning_output_tokens",
    },
)
