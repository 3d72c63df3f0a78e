"""OpenAI API responses logged as JSON Lines, in raw/openai/: Chat Completions, Responses and Batch output lines.

Source: openai/openai-python 3.3 (src/openai/types/completion_usage.py, chat/chat_completion.py,
chat/chat_completion_chunk.py, responses/response.py, responses/response_usage.py, batch.py) and the OpenAPI
`BatchRequestOutput` schema (the per-line object of a Batch output or error file). A line is one of:

- a Chat Completions object (`object: chat.completion`: `id` chatcmpl-..., `created` in Unix seconds, `model`,
  `usage.prompt_tokens`, `usage.prompt_tokens_details.cached_tokens`, `usage.completion_tokens`,
  `usage.completion_tokens_details.reasoning_tokens`), or a chunk of a stream (`chat.completion.chunk`: every chunk
  has the stream's id and `created`; only the last one has usage, and only when the caller asked for it with
  `stream_options.include_usage`);
- a Responses API object (`object: response`: `id` resp_..., `created_at` in Unix seconds, `model`, `status`,
  `usage.input_tokens`, `input_tokens_details.cached_tokens`, `output_tokens`,
  `output_tokens_details.reasoning_tokens`; usage is null while in progress or when the response failed);
- a Batch API output or error line (`id` batch_req_..., `custom_id`, `response.status_code`, `response.body` = one of
  the objects above, `error.code`).

The fields read, their paths and rules are data_contracts/inputs/source_openai.odcs.yaml; the mapping is
sql/ingest/adapt_openai.sql:

- request_id = the object's id (for a Batch line, its body's id); the copies of one id in a file (a stream's
  chunks, snapshots of one Response) are one request: each maps to the values of the final copy, the one with
  usage and a finished status, so the day's de-duplication merges them and nothing counts twice;
- received_at = `created` (chat) or `created_at` (Responses): OpenAI's time of creation, UTC;
- model = `model` as served (often dated: declare that name in config/deployments.yaml); deployment_id is not
  given: the model's only deployment in force is used, as for a gateway row without one;
- tenant = `metadata.tenant_id`, else `user` (both echoed on a Response when the caller sent them), else
  `unattributed`: a chat completion carries neither;
- input = prompt_tokens or input_tokens, which include the cached tokens; cached input = `cached_tokens` (0 when the
  server does not report it, as OpenAI-compatible servers often do not); cache writes = `cache_write_tokens` where
  reported (openai-python 2.45 and later), else unknown; output = completion_tokens or output_tokens, reasoning
  included (reasoning_tokens kept beside, never added);
- status: a chat completion is ok (a failed call returns an error body, not a completion); a Response is ok when
  completed or incomplete (it answered, up to max_output_tokens or a content filter), cancelled when cancelled,
  and when failed a failure of the kind its code says (sql/common/failure_status.sql: rate_limit_exceeded
  rejected, a timeout code timeout, else error), with its code as error_type and no tokens when it has no usage;
- a Batch line that failed (`response` missing or its `status_code` 400 or above) is a request the API refused
  or failed, but its line names no model (the Batch output never does): counted in the reconciliation's
  failures_no_model, its kind (from the status and error code; batch_expired is rejected) in the notes; never
  quarantined;
- quarantined, with a reason naming the field: a Response still in_progress or
  queued (its final copy is expected in a later log); a stream none of whose chunks has usage; a completion
  without usage;
- latency: none of these objects measures it, so the requests count in tokens and cost but are not judged
  against the SLO (latency_measured false; TTFT and e2e unknown).
"""

from tokenledger.ingest.adapters import codex
from tokenledger.ingest.adapters.base import Adapter

ADAPTER = Adapter(
    name="openai",
    title="OpenAI response log",
    contract="source_openai",
    mapping="adapt_openai",
    formats={".jsonl": "jsonl", ".jsonl.gz": "jsonl"},
    kinds=("openai",),
    # Codex CLI session logs land here too (issue 41): each file is read by the format of its first records.
    variants=(codex.ADAPTER,),
    labels={
        "request_id": "id",
        "received_at": "created (or created_at)",
        "model": "model",
        "tenant_id": "metadata.tenant_id (or user)",
        "status": "status",
        "input_tokens": "prompt_tokens (or input_tokens)",
        "cached_input_tokens": "cached_tokens",
        "cache_write_tokens": "cache_write_tokens",
        "output_tokens": "completion_tokens (or output_tokens)",
        "reasoning_tokens": "reasoning_tokens",
        "error_type": "error.code",
    },
)
