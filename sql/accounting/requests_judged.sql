-- Every request of the day judged against its model's SLO policy (docs/metrics.md, section 1): its UTC hour,
-- ISL bucket and TTFT limit, whether it reached the model, is effective, succeeded, failed, and complied.
-- A request without ttft_ms has no output token (the contract requires it otherwise); its wait for the whole
-- (empty) response, e2e_ms, is judged against the TTFT limit instead. A request whose source measures no latency
-- (latency_measured false: provider usage logs) counts in tokens and outcomes but is not judged (is_latency_judged false):
-- it is never compliant, and attainment is taken over judged requests only, so it neither meets nor breaks the SLO.
SELECT
    r.day,
    hour(timezone('UTC', r.received_at))::INTEGER AS hour,
    r.request_id,
    r.received_at,
    r.model,
    r.deployment_id,
    r.tenant_id,
    r.session_id,
    r.status,
    r.input_tokens,
    r.cached_input_tokens,
    coalesce(r.cache_write_tokens, 0) AS cache_write_tokens,
    coalesce(r.cache_write_1h_tokens, 0) AS cache_write_1h_tokens,
    r.output_tokens,
    r.reasoning_tokens,
    r.source_cost,
    r.ttft_ms,
    r.e2e_ms,
    r.queue_ms,
    r.itl_max_ms,
    p.slo_version,
    b.isl_bucket,
    b.ttft_limit_ms,
    p.itl_limit_ms,
    p.itl_missing,
    coalesce(r.latency_measured, true) AS is_timed,
    r.status <> 'rejected' AS is_reached,
    r.status <> 'cancelled' AS is_effective,
    r.status = 'ok' AS is_success,
    r.status IN ('error', 'timeout', 'disconnected', 'rejected') AS is_failure,
    is_effective AND is_timed AND r.output_tokens >= 2 AND r.itl_max_ms IS NULL AS is_itl_unknown,
    CASE WHEN r.output_tokens >= 2 THEN (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1) END AS tpot_ms,
    coalesce(r.ttft_ms, r.e2e_ms) <= b.ttft_limit_ms AS ttft_met,
    CASE
        WHEN r.output_tokens <= 1 THEN true
        WHEN r.itl_max_ms IS NULL THEN p.itl_missing = 'ignore'
        ELSE r.itl_max_ms <= p.itl_limit_ms
    END AS itl_met,
    is_effective AND is_timed AS is_latency_judged,
    coalesce(is_success AND is_timed AND ttft_met AND itl_met, false) AS is_compliant
FROM day_requests AS r
JOIN day_slo_policy AS p ON p.model = r.model
JOIN day_slo_isl_bucket AS b
  ON b.model = r.model
 AND r.input_tokens >= b.min_input_tokens
 AND (b.max_input_tokens IS NULL OR r.input_tokens < b.max_input_tokens)
