-- core.gateway_requests: one row per request of the UTC day, typed by the gateway_request contract, duplicates
-- merged, with the file and line it came from. Only contract fields are kept.
SELECT
    $day::DATE AS day,
    c.request_id,
    c.received_at,
    c.model,
    c.deployment_id,
    c.tenant_id,
    c.session_id,
    c.status,
    c.input_tokens,
    c.cached_input_tokens,
    c.cache_write_tokens,
    c.cache_write_1h_tokens,
    c.output_tokens,
    c.ttft_ms,
    c.e2e_ms,
    c.queue_ms,
    c.itl_max_ms,
    c.http_status,
    c.error_type,
    c.reasoning_tokens,
    c.source_cost,
    c.latency_measured,
    c.prefix_block_hashes,
    c.service_tier,
    c.inference_region,
    c.source,
    c.source_file,
    c.source_line
FROM checked_gateway AS c
LEFT JOIN gateway_duplicates AS d ON d.request_id = c.request_id
WHERE c.reason IS NULL
  AND (d.request_id IS NULL OR (c.file_index = d.kept.file_index AND c.source_line = d.kept.source_line))
