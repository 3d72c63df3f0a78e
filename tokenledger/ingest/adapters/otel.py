"""OpenTelemetry GenAI spans: OTLP JSON trace exports, as JSON Lines, in raw/otel/.

Source: the OpenTelemetry Collector's file exporter (exporter/fileexporter, `format: json`), which writes one
`ExportTraceServiceRequest` per line in the OTLP JSON encoding of opentelemetry-proto 1.x (`resourceSpans` /
`scopeSpans` / `spans`; trace and span ids as hex strings, 64-bit integers and nanosecond times as decimal strings,
attributes as `{"key", "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue"}}` lists), and the GenAI
semantic conventions (gen-ai-spans.md) for the attributes of a model call. A line holds many spans:
sql/ingest/otel_spans.sql unnests it in DuckDB (never into Python objects), one record per span, each keeping its line's
number as its source_line. The fields read, their paths and rules are data_contracts/inputs/source_otel.odcs.yaml; the
mapping is sql/ingest/adapt_otel.sql:

- one span is one request when it is a model call: `gen_ai.operation.name` chat, text_completion or
  generate_content (or, from an instrumentation that sets no operation name, a span with a gen_ai model or usage
  attribute). An agent or tool span (invoke_agent, execute_tool, create_agent), an embeddings span, any span
  without gen_ai attributes (HTTP, database) and an export with no span (resourceSpans empty, or another signal's
  export: resourceMetrics, resourceLogs, resourceProfiles) are skipped as not requests, counted in
  skipped_not_request and never quarantined: an agent span's usage is the sum of its model calls, which are
  counted on their own. A JSON object that is no OTLP export (no resourceSpans at all) is quarantined;
- request_id = spanId: a batch the exporter wrote twice (a retry) repeats its spans on other lines, and the day's
  de-duplication merges the copies (the one that finished last is kept). A span id twice within one line is a
  broken export: the later copy is quarantined;
- received_at = startTimeUnixNano; e2e_ms = endTimeUnixNano - startTimeUnixNano; no time to first token, so the
  requests count in tokens and cost but are not judged against the SLO (latency_measured false);
- model = gen_ai.response.model (the model that answered, often a dated name), else gen_ai.request.model; it must
  be a model of deployments.yaml, as for every source; deployment_id is not given: the model's only deployment;
- input = gen_ai.usage.input_tokens, which the conventions define as every input token, cache reads and writes
  included; cached = gen_ai.usage.cache_read.input_tokens; cache writes = gen_ai.usage.cache_creation.input_tokens;
  output = gen_ai.usage.output_tokens, reasoning included (gen_ai.usage.reasoning.output_tokens kept beside, never
  added);
- tenant = the resource's service.name (the application that called), else unattributed; session_id =
  gen_ai.conversation.id; service tier = openai.response.service_tier (default is standard);
- status: a span whose status.code is 2 (error) failed: rejected when error.type names a rate limit (or 429),
  timeout when it names a timeout, else error; a failed call without usage used no tokens.
"""

from tokenledger.ingest.adapters.base import Adapter

ADAPTER = Adapter(
    name="otel",
    title="OTLP JSON trace export",
    contract="source_otel",
    mapping="adapt_otel",
    records="otel_spans",
    formats={".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".json": "jsonl"},
    kinds=("otlp",),
    labels={
        "request_id": "spanId",
        "received_at": "startTimeUnixNano",
        "model": "gen_ai.response.model",
        "tenant_id": "resource service.name",
        "session_id": "gen_ai.conversation.id",
        "input_tokens": "gen_ai.usage.input_tokens",
        "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
        "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
        "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
        "e2e_ms": "endTimeUnixNano - startTimeUnixNano",
    },
)
