-- OpenAI response objects, stream chunks and Batch output lines, typed by data_contracts/inputs/source_openai.odcs.yaml
-- (the relation "checked" below), mapped onto the gateway_request contract as text and kinds. Each choice is
-- explained in tokenledger/ingest/adapters/openai.py. The copies of one id within the file (the chunks of a stream,
-- snapshots of a Response) all map to the values of its final copy, the one with usage and a finished status, so
-- that the day's de-duplication merges them into one request. A Batch request that failed names no model (its
-- output line has none): counted as a failure of no model (failure_no_model), never quarantined.
WITH r AS (
    SELECT
        *,
        reason IS NULL AND line_problem IS NULL AS valid,
        coalesce(prompt_tokens, input_tokens) IS NOT NULL AS has_usage,
        custom_id IS NOT NULL AND coalesce(status_code >= 400, true) AS batch_failed
    FROM ({checked})
), best AS (
    SELECT
        *,
        first_value({
            'object': "object", 'status': status, 'error_code': error_code,
            'received_at': coalesce(created, created_at), 'model': model,
            'input': coalesce(prompt_tokens, input_tokens), 'output': coalesce(completion_tokens, output_tokens),
            'cached': cached_tokens, 'cache_write': cache_write_tokens, 'reasoning': reasoning_tokens,
            'service_tier': CASE WHEN custom_id IS NOT NULL THEN 'batch' ELSE service_tier END,
            'tenant': coalesce(nullif(metadata_tenant_id, ''), nullif("user", ''), 'unattributed'),
            'has_usage': has_usage
        }) OVER (
            PARTITION BY id, valid
            ORDER BY has_usage DESC,
                     coalesce(status, 'completed') IN ('completed', 'incomplete', 'failed', 'cancelled') DESC,
                     coalesce(prompt_tokens, input_tokens, 0) + coalesce(completion_tokens, output_tokens, 0) DESC,
                     source_line DESC
        ) AS f
    FROM r
), mapped AS (
    SELECT
        *,
        valid AND batch_failed AS failure_no_model,
        -- a failed Batch request's status and error code; a failed Response's error code
        CASE WHEN valid AND batch_failed THEN status_code END AS failed_http_status,
        CASE WHEN valid AND batch_failed THEN error_code ELSE f.error_code END AS failed_error_type,
        CASE
            WHEN NOT valid THEN reason
            WHEN batch_failed
                THEN format('a failed Batch request names no model ({}): counted in the reconciliation''s '
                            'failures_no_model', concat_ws(' ', 'HTTP ' || status_code, coalesce(error_code, 'no error code')))
            WHEN "object" IS NULL
                THEN 'object: missing: the line is not a chat completion, a response or a Batch output line'
            WHEN f.status IN ('in_progress', 'queued')
                THEN format('status: {}: the response had not finished when it was logged; log it once completed',
                            f.status)
            WHEN NOT f.has_usage AND f.output IS NOT NULL
                THEN format('prompt_tokens (or input_tokens): required: the usage of this {} counts output tokens '
                            'but no prompt tokens', f."object")
            WHEN NOT f.has_usage AND f."object" = 'chat.completion.chunk'
                THEN 'usage: missing on every chunk of this stream: request it with stream_options.include_usage'
            WHEN NOT f.has_usage AND coalesce(f.status, 'completed') NOT IN ('failed', 'cancelled')
                THEN format('usage: missing on a {} that did not fail, so its tokens are unknown', f."object")
        END AS source_reason,
        -- A failed or cancelled Response that carries no usage used no tokens (usage is null on failure).
        CASE WHEN f.has_usage THEN f.input ELSE 0 END AS input,
        CASE WHEN f.has_usage THEN f.output ELSE 0 END AS output
    FROM best
)
SELECT
    source_line,
    line_problem,
    false AS not_request,
    zoneless_fields,
    failure_no_model,
    NULL::VARCHAR AS source_note,
    source_reason,
    raw AS source_raw,
    id AS request_id__text, 'string' AS request_id__kind,
    (CASE WHEN valid THEN f.received_at ELSE coalesce(created, created_at) END)::VARCHAR AS received_at__text,
    NULL::VARCHAR AS received_at__kind,
    f.model AS model__text, 'string' AS model__kind,
    NULL::VARCHAR AS deployment_id__text, NULL::VARCHAR AS deployment_id__kind,
    f.tenant AS tenant_id__text, 'string' AS tenant_id__kind,
    NULL::VARCHAR AS session_id__text, NULL::VARCHAR AS session_id__kind,
    CASE
        WHEN failure_no_model THEN {failure_status}
        WHEN f.status = 'cancelled' THEN 'cancelled'
        WHEN f.status <> 'failed' OR f.status IS NULL THEN 'ok'
        ELSE {failure_status}
    END AS status__text, 'string' AS status__kind,
    input::VARCHAR AS input_tokens__text, 'integer' AS input_tokens__kind,
    (CASE WHEN f.has_usage THEN coalesce(f.cached, 0) ELSE 0 END)::VARCHAR AS cached_input_tokens__text,
    'integer' AS cached_input_tokens__kind,
    f.cache_write::VARCHAR AS cache_write_tokens__text, 'integer' AS cache_write_tokens__kind,
    NULL::VARCHAR AS cache_write_1h_tokens__text, NULL::VARCHAR AS cache_write_1h_tokens__kind,
    output::VARCHAR AS output_tokens__text, 'integer' AS output_tokens__kind,
    f.reasoning::VARCHAR AS reasoning_tokens__text, 'integer' AS reasoning_tokens__kind,
    NULL::VARCHAR AS ttft_ms__text, NULL::VARCHAR AS ttft_ms__kind,
    NULL::VARCHAR AS e2e_ms__text, NULL::VARCHAR AS e2e_ms__kind,
    NULL::VARCHAR AS queue_ms__text, NULL::VARCHAR AS queue_ms__kind,
    NULL::VARCHAR AS itl_max_ms__text, NULL::VARCHAR AS itl_max_ms__kind,
    CASE WHEN failure_no_model THEN status_code END::VARCHAR AS http_status__text, 'integer' AS http_status__kind,
    CASE WHEN failure_no_model THEN error_code WHEN f.status = 'failed' THEN f.error_code END AS error_type__text,
    'string' AS error_type__kind,
    NULL::VARCHAR AS source_cost__text, NULL::VARCHAR AS source_cost__kind,
    'false' AS latency_measured__text, 'boolean' AS latency_measured__kind,
    -- the logs carry no prompt blocks: these requests stay out of the prefix-cache what-if
    NULL::VARCHAR AS prefix_block_hashes__text, NULL::VARCHAR AS prefix_block_hashes__kind,
    -- the tier that served it, as the response says (default is standard; scale and anything else: unknown here,
    -- so the deployment's service_tier applies)
    CASE WHEN f.service_tier = 'default' THEN 'standard'
         WHEN f.service_tier IN ('flex', 'priority', 'batch') THEN f.service_tier END AS service_tier__text,
    'string' AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM mapped
