-- What the capacity plan of each deployment in force on the UTC day starts from (docs/metrics.md, section 6): the
-- planning peak's arrival rate by the policy's peak_basis (busiest_5min: the most requests received in 5
-- consecutive minutes, windows sliding by the minute within the day, / 300 s; busiest_hour: the busiest UTC hour's
-- requests / 3,600 s), counting every request received whatever its status; the mean and P99 E2E of successful
-- requests (the service times of Erlang C and of seed 000's rule); the inventory at the end of the day; the SLO
-- policy's wait limit, target and headroom; the model's load curve (infra.load_hourly); for seed 002's sizing, the
-- output token rate (and, for the work model, the recomputed input rate) of the requests received in the planning
-- peak window that reached the model and the capacity
-- goodput per GPU the day published (infra.capacity_daily, with a verified load test's concurrency per replica
-- for an inventory without slots_per_replica); and for the review's Lag, the inventory's scale-out and warm-up
-- minutes and the output token rate of the same-width window that many minutes before the peak; for the failure
-- headroom and the units, the policy's failure domain and the inventory's GPUs per node, nodes per rack and unit bought.
-- tokenledger.capacity.day turns each row into the plan (sql/capacity/capacity_plan_daily.sql writes it).
WITH configuration AS (
    SELECT
        deployment_id,
        arg_max(model, in_force_to) AS model,
        arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica,
        arg_max(slots_per_replica, in_force_to) AS slots_per_replica,
        arg_max(scale_out_minutes, in_force_to) AS scale_out_minutes,
        arg_max(warmup_minutes, in_force_to) AS warmup_minutes,
        -- failure domains and the unit bought (docs/metrics.md, section 6, "Failure domains")
        arg_max(gpus_per_node, in_force_to) AS gpus_per_node,
        arg_max(nodes_per_rack, in_force_to) AS nodes_per_rack,
        arg_max(bought_in, in_force_to) AS bought_in,
        arg_max(config_line, in_force_to) AS config_line,
        coalesce(sum(gpus) FILTER (WHERE in_force_to = $day_end::TIMESTAMPTZ), 0) AS gpus_deployed
    FROM day_deployments
    WHERE kind = 'gpu'  -- a hosted-API model's capacity is its rate limits (infra.load_hourly)
    GROUP BY deployment_id
),
minute_counts AS (
    SELECT
        deployment_id,
        (epoch_us(received_at) - epoch_us($day_start::TIMESTAMPTZ)) // 60000000 AS minute,
        count(*) AS requests,
        -- the demand on the GPUs: output of the requests that reached the model (as infra.load_hourly)
        coalesce(sum(output_tokens) FILTER (WHERE status <> 'rejected'), 0) AS output_tokens,
        -- and the input it computed again (the work model's prefill)
        coalesce(sum(input_tokens - coalesce(cached_input_tokens, 0)) FILTER (WHERE status <> 'rejected'), 0)
            AS recomputed_tokens
    FROM day_requests
    GROUP BY ALL
),
grid AS (
    SELECT c.deployment_id, m.range AS minute, coalesce(n.requests, 0) AS requests,
           coalesce(n.output_tokens, 0) AS output_tokens, coalesce(n.recomputed_tokens, 0) AS recomputed_tokens
    FROM configuration AS c
    CROSS JOIN range(epoch($day_end::TIMESTAMPTZ - $day_start::TIMESTAMPTZ)::BIGINT // 60) AS m
    LEFT JOIN minute_counts AS n ON n.deployment_id = c.deployment_id AND n.minute = m.range
),
five_minutes AS (
    SELECT
        deployment_id,
        minute,
        sum(requests) OVER w AS requests,
        sum(output_tokens) OVER w AS output_tokens,
        sum(recomputed_tokens) OVER w AS recomputed_tokens
    FROM grid
    WINDOW w AS (PARTITION BY deployment_id ORDER BY minute ROWS BETWEEN CURRENT ROW AND 4 FOLLOWING)
),
busiest_5min AS (
    SELECT
        deployment_id,
        first(minute ORDER BY requests DESC, minute) AS minute,
        max(requests) AS requests,
        first(output_tokens ORDER BY requests DESC, minute) AS output_tokens,
        first(recomputed_tokens ORDER BY requests DESC, minute) AS recomputed_tokens
    FROM five_minutes
    GROUP BY deployment_id
),
busiest_hour AS (
    SELECT
        deployment_id,
        first(hour ORDER BY requests DESC, hour) AS hour,
        max(requests) AS requests,
        first(output_tokens ORDER BY requests DESC, hour) AS output_tokens,
        first(recomputed_tokens ORDER BY requests DESC, hour) AS recomputed_tokens
    FROM (SELECT deployment_id, minute // 60 AS hour, sum(requests) AS requests, sum(output_tokens) AS output_tokens,
                 sum(recomputed_tokens) AS recomputed_tokens
          FROM grid GROUP BY ALL)
    GROUP BY deployment_id
),
-- The planning peak window of each deployment (first minute, width in minutes) by the policy's peak_basis.
peak AS (
    SELECT
        c.deployment_id,
        p.peak_basis,
        CASE p.peak_basis WHEN 'busiest_hour' THEN bh.hour * 60 ELSE b5.minute END AS start_minute,
        CASE p.peak_basis WHEN 'busiest_hour' THEN 60 ELSE 5 END AS width_minutes,
        CASE p.peak_basis WHEN 'busiest_hour' THEN bh.requests ELSE b5.requests END AS requests,
        CASE p.peak_basis WHEN 'busiest_hour' THEN bh.output_tokens ELSE b5.output_tokens END AS output_tokens,
        CASE p.peak_basis WHEN 'busiest_hour' THEN bh.recomputed_tokens ELSE b5.recomputed_tokens END
            AS recomputed_tokens,
        -- The lag (scale-out plus warm-up) in whole minutes; NULL when the inventory gives neither.
        CASE WHEN c.scale_out_minutes IS NOT NULL OR c.warmup_minutes IS NOT NULL
             THEN round(coalesce(c.scale_out_minutes, 0) + coalesce(c.warmup_minutes, 0))::BIGINT END AS lag_minutes
    FROM configuration AS c
    JOIN day_slo_policy AS p ON p.model = c.model
    LEFT JOIN busiest_5min AS b5 ON b5.deployment_id = c.deployment_id
    LEFT JOIN busiest_hour AS bh ON bh.deployment_id = c.deployment_id
),
-- The same-width window lag_minutes before the peak window (from midnight at the earliest): the demand a
-- scale-out started then would have found, so peak minus it is how much demand grows while one is under way.
before_peak AS (
    SELECT
        k.deployment_id,
        sum(g.output_tokens) / (k.width_minutes * 60.0) AS output_token_rate
    FROM peak AS k
    JOIN grid AS g
      ON g.deployment_id = k.deployment_id
     AND g.minute >= greatest(k.start_minute - k.lag_minutes, 0)
     AND g.minute < greatest(k.start_minute - k.lag_minutes, 0) + k.width_minutes
    WHERE k.lag_minutes IS NOT NULL
    GROUP BY k.deployment_id, k.width_minutes
),
service AS (
    SELECT
        deployment_id,
        count(*) AS requests,
        count(*) FILTER (WHERE status = 'ok') AS successful_requests,
        -- summed in DECIMAL: a parallel DOUBLE sum depends on thread timing, and a re-run must be identical
        (avg(e2e_ms::DECIMAL(18, 3)) FILTER (WHERE status = 'ok'))::DOUBLE / 1000.0 AS mean_service_time_s,
        quantile_cont(e2e_ms, 0.99) FILTER (WHERE status = 'ok') / 1000.0 AS p99_service_time_s
    FROM day_requests
    GROUP BY deployment_id
),
load AS (
    SELECT
        model,
        max(requests) / nullif(avg(requests), 0) AS peak_to_mean,
        count(*) FILTER (WHERE over_capacity) AS hours_over_capacity,
        max(backlog_tokens) AS max_backlog_tokens
    FROM day_load_hourly
    GROUP BY model
)
SELECT
    c.model,
    c.deployment_id,
    k.peak_basis,
    $day_start::TIMESTAMPTZ + to_minutes(k.start_minute) AS peak_window_start,
    $day_start::TIMESTAMPTZ + to_minutes(k.start_minute + k.width_minutes) AS peak_window_end,
    coalesce(k.requests, 0)::BIGINT AS peak_requests,
    coalesce(k.requests, 0) / (k.width_minutes * 60.0) AS peak_arrival_rate,
    coalesce(k.output_tokens, 0)::BIGINT AS peak_output_tokens,
    coalesce(k.output_tokens, 0) / (k.width_minutes * 60.0) AS peak_output_token_rate,
    coalesce(k.recomputed_tokens, 0) / (k.width_minutes * 60.0) AS peak_recomputed_input_token_rate,
    coalesce(s.requests, 0)::BIGINT AS requests,
    coalesce(s.successful_requests, 0)::BIGINT AS successful_requests,
    s.mean_service_time_s,
    s.p99_service_time_s,
    c.gpus_per_replica,
    c.slots_per_replica,
    c.gpus_deployed,
    p.queue_p99_ms,
    p.attainment_target,
    p.headroom_n_minus_k,
    p.headroom_scaling_lag_pct,
    p.headroom_forecast_error_pct,
    p.headroom_release_pct,
    p.headroom_jitter_pct,
    l.peak_to_mean,
    coalesce(l.hours_over_capacity, 0)::BIGINT AS hours_over_capacity,
    l.max_backlog_tokens,
    p.slo_version,
    cap.capacity_goodput_per_gpu,
    cap.capacity_source,
    cap.capacity_verified,
    cap.loadtest_slots_per_replica,
    c.scale_out_minutes,
    c.warmup_minutes,
    k.lag_minutes,
    bp.output_token_rate AS lag_start_output_token_rate,
    p.headroom_failure_domain,
    c.gpus_per_node,
    c.nodes_per_rack,
    c.bought_in,
    c.config_line
FROM configuration AS c
JOIN day_slo_policy AS p ON p.model = c.model
JOIN peak AS k ON k.deployment_id = c.deployment_id
LEFT JOIN before_peak AS bp ON bp.deployment_id = c.deployment_id
LEFT JOIN day_capacity AS cap ON cap.deployment_id = c.deployment_id
LEFT JOIN service AS s ON s.deployment_id = c.deployment_id
LEFT JOIN load AS l ON l.model = c.model
ORDER BY c.model, c.deployment_id
