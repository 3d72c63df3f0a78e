"""Anthropic Messages API responses and Claude Code session logs, as JSON Lines, in raw/anthropic/.

Source: anthropics/anthropic-sdk-python 0.121 (src/anthropic/types/message.py, usage.py, cache_creation.py,
stop_reason.py, lib/streaming/_messages.py) for the Message and its usage; Claude Code 2.1 session transcripts
(~/.claude/projects/<project>/<sessionId>.jsonl; no published schema: the fields are those ryoppippi/ccusage 20
reads, src types.rs, and the duplicate handling discussed in anthropics/claude-code#5034). A line is one of:

- a Message (`type: message`, `id` msg_..., `model`, `stop_reason`, `usage.input_tokens`,
  `usage.cache_read_input_tokens`, `usage.cache_creation_input_tokens`, optionally `usage.cache_creation.
  ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`, `usage.output_tokens`), with the time its response
  arrived written beside its fields as `timestamp` (a Message has no time of its own), or a record
  `{"timestamp": ..., "message": {...}}` around it; an optional `tenant_id` beside it names the tenant;
- a Claude Code record: `type` (assistant for a model reply; user, summary, system, attachment, ... for the rest),
  `timestamp` (ISO 8601 UTC), `sessionId`, and for a reply `message` = the Message.

The fields read, their paths and rules are data_contracts/inputs/source_anthropic.odcs.yaml; the mapping is
sql/ingest/adapt_anthropic.sql:

- input_tokens EXCLUDES both cache fields here: input = input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens; cached input = cache_read_input_tokens; cache writes = cache_creation_input_tokens
  (or the sum of its 5-minute and 1-hour parts), kept as cache_write_tokens; a cache field that is absent or null
  is 0 in the sum; output = output_tokens, thinking included (output_tokens_details.thinking_tokens kept beside as
  reasoning_tokens, never added);
- request_id = the message id: one message id is one request. Claude Code writes a reply as one record per content
  block, each repeating the id and the usage, and a streamed reply's early records may hold a smaller output count;
  sidechains replay a parent's message under the same id. Every record of one id in a file maps to the same
  values: received_at = its first timestamp, the usage of its final record (the one with a stop_reason, then the
  largest token total). The day's de-duplication then merges them into one request (counted as merged), so a log
  with repeated records gives the same totals as its final usage alone;
- received_at = `timestamp` (Claude Code writes a line when it gets the block, so the first one is close to the
  reply's first token, not to the request; it is the best time the log has);
- model = `message.model`; deployment_id is not given: the model's only deployment in force is used;
- session_id = `sessionId` (a Claude Code session is one agent task); tenant = `tenant_id` where the logging code
  adds it, else `unattributed`;
- status ok: a Message is a reply. A failed call leaves no Message but an error body, `{"type": "error", "error":
  {"type": ..., "message": ...}, "request_id": ...}` as the SDK's APIStatusError.body holds it, logged with the
  time (`timestamp`), the HTTP status (`status_code`, APIStatusError.status_code) and, where the logging code
  knows it, the model asked for (`model`) beside its fields; Claude Code writes an `isApiErrorMessage` record
  (`apiErrorStatus`, `error`: rate_limit, server_error, ...). Either is a request the API refused or failed, never a
  bad row: its kind from the status and error type (sql/common/failure_status.sql: 429, 529 and the other
  refusals rejected, a timeout timeout, the rest error), no tokens, request_id = the body's request_id. Where the
  record names its model it is a failed request of that model (in its success rate); where it does not (Claude
  Code's record never does), it is counted in the reconciliation's failures_no_model, its kind in the notes;
- records that are not model calls are skipped as not requests, counted in the reconciliation's
  skipped_not_request (rows read = accepted + quarantined + merged + skipped + failures of no model), never
  quarantined, because Claude Code writes them beside every reply by design: `type` user (prompts and tool
  results), summary, system and the others; a message whose model is `<synthetic>` (written by Claude Code
  itself);
- latency: neither a Message nor a Claude Code record measures it, so the requests count in tokens and cost but
  are not judged against the SLO (latency_measured false).
"""

from tokenledger.ingest.adapters.base import Adapter

ADAPTER = Adapter(
    name="anthropic",
    title="Anthropic message log",
    contract="source_anthropic",
    mapping="adapt_anthropic",
    formats={".jsonl": "jsonl", ".jsonl.gz": "jsonl"},
    kinds=("anthropic_message", "claude_code"),
    labels={
        "request_id": "id",
        "received_at": "timestamp",
        "model": "model",
        "tenant_id": "tenant_id",
        "session_id": "sessionId",
        "input_tokens": "input_tokens + cache_read_input_tokens + cache_creation_input_tokens",
        "cached_input_tokens": "cache_read_input_tokens",
        "cache_write_tokens": "cache_creation_input_tokens",
        "output_tokens": "output_tokens",
        "reasoning_tokens": "thinking_tokens",
    },
)
