-- The points the work model of a deployment is fitted to from production when no load test fits (docs/metrics.md,
-- section 6, "Work model"; the coefficients are then labelled 'production'): every hour of the day with output and
-- GPU telemetry that was not over capacity (infra.load_hourly.over_capacity not true: an hour without a capacity
-- figure counts). x1 = recomputed input tokens/s and x2 = output tokens/s of the requests that reached the model
-- (core.usage_hourly); y = busy GPU-seconds per second: the hour's mean SM activity (else GPU utilization / 100)
-- times the GPUs measured (infra.gpu_usage_hourly).
WITH tokens AS (
    SELECT deployment_id, any_value(model) AS model, hour,
           sum(input_recomputed) / 3600.0 AS recomputed_input_token_rate,
           sum(output_tokens) / 3600.0 AS output_token_rate
    FROM day_usage
    GROUP BY deployment_id, hour
)
SELECT
    t.deployment_id,
    t.hour,
    t.recomputed_input_token_rate,
    t.output_token_rate,
    coalesce(g.sm_active_mean, g.util_mean_pct / 100.0) * g.gpus_measured AS busy_gpus
FROM tokens AS t
JOIN day_gpu_usage_hourly AS g ON g.deployment_id = t.deployment_id AND g.hour = t.hour
LEFT JOIN day_load_hourly AS l ON l.model = t.model AND l.hour = t.hour
WHERE l.over_capacity IS NOT TRUE
  AND t.output_token_rate > 0
  AND g.gpus_measured > 0
  AND coalesce(g.sm_active_mean, g.util_mean_pct) IS NOT NULL
ORDER BY t.deployment_id, t.hour
