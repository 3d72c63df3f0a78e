-- Anthropic Messages and Claude Code session records, typed by data_contracts/inputs/source_anthropic.odcs.yaml (the
-- relation "checked" below), mapped onto the gateway_request contract as text and kinds. Each choice is explained
-- in tokenledger/ingest/adapters/anthropic.py. The records of one message id within the file (one per content block of a
-- reply, and snapshots of a stream whose output grows) all map to the same values: the first timestamp, and the
-- usage of the final record (the one with a stop_reason, then the largest token total), so that the day's
-- de-duplication merges them into one request.
-- An error body (type error) or Claude Code's isApiErrorMessage record is a call the API refused or failed: a
-- failed request of the model the logging code wrote beside it, each with its own values, else a failure that names
-- no model (failure_no_model), counted apart in the reconciliation. Never quarantined for being an error.
WITH r AS (
    SELECT
        *,
        line_problem IS NULL AND (coalesce(type = 'error', false) OR coalesce(isApiErrorMessage, false))
            AS is_failure,
        status_code AS failed_http_status,
        error_type AS failed_error_type
    FROM ({checked})
), k AS (
    SELECT
        *,
        line_problem IS NULL AND NOT is_failure AND (coalesce(type NOT IN ('assistant', 'message', 'error'), false)
                                                     OR coalesce(model = '<synthetic>', false)) AS not_request,
        is_failure AND reason IS NULL AND coalesce(model, '<synthetic>') = '<synthetic>' AS failure_no_model
    FROM r
), v AS (
    SELECT
        *,
        reason IS NULL AND line_problem IS NULL AND NOT not_request AND NOT is_failure AND timestamp IS NOT NULL
            AS valid,
        coalesce(cache_creation_input_tokens, ephemeral_5m_input_tokens + ephemeral_1h_input_tokens)
            AS cache_creation
    FROM k
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
    WHERE NOT is_failure
    UNION ALL
    -- a failure is one call of its own: its values are its own, never another record's
    SELECT
        *,
        timestamp AS first_seen,
        {
            'model': model, 'session_id': sessionId, 'tenant': coalesce(nullif(tenant_id, ''), 'unattributed'),
            'uncached': 0, 'cache_read': 0, 'cache_creation': NULL::BIGINT, 'cache_creation_1h': NULL::BIGINT,
            'output': 0, 'thinking': NULL::BIGINT, 'service_tier': NULL::VARCHAR
        } AS f
    FROM v
    WHERE is_failure
)
SELECT
    source_line,
    line_problem,
    not_request,
    zoneless_fields,
    failure_no_model,
    NULL::VARCHAR AS source_note,
    CASE
        WHEN line_problem IS NOT NULL THEN NULL
        WHEN not_request AND type IN ('assistant', 'message')
            THEN 'not a request record: model <synthetic> marks a message Claude Code wrote itself, not a model '
                 'call; counted here, never accounted'
        WHEN not_request
            THEN format('not a request record: type {} is a record Claude Code writes beside the model''s replies '
                        '(only assistant records and Messages are requests); counted here, never accounted',
                        left(type, 64))
        WHEN reason IS NOT NULL THEN reason
        WHEN failure_no_model
            THEN format('a failed call that names no model ({}): counted in the reconciliation''s failures_no_model',
                        concat_ws(' ', 'HTTP ' || failed_http_status, failed_error_type))
        WHEN timestamp IS NULL AND is_failure
            THEN 'timestamp: missing: an error body carries no time of its own; log the time the error arrived '
                 'beside it as timestamp (ISO 8601 or Unix seconds)'
        WHEN timestamp IS NULL
            THEN 'timestamp: missing: a Message carries no time of its own; log the time its response arrived '
                 'beside it as timestamp (ISO 8601 or Unix seconds)'
    END AS source_reason,
    raw AS source_raw,
    CASE
        WHEN NOT is_failure THEN id
        -- the API's request id names the failed call; without one, the line it was logged on does
        ELSE coalesce(request_id, 'error-' || md5(concat_ws(':', $file, source_line)))
    END AS request_id__text, 'string' AS request_id__kind,
    -- A record that is not a request falls on no day; a quarantined one keeps its own time.
    (CASE WHEN not_request OR failure_no_model THEN NULL WHEN valid THEN first_seen ELSE timestamp END)::VARCHAR
        AS received_at__text,
    NULL::VARCHAR AS received_at__kind,
    f.model AS model__text, 'string' AS model__kind,
    NULL::VARCHAR AS deployment_id__text, NULL::VARCHAR AS deployment_id__kind,
    f.tenant AS tenant_id__text, 'string' AS tenant_id__kind,
    f.session_id AS session_id__text, 'string' AS session_id__kind,
    CASE WHEN is_failure THEN {failure_status} ELSE 'ok' END AS status__text, 'string' AS status__kind,
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
    CASE WHEN is_failure THEN failed_http_status END::VARCHAR AS http_status__text, 'integer' AS http_status__kind,
    CASE WHEN is_failure THEN failed_error_type END AS error_type__text, 'string' AS error_type__kind,
    NULL::VARCHAR AS source_cost__text, NULL::VARCHAR AS source_cost__kind,
    'false' AS latency_measured__text, 'boolean' AS latency_measured__kind,
    -- the logs carry no prompt blocks: these requests stay out of the prefix-cache what-if
    NULL::VARCHAR AS prefix_block_hashes__text, NULL::VARCHAR AS prefix_block_hashes__kind,
    CASE WHEN f.service_tier IN ('standard', 'priority', 'batch') THEN f.service_tier END AS service_tier__text,
    'string' AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM best
