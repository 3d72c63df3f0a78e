-- OTLP JSON spans (sql/ingest/otel_spans.sql), typed by data_contracts/inputs/source_otel.odcs.yaml (the relation "checked"
-- below), mapped onto the gateway_request contract as text and kinds: one GenAI model-call span is one request,
-- its span id the request id (the copies of a span the exporter wrote twice, on other lines, are merged by the
-- day's de-duplication). Every other span, and a line with no span, is counted as not a request. Each choice is
-- explained in tokenledger/ingest/adapters/otel.py.
WITH r AS (
    SELECT
        *,
        -- never NULL (a span's record has no `spans`): a NULL here would read as "not a repeated span" below
        line_problem IS NULL AND (
            coalesce(spans = 'none', false)
            OR (operation_name IS NOT NULL AND operation_name NOT IN ('chat', 'text_completion', 'generate_content'))
            OR (operation_name IS NULL AND input_tokens IS NULL AND output_tokens IS NULL
                AND coalesce(request_model, response_model) IS NULL)
        ) AS not_request,
        coalesce(status_code IN ('2', 'STATUS_CODE_ERROR'), false) AS failed
    FROM ({checked})
), s AS (
    SELECT
        *,
        -- a span id twice within one line (one export request) is a broken export, not a retry: the copies after
        -- the first are quarantined (a retry repeats the whole line, and its copies are merged)
        NOT not_request AND line_problem IS NULL AND spanId IS NOT NULL
            AND row_number() OVER (PARTITION BY source_line, spanId ORDER BY (SELECT NULL)) > 1 AS repeated
    FROM r
)
SELECT
    source_line,
    line_problem,
    not_request,
    NULL::VARCHAR AS source_note,
    CASE
        WHEN line_problem IS NOT NULL THEN NULL
        WHEN not_request AND spans = 'none'
            THEN 'not a request record: the line is an export request with no span (resourceSpans empty or null, '
                 'or another signal''s export: resourceMetrics, resourceLogs or resourceProfiles); counted here, '
                 'never accounted'
        WHEN not_request AND operation_name IS NOT NULL
            THEN format('not a request record: span {} is a gen_ai.operation.name {} span (only chat, '
                        'text_completion and generate_content spans are model calls); counted here, never accounted',
                        coalesce(spanId, '?'), left(operation_name, 64))
        WHEN not_request
            THEN format('not a request record: span {} ({}) has no gen_ai.* model or usage attribute: not a model '
                        'call; counted here, never accounted', coalesce(spanId, '?'), coalesce(left(name, 64), 'unnamed'))
        -- an attribute of another OTLP value type (sql/ingest/otel_spans.sql keeps a kvlistValue or bytesValue as
        -- an object, an arrayValue as an array; a boolValue is a boolean): its reason names the attribute and the
        -- value types, the one it has and the one read
        WHEN reason IS NOT NULL
            THEN format('span {}: {}', coalesce(spanId, '?'), replace(replace(replace(replace(list_reduce(
                [{'f': 'operation_name', 'a': 'gen_ai.operation.name'},
                 {'f': 'provider_name', 'a': 'gen_ai.provider.name or gen_ai.system'},
                 {'f': 'request_model', 'a': 'gen_ai.request.model'},
                 {'f': 'response_model', 'a': 'gen_ai.response.model'},
                 {'f': 'input_tokens', 'a': 'gen_ai.usage.input_tokens'},
                 {'f': 'output_tokens', 'a': 'gen_ai.usage.output_tokens'},
                 {'f': 'cache_read_tokens', 'a': 'gen_ai.usage.cache_read.input_tokens'},
                 {'f': 'cache_creation_tokens', 'a': 'gen_ai.usage.cache_creation.input_tokens'},
                 {'f': 'reasoning_tokens', 'a': 'gen_ai.usage.reasoning.output_tokens'},
                 {'f': 'conversation_id', 'a': 'gen_ai.conversation.id'},
                 {'f': 'error_type', 'a': 'error.type'},
                 {'f': 'service_tier', 'a': 'openai.response.service_tier'},
                 {'f': 'service_name', 'a': 'the resource''s service.name'}],
                lambda r, x: regexp_replace(r, '(^|; )' || x.f || ': a value of type (object|array|boolean) is not a '
                                               'valid (string|integer)',
                                            '\1' || x.f || ' (attribute ' || x.a || '): an OTLP \2 value, '
                                            'not a \3Value', 'g'),
                reason), 'an OTLP object value', 'a kvlistValue or bytesValue'),
                'an OTLP array value', 'an arrayValue'), 'an OTLP boolean value', 'a boolValue'),
                'not a integerValue', 'not an intValue'))
        WHEN repeated
            THEN format('spanId: {} appears more than once in this line (one export request); the first copy is '
                        'accounted', spanId)
        WHEN coalesce(response_model, request_model) IS NULL
            THEN format('span {}: gen_ai.response.model and gen_ai.request.model: both missing, so the call has no '
                        'model to account it by', spanId)
        WHEN NOT failed AND (input_tokens IS NULL OR output_tokens IS NULL)
            THEN format('span {}: gen_ai.usage.input_tokens and gen_ai.usage.output_tokens: required on a call that '
                        'did not fail, or its tokens are unknown', spanId)
    END AS source_reason,
    raw AS source_raw,
    spanId AS request_id__text, 'string' AS request_id__kind,
    startTimeUnixNano::VARCHAR AS received_at__text, NULL::VARCHAR AS received_at__kind,
    coalesce(response_model, request_model) AS model__text, 'string' AS model__kind,
    NULL::VARCHAR AS deployment_id__text, NULL::VARCHAR AS deployment_id__kind,
    coalesce(nullif(service_name, ''), 'unattributed') AS tenant_id__text, 'string' AS tenant_id__kind,
    conversation_id AS session_id__text, 'string' AS session_id__kind,
    CASE
        WHEN NOT failed THEN 'ok'
        WHEN error_type ILIKE '%rate_limit%' OR error_type ILIKE '%ratelimit%' OR error_type = '429' THEN 'rejected'
        WHEN error_type ILIKE '%timeout%' THEN 'timeout'
        ELSE 'error'
    END AS status__text, 'string' AS status__kind,
    coalesce(input_tokens, 0)::VARCHAR AS input_tokens__text, 'integer' AS input_tokens__kind,
    coalesce(cache_read_tokens, 0)::VARCHAR AS cached_input_tokens__text, 'integer' AS cached_input_tokens__kind,
    cache_creation_tokens::VARCHAR AS cache_write_tokens__text, 'integer' AS cache_write_tokens__kind,
    NULL::VARCHAR AS cache_write_1h_tokens__text, NULL::VARCHAR AS cache_write_1h_tokens__kind,
    coalesce(output_tokens, 0)::VARCHAR AS output_tokens__text, 'integer' AS output_tokens__kind,
    reasoning_tokens::VARCHAR AS reasoning_tokens__text, 'integer' AS reasoning_tokens__kind,
    -- a span times the whole call but not its first token: latency is not judged (latency_measured false)
    NULL::VARCHAR AS ttft_ms__text, NULL::VARCHAR AS ttft_ms__kind,
    ((epoch_us(endTimeUnixNano) - epoch_us(startTimeUnixNano)) / 1000.0)::VARCHAR AS e2e_ms__text, 'float' AS e2e_ms__kind,
    NULL::VARCHAR AS queue_ms__text, NULL::VARCHAR AS queue_ms__kind,
    NULL::VARCHAR AS itl_max_ms__text, NULL::VARCHAR AS itl_max_ms__kind,
    NULL::VARCHAR AS http_status__text, NULL::VARCHAR AS http_status__kind,
    CASE WHEN failed THEN error_type END AS error_type__text, 'string' AS error_type__kind,
    NULL::VARCHAR AS source_cost__text, NULL::VARCHAR AS source_cost__kind,
    'false' AS latency_measured__text, 'boolean' AS latency_measured__kind,
    NULL::VARCHAR AS prefix_block_hashes__text, NULL::VARCHAR AS prefix_block_hashes__kind,
    CASE WHEN service_tier = 'default' THEN 'standard'
         WHEN service_tier IN ('flex', 'priority') THEN service_tier END AS service_tier__text,
    'string' AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM s
