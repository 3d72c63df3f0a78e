"""LiteLLM proxy spend logs (`LiteLLM_SpendLogs`), exported as JSON Lines, CSV or Parquet, in raw/litellm/.

Source: BerriAI/litellm 1.110.2 (litellm/proxy/schema.prisma, model LiteLLM_SpendLogs;
proxy/spend_tracking/spend_tracking_utils.py, which writes the row and its metadata), and the 1.80 shape, where
the status lives in metadata only and request_duration_ms is missing. LiteLLM has no export command: a table
dump (`\\copy ... TO CSV`, `row_to_json`, a DataFrame to Parquet) is what lands here. JSON columns (metadata) may
arrive as JSON text inside a CSV cell or a Parquet string; they are parsed. The fields read, their paths and
rules are data_contracts/inputs/source_litellm.odcs.yaml; the mapping is sql/ingest/adapt_litellm.sql:

- received_at = startTime (UTC; LiteLLM writes zone-less UTC, or epoch seconds in its logging payload);
- model = model_group (the public name the client asked for), else model; deployment_id is not given: the
  model's only deployment in force is used, as for a gateway row without one;
- tenant = team_id, else end_user, else user, else the key alias, else `unattributed` (never the api_key,
  which is a hash in 1.110 and could be a raw key in older versions: it is not read at all);
- session_id is kept only when it repeats within the file: LiteLLM fills it with a fresh uuid per request when
  the caller sends none, and a session of one request would make every request its own agent task;
- status: success -> ok; failure -> the kind sql/common/failure_status.sql gives: timeout (HTTP 408 or 504, or
  an error class naming a timeout), rejected (any other 4xx, 503 or 529: the request never reached a model), else
  error; http_status and error_type from error_information. A failure row that names no model (neither
  model_group nor model) is counted in the reconciliation's failures_no_model, never quarantined;
- input = prompt_tokens, which includes cache reads and writes; LiteLLM versions before 1.6x reported Anthropic's
  prompt_tokens without them, so when prompt_tokens is below reads + writes, they are added;
- cached input = the usage's cached tokens (0 when the provider reports none), cache writes kept as such;
  output = completion_tokens, reasoning included (reasoning_tokens kept beside, never added);
- ttft = completionStartTime - startTime: for a call that is not streamed LiteLLM sets completionStartTime to
  endTime, which is right for the SLO (the first token arrives with the whole response); e2e =
  request_duration_ms, else endTime - startTime. LiteLLM measures both, so its requests are judged;
- a response served from LiteLLM's own cache (cache_hit 'True') reached no model: its whole prompt counts as
  cached and it generated no output;
- spend is kept as source_cost, beside tokenledger's own cost (finance.cost_per_mtok_daily reports the
  difference), never used as the cost.
"""

from tokenledger.ingest.adapters.base import Adapter

ADAPTER = Adapter(
    name="litellm",
    title="LiteLLM spend log",
    contract="source_litellm",
    mapping="adapt_litellm",
    formats={".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".csv": "csv", ".csv.gz": "csv",
             ".parquet": "parquet"},
    json_columns=("metadata",),
    kinds=("litellm",),
    labels={
        "request_id": "request_id",
        "received_at": "startTime",
        "model": "model_group (or model)",
        "tenant_id": "team_id (or end_user, user)",
        "status": "status",
        "input_tokens": "prompt_tokens",
        "cached_input_tokens": "cached_tokens (metadata usage)",
        "cache_write_tokens": "cache_creation_input_tokens (metadata usage)",
        "output_tokens": "completion_tokens",
        "reasoning_tokens": "reasoning_tokens (metadata usage)",
        "ttft_ms": "completionStartTime - startTime",
        "e2e_ms": "endTime - startTime",
        "http_status": "error_information.error_code",
        "error_type": "error_information.error_class",
        "source_cost": "spend",
    },
)
