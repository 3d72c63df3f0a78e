-- Every request of the day judged against its model's SLO policy (spec/metrics.md, section 1): its UTC hour,
-- ISL bucket and TTFT limit, whether it reached the model, is effective, succeeded, failed, and complied.
-- A request without ttft_ms has no output token (the contract requires it otherwise); its wait for the whole
-- (empty) response, e2e_ms, is judged against the TTFT limit instead.
SELECT
    r.day,
    hour(timezone('UTC', r.received_at))::INTEGER AS hour,
    r.request_id,
    r.model,
    r.deployment_id,
    r.tenant_id,
    r.session_id,
    r.status,
    r.input_tokens,
    r.cached_input_tokens,
    r.output_tokens,
    r.ttft_ms,
    r.e2e_ms,
    r.queue_ms,
    r.itl_max_ms,
    p.slo_version,
    b.isl_bucket,
    b.ttft_limit_ms,
    p.itl_limit_ms,
    p.itl_missing,
    r.status <> 'rejected' AS is_reached,
    r.status <> 'cancelled' AS is_effective,
    r.status = 'ok' AS is_success,
    r.status IN ('error', 'timeout', 'disconnected', 'rejected') AS is_failure,
    is_effective AND r.output_tokens >= 2 AND r.itl_max_ms IS NULL AS is_itl_unknown,
    CASE WHEN r.output_tokens >= 2 THEN (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1) END AS tpot_ms,
    coalesce(r.ttft_ms, r.e2e_ms) <= b.ttft_limit_ms AS ttft_met,
    CASE
        WHEN r.output_tokens <= 1 THEN true
        WHEN r.itl_max_ms IS NULL THEN p.itl_missing = 'ignore'
        ELSE r.itl_max_ms <= p.itl_limit_ms
    END AS itl_met,
    coalesce(is_success AND ttft_met AND itl_met, false) AS is_compliant
FROM day_requests AS r
JOIN day_slo_policy AS p ON p.model = r.model
JOIN day_slo_isl_bucket AS b
  ON b.model = r.model
 AND r.input_tokens >= b.min_input_tokens
 AND (b.max_input_tokens IS NULL OR r.input_tokens < b.max_input_tokens)
