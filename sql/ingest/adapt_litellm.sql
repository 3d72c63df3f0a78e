-- LiteLLM spend log records, typed by data_contracts/inputs/source_litellm.odcs.yaml (the relation "checked" below),
-- mapped onto the gateway_request contract as text and kinds. Each choice is explained in tokenledger/ingest/adapters/litellm.py.
-- A failure row is a request the provider refused or failed, of its model; one that names no model (a call refused
-- before a model was chosen) is counted as a failure of no model (failure_no_model), never quarantined.
WITH r AS (
    SELECT
        *,
        status = 'failure' AND reason IS NULL AND coalesce(nullif(model_group, ''), nullif(model, '')) IS NULL
            AS failure_no_model,
        CASE WHEN status = 'failure' THEN try_cast(error_code AS INTEGER) END AS failed_http_status,
        CASE WHEN status = 'failure' THEN coalesce(error_class, error_code) END AS failed_error_type,
        count(*) OVER (PARTITION BY session_id) AS session_rows,
        coalesce(cached_tokens, 0) + coalesce(cache_creation_tokens, 0) AS cache_parts,
        cache_hit = 'True' AS from_litellm_cache
    FROM ({checked})
)
SELECT
    source_line,
    line_problem,
    false AS not_request,
    zoneless_fields,
    failure_no_model,
    NULL::VARCHAR AS source_note,
    CASE
        WHEN failure_no_model
            THEN format('a failure row that names no model ({}): counted in the reconciliation''s failures_no_model',
                        concat_ws(' ', 'HTTP ' || failed_http_status, failed_error_type))
        ELSE reason
    END AS source_reason,
    raw AS source_raw,
    request_id AS request_id__text, 'string' AS request_id__kind,
    startTime::VARCHAR AS received_at__text, NULL::VARCHAR AS received_at__kind,
    coalesce(nullif(model_group, ''), model) AS model__text, 'string' AS model__kind,
    NULL::VARCHAR AS deployment_id__text, NULL::VARCHAR AS deployment_id__kind,
    coalesce(nullif(team_id, ''), nullif(end_user, ''), nullif("user", ''), nullif(key_alias, ''), 'unattributed')
        AS tenant_id__text, 'string' AS tenant_id__kind,
    CASE WHEN session_id IS NOT NULL AND session_rows > 1 THEN session_id END AS session_id__text,
    'string' AS session_id__kind,
    CASE
        WHEN status = 'success' THEN 'ok'
        ELSE {failure_status}
    END AS status__text, 'string' AS status__kind,
    CASE
        WHEN from_litellm_cache THEN prompt_tokens
        WHEN custom_llm_provider IN ('anthropic', 'bedrock', 'vertex_ai') AND prompt_tokens < cache_parts
            THEN prompt_tokens + cache_parts
        ELSE prompt_tokens
    END::VARCHAR AS input_tokens__text, 'integer' AS input_tokens__kind,
    (CASE WHEN from_litellm_cache THEN prompt_tokens ELSE coalesce(cached_tokens, 0) END)::VARCHAR
        AS cached_input_tokens__text, 'integer' AS cached_input_tokens__kind,
    cache_creation_tokens::VARCHAR AS cache_write_tokens__text, 'integer' AS cache_write_tokens__kind,
    NULL::VARCHAR AS cache_write_1h_tokens__text, NULL::VARCHAR AS cache_write_1h_tokens__kind,
    (CASE WHEN from_litellm_cache THEN 0 ELSE completion_tokens END)::VARCHAR AS output_tokens__text,
    'integer' AS output_tokens__kind,
    (CASE WHEN from_litellm_cache THEN 0 ELSE reasoning_tokens END)::VARCHAR AS reasoning_tokens__text,
    'integer' AS reasoning_tokens__kind,
    ((epoch_us(completionStartTime) - epoch_us(startTime)) / 1000)::VARCHAR AS ttft_ms__text,
    'float' AS ttft_ms__kind,
    coalesce(request_duration_ms, (epoch_us(endTime) - epoch_us(startTime)) / 1000)::VARCHAR AS e2e_ms__text,
    'float' AS e2e_ms__kind,
    NULL::VARCHAR AS queue_ms__text, NULL::VARCHAR AS queue_ms__kind,
    NULL::VARCHAR AS itl_max_ms__text, NULL::VARCHAR AS itl_max_ms__kind,
    CASE WHEN status = 'failure' THEN try_cast(error_code AS INTEGER)::VARCHAR END AS http_status__text,
    'integer' AS http_status__kind,
    CASE WHEN status = 'failure' THEN error_class END AS error_type__text, 'string' AS error_type__kind,
    spend::VARCHAR AS source_cost__text, 'float' AS source_cost__kind,
    'true' AS latency_measured__text, 'boolean' AS latency_measured__kind,
    -- the logs carry no prompt blocks: these requests stay out of the prefix-cache what-if
    NULL::VARCHAR AS prefix_block_hashes__text, NULL::VARCHAR AS prefix_block_hashes__kind,
    NULL::VARCHAR AS service_tier__text, NULL::VARCHAR AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM r
