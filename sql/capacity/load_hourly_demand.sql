-- The load curve of each model in force on the UTC day, hour by hour (all 24 hours), before the backlog:
-- requests received (every status), the busiest second's and minute's requests, output tokens of the requests that
-- reached the model (the demand), total and recomputed input, and the model's capacity: its deployments' daily
-- capacity (infra.capacity_daily) / 86,400, summed over those that have a figure; NULL when none has.
-- tokenledger.capacity.day carries the fluid backlog over these 24 rows per model (sql/capacity/load_hourly.sql writes them).
--
-- Peaks beyond the minute (seed 002: "minute and second peaks and burst duration"): the busiest second's requests;
-- the busiest minute's output, input and recomputed-input tokens (each its own busiest minute); and bursts, the
-- runs of consecutive minutes whose arrival rate (requests / 60 s) is above the model's planning rate, the
-- arrival rate the policy's peak_basis plans for (busiest_5min: the most requests in 5 consecutive minutes, sliding
-- by the minute, / 300 s; busiest_hour: the busiest UTC hour's / 3,600 s). A burst belongs to the hour of its first
-- minute; burst_seconds is the longest burst starting in the hour (0 when none does).
--
-- Seed 000's observability: failures by kind (error, timeout, disconnected, rejected) and cancellations apart, and
-- the mean queue length by Little's law, L_q = arrival rate x mean queue wait = sum(queue_ms) / 1000 / 3,600 over
-- the hour's requests that recorded queue_ms (a rejected request never queued; a timeout has no queue_ms).
WITH models AS (
    SELECT DISTINCT model FROM day_deployments
),
hours AS (
    SELECT range::INTEGER AS hour FROM range(24)
),
usage AS (
    SELECT
        model,
        hour,
        sum(requests) AS requests,
        sum(output_tokens) AS output_tokens,
        sum(input_total) AS input_total,
        sum(input_recomputed) AS input_recomputed
    FROM day_usage
    GROUP BY model, hour
),
-- Minute of the day (0-1439) of every request, with what it demanded of the model when it reached it.
stamped AS (
    SELECT
        model,
        (epoch_us(received_at) - epoch_us($day_start::TIMESTAMPTZ)) // 60000000 AS minute,
        (epoch_us(received_at) - epoch_us($day_start::TIMESTAMPTZ)) // 1000000 AS second,
        status,
        queue_ms,
        CASE WHEN status <> 'rejected' THEN output_tokens ELSE 0 END AS output_tokens,
        CASE WHEN status <> 'rejected' THEN input_tokens ELSE 0 END AS input_tokens,
        CASE WHEN status <> 'rejected' THEN input_tokens - cached_input_tokens ELSE 0 END AS input_recomputed
    FROM day_requests
),
minutes AS (
    SELECT
        model,
        minute,
        count(*) AS requests,
        sum(output_tokens) AS output_tokens,
        sum(input_tokens) AS input_tokens,
        sum(input_recomputed) AS input_recomputed
    FROM stamped
    GROUP BY model, minute
),
seconds AS (
    SELECT model, second // 3600 AS hour, max(requests) AS requests
    FROM (SELECT model, second, count(*) AS requests FROM stamped GROUP BY model, second)
    GROUP BY model, second // 3600
),
hour_detail AS (
    SELECT
        model,
        minute // 60 AS hour,
        count(*) FILTER (WHERE status = 'error') AS error_requests,
        count(*) FILTER (WHERE status = 'timeout') AS timeout_requests,
        count(*) FILTER (WHERE status = 'disconnected') AS disconnected_requests,
        count(*) FILTER (WHERE status = 'rejected') AS rejected_requests,
        count(*) FILTER (WHERE status = 'cancelled') AS cancelled_requests,
        count(queue_ms) AS queued_requests,
        -- summed in DECIMAL: a parallel DOUBLE sum depends on thread timing, and a re-run must be identical
        sum(queue_ms::DECIMAL(18, 3))::DOUBLE AS queue_ms_total
    FROM stamped
    GROUP BY model, minute // 60
),
busiest_minute AS (
    SELECT
        model,
        minute // 60 AS hour,
        max(requests) AS requests,
        max(output_tokens) AS output_tokens,
        max(input_tokens) AS input_tokens,
        max(input_recomputed) AS input_recomputed,
        max(input_tokens + output_tokens) AS tokens
    FROM minutes
    GROUP BY model, minute // 60
),
-- A hosted-API model's capacity is its provider's rate limits, summed over its API deployments (the version in
-- force at the end of the day); NULL for a self-hosted model or an API one without limits.
rate_limits AS (
    SELECT model, sum(rate_limit_rpm)::BIGINT AS rate_limit_rpm, sum(rate_limit_tpm)::BIGINT AS rate_limit_tpm
    FROM (SELECT deployment_id, arg_max(model, in_force_to) AS model, arg_max(rate_limit_rpm, in_force_to)
                 AS rate_limit_rpm, arg_max(rate_limit_tpm, in_force_to) AS rate_limit_tpm
          FROM day_deployments WHERE kind = 'api' GROUP BY deployment_id)
    GROUP BY model
),
-- Every minute of the day, so that windows and bursts see quiet minutes as zeros.
grid AS (
    SELECT m.model, g.range AS minute, coalesce(n.requests, 0) AS requests
    FROM models AS m
    CROSS JOIN range(1440) AS g
    LEFT JOIN minutes AS n ON n.model = m.model AND n.minute = g.range
),
five_minutes AS (
    SELECT model, max(requests) AS requests
    FROM (SELECT model, sum(requests) OVER (PARTITION BY model ORDER BY minute
                                            ROWS BETWEEN CURRENT ROW AND 4 FOLLOWING) AS requests
          FROM grid)
    GROUP BY model
),
busiest_hour AS (
    SELECT model, max(requests) AS requests
    FROM (SELECT model, sum(requests) AS requests FROM grid GROUP BY model, minute // 60)
    GROUP BY model
),
planning AS (
    SELECT
        p.model,
        CASE p.peak_basis WHEN 'busiest_hour' THEN h.requests / 3600.0 ELSE f.requests / 300.0 END
            AS planning_arrival_rate
    FROM day_slo_policy AS p
    JOIN five_minutes AS f ON f.model = p.model
    JOIN busiest_hour AS h ON h.model = p.model
),
above AS (
    SELECT
        g.model,
        g.minute,
        g.requests / 60.0 > pl.planning_arrival_rate AS is_above,
        -- gaps and islands: minutes above the rate that share (minute - their rank) are one run
        g.minute - row_number() OVER (PARTITION BY g.model, g.requests / 60.0 > pl.planning_arrival_rate
                                      ORDER BY g.minute) AS island
    FROM grid AS g
    JOIN planning AS pl ON pl.model = g.model
),
bursts AS (
    SELECT model, min(minute) // 60 AS hour, count(*) AS minutes
    FROM above
    WHERE is_above
    GROUP BY model, island
),
hour_bursts AS (
    SELECT
        a.model,
        a.hour,
        a.minutes_above_planning_rate,
        coalesce((SELECT max(b.minutes) FROM bursts AS b WHERE b.model = a.model AND b.hour = a.hour), 0) * 60
            AS burst_seconds
    FROM (SELECT model, minute // 60 AS hour, count(*) FILTER (WHERE is_above) AS minutes_above_planning_rate
          FROM above GROUP BY ALL) AS a
),
capacity AS (
    SELECT
        model,
        sum(daily_capacity_tokens) AS daily_capacity_tokens,
        count(*) FILTER (WHERE daily_capacity_tokens IS NULL) AS deployments_without_capacity
    FROM day_capacity
    GROUP BY model
)
SELECT
    m.model,
    h.hour,
    coalesce(u.requests, 0)::BIGINT AS requests,
    coalesce(b.requests, 0)::BIGINT AS busiest_minute_requests,
    coalesce(u.output_tokens, 0)::BIGINT AS output_tokens,
    coalesce(u.input_recomputed, 0)::BIGINT AS input_recomputed,
    c.daily_capacity_tokens,
    coalesce(c.deployments_without_capacity, 0)::BIGINT AS deployments_without_capacity,
    coalesce(u.input_total, 0)::BIGINT AS input_total,
    coalesce(s.requests, 0)::BIGINT AS busiest_second_requests,
    coalesce(b.output_tokens, 0)::BIGINT AS busiest_minute_output_tokens,
    coalesce(b.input_tokens, 0)::BIGINT AS busiest_minute_input_tokens,
    coalesce(b.input_recomputed, 0)::BIGINT AS busiest_minute_input_recomputed,
    pl.planning_arrival_rate,
    coalesce(hb.minutes_above_planning_rate, 0)::BIGINT AS minutes_above_planning_rate,
    coalesce(hb.burst_seconds, 0)::BIGINT AS burst_seconds,
    coalesce(d.error_requests, 0)::BIGINT AS error_requests,
    coalesce(d.timeout_requests, 0)::BIGINT AS timeout_requests,
    coalesce(d.disconnected_requests, 0)::BIGINT AS disconnected_requests,
    coalesce(d.rejected_requests, 0)::BIGINT AS rejected_requests,
    coalesce(d.cancelled_requests, 0)::BIGINT AS cancelled_requests,
    coalesce(d.queued_requests, 0)::BIGINT AS queued_requests,
    coalesce(d.queue_ms_total, 0) AS queue_ms_total,
    coalesce(b.tokens, 0)::BIGINT AS busiest_minute_tokens,
    rl.rate_limit_rpm,
    rl.rate_limit_tpm
FROM models AS m
CROSS JOIN hours AS h
LEFT JOIN usage AS u ON u.model = m.model AND u.hour = h.hour
LEFT JOIN busiest_minute AS b ON b.model = m.model AND b.hour = h.hour
LEFT JOIN seconds AS s ON s.model = m.model AND s.hour = h.hour
LEFT JOIN hour_detail AS d ON d.model = m.model AND d.hour = h.hour
LEFT JOIN hour_bursts AS hb ON hb.model = m.model AND hb.hour = h.hour
LEFT JOIN planning AS pl ON pl.model = m.model
LEFT JOIN capacity AS c ON c.model = m.model
LEFT JOIN rate_limits AS rl ON rl.model = m.model
ORDER BY m.model, h.hour
