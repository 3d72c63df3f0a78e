-- What infra.capacity_model_daily starts from, one row per GPU deployment in force on the UTC day (docs/metrics.md,
-- section 6, "Work model" and "Load tests checked against production"): production's mix of the day (the effective
-- requests, i.e. not cancelled, as a load-test step counts them: ISL and OSL P50 and P90, cached share, recomputed
-- input and output per request, recomputed input per output token); the load test that speaks for the deployment
-- (capacity_model_test: sql/capacity/capacity_loadtest_choice.sql) with the mix of its lambda_slo_max step (the
-- capacity point) and its age; the capacity the day published (infra.capacity_daily); the planning peak's output and
-- recomputed input rates (capacity_model_peak: sql/capacity/capacity_plan_inputs.sql); and the SLO policy's
-- load-test age limit and likeness tolerances. tokenledger.capacity.day fits the work model and judges the test.
WITH configuration AS (
    SELECT deployment_id, arg_max(model, in_force_to) AS model,
           arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica
    FROM day_deployments
    WHERE kind = 'gpu'
    GROUP BY deployment_id
),
production AS (
    SELECT
        deployment_id,
        count(*) AS requests,
        quantile_disc(input_tokens, 0.5) AS isl_p50,
        quantile_disc(input_tokens, 0.9) AS isl_p90,
        quantile_disc(output_tokens, 0.5) AS osl_p50,
        quantile_disc(output_tokens, 0.9) AS osl_p90,
        sum(input_tokens) AS input_total,
        sum(coalesce(cached_input_tokens, 0)) AS input_cached,
        sum(output_tokens) AS output_tokens
    FROM requests_judged
    WHERE is_effective
    GROUP BY deployment_id
),
capacity_step AS (
    SELECT
        run_id,
        effective_requests,
        isl_p50, isl_p90, osl_p50, osl_p90,
        input_total, input_cached, input_recomputed, effective_output_tokens
    FROM loadtest_history
    WHERE is_lambda_slo_max_step
)
SELECT
    c.model,
    c.deployment_id,
    c.gpus_per_replica,
    coalesce(p.requests, 0)::BIGINT AS requests,
    p.isl_p50::DOUBLE AS isl_p50,
    p.isl_p90::DOUBLE AS isl_p90,
    p.osl_p50::DOUBLE AS osl_p50,
    p.osl_p90::DOUBLE AS osl_p90,
    p.input_cached / nullif(p.input_total, 0)::DOUBLE AS cached_share,
    (p.input_total - p.input_cached) / nullif(p.requests, 0)::DOUBLE AS recomputed_input_per_request,
    p.output_tokens / nullif(p.requests, 0)::DOUBLE AS output_per_request,
    (p.input_total - p.input_cached) / nullif(p.output_tokens, 0)::DOUBLE AS recomputed_per_output_token,
    t.loadtest_run_id,
    t.loadtest_start,
    t.loadtest_verified,
    t.lambda_slo_max AS loadtest_lambda_slo_max,
    t.other_configuration_run_id,
    t.other_configuration_run_start,
    t.other_configuration_differences,
    ($day::DATE - timezone('UTC', t.loadtest_start)::DATE)::INTEGER AS loadtest_age_days,
    s.effective_requests::BIGINT AS loadtest_requests,
    s.isl_p50::DOUBLE AS loadtest_isl_p50,
    s.isl_p90::DOUBLE AS loadtest_isl_p90,
    s.osl_p50::DOUBLE AS loadtest_osl_p50,
    s.osl_p90::DOUBLE AS loadtest_osl_p90,
    s.input_cached / nullif(s.input_total, 0)::DOUBLE AS loadtest_cached_share,
    s.input_recomputed / nullif(s.effective_requests, 0)::DOUBLE AS loadtest_recomputed_input_per_request,
    s.effective_output_tokens / nullif(s.effective_requests, 0)::DOUBLE AS loadtest_output_per_request,
    s.input_recomputed / nullif(s.effective_output_tokens, 0)::DOUBLE AS loadtest_recomputed_per_output_token,
    cap.capacity_goodput_per_gpu,
    cap.capacity_source,
    cap.loadtest_run_id AS capacity_loadtest_run_id,
    k.peak_output_token_rate,
    k.peak_recomputed_input_token_rate,
    pol.loadtest_max_age_days,
    pol.loadtest_recomputed_input_tolerance_pct,
    pol.loadtest_isl_p90_tolerance_pct
FROM configuration AS c
JOIN day_slo_policy AS pol ON pol.model = c.model
LEFT JOIN production AS p ON p.deployment_id = c.deployment_id
LEFT JOIN capacity_model_test AS t ON t.deployment_id = c.deployment_id
LEFT JOIN capacity_step AS s ON s.run_id = t.loadtest_run_id
LEFT JOIN day_capacity AS cap ON cap.deployment_id = c.deployment_id
LEFT JOIN capacity_model_peak AS k ON k.deployment_id = c.deployment_id
ORDER BY c.model, c.deployment_id
