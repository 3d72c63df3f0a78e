-- What the capacity plan of each deployment in force on the UTC day starts from (spec/metrics.md, section 6): the
-- planning peak's arrival rate by the policy's peak_basis (busiest_5min: the most requests received in 5
-- consecutive minutes, windows sliding by the minute within the day, / 300 s; busiest_hour: the busiest UTC hour's
-- requests / 3,600 s), counting every request received whatever its status; the mean and P99 E2E of successful
-- requests (the service times of Erlang C and of seed 000's rule); the inventory at the end of the day; the SLO
-- policy's wait limit, target and headroom; and the model's load curve (infra.load_hourly). tokenledger.capacity
-- turns each row into the plan (sql/capacity_plan_daily.sql writes it).
WITH configuration AS (
    SELECT
        deployment_id,
        arg_max(model, in_force_to) AS model,
        arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica,
        arg_max(slots_per_replica, in_force_to) AS slots_per_replica,
        coalesce(sum(gpus) FILTER (WHERE in_force_to = $day_end::TIMESTAMPTZ), 0) AS gpus_deployed
    FROM day_deployments
    GROUP BY deployment_id
),
minute_counts AS (
    SELECT
        deployment_id,
        (epoch_us(received_at) - epoch_us($day_start::TIMESTAMPTZ)) // 60000000 AS minute,
        count(*) AS requests
    FROM day_requests
    GROUP BY ALL
),
grid AS (
    SELECT c.deployment_id, m.range AS minute
    FROM configuration AS c
    CROSS JOIN range(epoch($day_end::TIMESTAMPTZ - $day_start::TIMESTAMPTZ)::BIGINT // 60) AS m
),
five_minutes AS (
    SELECT
        g.deployment_id,
        g.minute,
        sum(coalesce(n.requests, 0)) OVER (PARTITION BY g.deployment_id ORDER BY g.minute
                                           ROWS BETWEEN CURRENT ROW AND 4 FOLLOWING) AS requests
    FROM grid AS g
    LEFT JOIN minute_counts AS n ON n.deployment_id = g.deployment_id AND n.minute = g.minute
),
busiest_5min AS (
    SELECT deployment_id, first(minute ORDER BY requests DESC, minute) AS minute, max(requests) AS requests
    FROM five_minutes
    GROUP BY deployment_id
),
busiest_hour AS (
    SELECT deployment_id, first(hour ORDER BY requests DESC, hour) AS hour, max(requests) AS requests
    FROM (SELECT deployment_id, minute // 60 AS hour, sum(requests) AS requests FROM minute_counts GROUP BY ALL)
    GROUP BY deployment_id
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
    p.peak_basis,
    CASE p.peak_basis
        WHEN 'busiest_hour' THEN $day_start::TIMESTAMPTZ + to_hours(bh.hour)
        ELSE $day_start::TIMESTAMPTZ + to_minutes(b5.minute)
    END AS peak_window_start,
    CASE p.peak_basis
        WHEN 'busiest_hour' THEN $day_start::TIMESTAMPTZ + to_hours(bh.hour + 1)
        ELSE $day_start::TIMESTAMPTZ + to_minutes(b5.minute + 5)
    END AS peak_window_end,
    CASE p.peak_basis
        WHEN 'busiest_hour' THEN coalesce(bh.requests, 0)
        ELSE coalesce(b5.requests, 0)
    END::BIGINT AS peak_requests,
    CASE p.peak_basis
        WHEN 'busiest_hour' THEN coalesce(bh.requests, 0) / 3600.0
        ELSE coalesce(b5.requests, 0) / 300.0
    END AS peak_arrival_rate,
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
    p.slo_version
FROM configuration AS c
JOIN day_slo_policy AS p ON p.model = c.model
LEFT JOIN busiest_5min AS b5 ON b5.deployment_id = c.deployment_id
LEFT JOIN busiest_hour AS bh ON bh.deployment_id = c.deployment_id
LEFT JOIN service AS s ON s.deployment_id = c.deployment_id
LEFT JOIN load AS l ON l.model = c.model
ORDER BY c.model, c.deployment_id
