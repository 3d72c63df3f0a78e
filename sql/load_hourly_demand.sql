-- The load curve of each model in force on the UTC day, hour by hour (all 24 hours), before the backlog:
-- requests received (every status), the busiest minute's requests, output tokens of the requests that reached the
-- model (the demand), recomputed input, and the model's capacity: its deployments' daily capacity
-- (infra.capacity_daily) / 86,400, summed over those that have a figure; NULL when none has.
-- tokenledger.capacity carries the fluid backlog over these 24 rows per model (sql/load_hourly.sql writes them).
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
        sum(input_recomputed) AS input_recomputed
    FROM day_usage
    GROUP BY model, hour
),
minutes AS (
    SELECT model, hour(timezone('UTC', received_at))::INTEGER AS hour, date_trunc('minute', received_at) AS minute,
           count(*) AS requests
    FROM day_requests
    GROUP BY ALL
),
busiest_minute AS (
    SELECT model, hour, max(requests) AS requests FROM minutes GROUP BY model, hour
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
    coalesce(c.deployments_without_capacity, 0)::BIGINT AS deployments_without_capacity
FROM models AS m
CROSS JOIN hours AS h
LEFT JOIN usage AS u ON u.model = m.model AND u.hour = h.hour
LEFT JOIN busiest_minute AS b ON b.model = m.model AND b.hour = h.hour
LEFT JOIN capacity AS c ON c.model = m.model
ORDER BY m.model, h.hour
