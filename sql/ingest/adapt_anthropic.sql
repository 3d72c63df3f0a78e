-- Anthropic Messages and Claude Code session records, typed by data_contracts/inputs/source_anthropic.odcs.yaml (the
-- relation "checked" below), mapped onto the gateway_request contract as text and kinds. Each choice is explained
-- in tokenledger/ingest/adapters/anthropic.py. The records of one message id within the file (one per content block of a
-- reply, and snapshots of a stream whose output grows) all map to the same values: the first timestamp, and the
-- usage of the final record (the one with a stop_reason, then the largest token total), so that the day's
-- de-duplication merges them into one request.
WITH r AS (
    SELECT
        *,
        line_problem IS NULL AND (coalesce(type NOT IN ('assistant', 'message', 'error'), false)
                                  OR coalesce(isApiErrorMessage, false)
                                  OR coalesce(model = '<synthetic>', false)) AS not_request
    FROM ({checked})
), v AS (
    SELECT
        *,
        reason IS NULL AND line_problem IS NULL AND NOT not_request AND coalesce(type <> 'error', false)
            AND timestamp IS NOT NULL
            AS valid,
        coalesce(cache_creation_input_tokens, ephemeral_5m_input_tokens + ephemeral_1h_input_tokens)
            AS cache_creation
    FROM r
), best AS (
    SELECT
        *,
        min(timestamp) OVER (PARTITION BY id, valid) AS first_seen,
        first_value({
            'model': model, 'session_id': sessionId, 'tenant': coalesce(nullif(tenant_id, ''), 'unattributed'),
            'uncached': input_tokens, 'cache_read': cache_read_input_tokens, 'cache_creation': cache_creation,
            'cache_creation_1h': ephemeral_1h_input_tokens,
            'output': output_tokens, 'thinking': thinking_tokens, 'service_tier': service_tier
        }) OVER (
            PARTITION BY id, valid
            ORDER BY stop_reason IS NOT NULL DESC,
                     input_tokens + coalesce(cache_read_input_tokens, 0) + coalesce(cache_creation, 0)
                         + output_tokens DESC,
                     source_line DESC
        ) AS f
    FROM v
)
SELECT
    source_line,
    line_problem,
    not_request,
    NULL::VARCHAR AS source_note,
    CASE
        WHEN line_problem IS NOT NULL THEN NULL
        WHEN not_request AND coalesce(isApiErrorMessage, false)
            THEN 'not a request record: isApiErrorMessage is true: Claude Code''s notice that a call failed, with no '
                 'model, message id or usage of its own; counted here, never accounted'
        WHEN not_request AND type IN ('assistant', 'message')
            THEN 'not a request record: model <synthetic> marks a message Claude Code wrote itself, not a model '
                 'call; counted here, never accounted'
        WHEN not_request
            THEN format('not a request record: type {} is a record Claude Code writes beside the model''s replies '
                        '(only assistant records and Messages are requests); counted here, never accounted',
                        left(type, 64))
        WHEN type = 'error'
            THEN format('type: error: an error body ({}) has no model, message id or usage to account the failed '
                        'call by', coalesce('error.type ' || error_type, 'no error.type'))
        WHEN reason IS NOT NULL THEN reason
        WHEN timestamp IS NULL
            THEN 'timestamp: missing: a Message carries no time of its own; log the time its response arrived '
                 'beside it as timestamp (ISO 8601 or Unix seconds)'
    END AS source_reason,
    raw AS source_raw,
    id AS request_id__text, 'string' AS request_id__kind,
    -- A record that is not a request falls on no day; a quarantined one keeps its own time.
    (CASE WHEN not_request THEN NULL WHEN valid THEN first_seen ELSE timestamp END)::VARCHAR AS received_at__text,
    NULL::VARCHAR AS received_at__kind,
    f.model AS model__text, 'string' AS model__kind,
    NULL::VARCHAR AS deployment_id__text, NULL::VARCHAR AS deployment_id__kind,
    f.tenant AS tenant_id__text, 'string' AS tenant_id__kind,
    f.session_id AS session_id__text, 'string' AS session_id__kind,
    'ok' AS status__text, 'string' AS status__kind,
    (f.uncached + coalesce(f.cache_read, 0) + coalesce(f.cache_creation, 0))::VARCHAR AS input_tokens__text,
    'integer' AS input_tokens__kind,
    coalesce(f.cache_read, 0)::VARCHAR AS cached_input_tokens__text, 'integer' AS cached_input_tokens__kind,
    f.cache_creation::VARCHAR AS cache_write_tokens__text, 'integer' AS cache_write_tokens__kind,
    -- the one-hour writes, priced apart (costs.yaml cache_write_1h_per_mtok); never more than the writes
    least(f.cache_creation_1h, f.cache_creation)::VARCHAR AS cache_write_1h_tokens__text,
    'integer' AS cache_write_1h_tokens__kind,
    f.output::VARCHAR AS output_tokens__text, 'integer' AS output_tokens__kind,
    f.thinking::VARCHAR AS reasoning_tokens__text, 'integer' AS reasoning_tokens__kind,
    NULL::VARCHAR AS ttft_ms__text, NULL::VARCHAR AS ttft_ms__kind,
    NULL::VARCHAR AS e2e_ms__text, NULL::VARCHAR AS e2e_ms__kind,
    NULL::VARCHAR AS queue_ms__text, NULL::VARCHAR AS queue_ms__kind,
    NULL::VARCHAR AS itl_max_ms__text, NULL::VARCHAR AS itl_max_ms__kind,
    NULL::VARCHAR AS http_status__text, NULL::VARCHAR AS http_status__kind,
    NULL::VARCHAR AS error_type__text, NULL::VARCHAR AS error_type__kind,
    NULL::VARCHAR AS source_cost__text, NULL::VARCHAR AS source_cost__kind,
    'false' AS latency_measured__text, 'boolean' AS latency_measured__kind,
    -- the logs carry no prompt blocks: these requests stay out of the prefix-cache what-if
    NULL::VARCHAR AS prefix_block_hashes__text, NULL::VARCHAR AS prefix_block_hashes__kind,
    CASE WHEN f.service_tier IN ('standard', 'priority', 'batch') THEN f.service_tier END AS service_tier__text,
    'string' AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM best
