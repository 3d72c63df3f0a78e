-- core.usage_hourly: the usage cube of the UTC day, one row per (hour, model, deployment_id, tenant_id,
-- isl_bucket) that had requests. Counts by outcome, the three input figures and output over reached requests,
-- output produced (successful) and compliant output (docs/metrics.md, sections 1-3), and the reasoning tokens
-- within output and within output produced where the sources report them.
SELECT
    $day::DATE AS day,
    hour,
    model,
    deployment_id,
    tenant_id,
    isl_bucket,
    any_value(slo_version) AS slo_version,
    count(*) AS requests,
    count(*) FILTER (WHERE is_reached) AS reached_requests,
    count(*) FILTER (WHERE is_effective) AS effective_requests,
    count(*) FILTER (WHERE is_success) AS successful_requests,
    count(*) FILTER (WHERE is_failure) AS failed_requests,
    count(*) FILTER (WHERE NOT is_effective) AS cancelled_requests,
    count(*) FILTER (WHERE is_compliant) AS compliant_requests,
    count(*) FILTER (WHERE is_latency_judged) AS judged_requests,
    count(*) FILTER (WHERE is_itl_unknown) AS itl_unknown_requests,
    coalesce(sum(input_tokens) FILTER (WHERE is_reached), 0)::BIGINT AS input_total,
    coalesce(sum(cached_input_tokens) FILTER (WHERE is_reached), 0)::BIGINT AS input_cached,
    (input_total - input_cached)::BIGINT AS input_recomputed,
    coalesce(sum(cache_write_tokens) FILTER (WHERE is_reached), 0)::BIGINT AS input_cache_write,
    coalesce(sum(cache_write_1h_tokens) FILTER (WHERE is_reached), 0)::BIGINT AS input_cache_write_1h,
    coalesce(sum(output_tokens) FILTER (WHERE is_reached), 0)::BIGINT AS output_tokens,
    coalesce(sum(output_tokens) FILTER (WHERE is_success), 0)::BIGINT AS output_produced,
    coalesce(sum(output_tokens) FILTER (WHERE is_compliant), 0)::BIGINT AS compliant_output_tokens,
    coalesce(sum(e2e_ms::DECIMAL(18, 3)) FILTER (WHERE is_success), 0)::DOUBLE AS e2e_ms_sum_successful,
    count(*) FILTER (WHERE is_success AND session_id IS NOT NULL) AS session_requests,
    coalesce(sum(output_tokens) FILTER (WHERE is_success AND session_id IS NOT NULL), 0)::BIGINT
        AS session_output_tokens,
    sum(source_cost) AS source_cost,
    -- reasoning is a part of output, never added to it; NULL where no request of the group reports it (a source
    -- without such a field), not 0
    sum(reasoning_tokens) FILTER (WHERE is_reached)::BIGINT AS reasoning_tokens,
    sum(reasoning_tokens) FILTER (WHERE is_success)::BIGINT AS reasoning_produced
FROM requests_judged
GROUP BY hour, model, deployment_id, tenant_id, isl_bucket
ORDER BY hour, model, deployment_id, tenant_id, isl_bucket
