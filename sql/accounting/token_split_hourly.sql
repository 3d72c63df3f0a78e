-- infra.token_split_hourly: infra.token_split_daily per UTC hour (0-23). Every model in force on the day has
-- all 24 hours; an hour without requests has zeros and NULL ratios.
WITH models AS (
    SELECT model FROM day_deployments
    UNION
    SELECT model FROM day_usage
),
hours AS (
    SELECT range::INTEGER AS hour FROM range(24)
),
figures AS (
    SELECT
        h.hour,
        m.model,
        coalesce(sum(u.requests), 0)::BIGINT AS requests,
        coalesce(sum(u.input_total), 0)::BIGINT AS input_total,
        coalesce(sum(u.input_cached), 0)::BIGINT AS input_cached,
        coalesce(sum(u.input_recomputed), 0)::BIGINT AS input_recomputed,
        coalesce(sum(u.output_tokens), 0)::BIGINT AS output_tokens,
        sum(u.reasoning_tokens)::BIGINT AS reasoning_tokens  -- NULL: no request reports it
    FROM models AS m
    CROSS JOIN hours AS h
    LEFT JOIN day_usage AS u ON u.model = m.model AND u.hour = h.hour
    GROUP BY h.hour, m.model
)
SELECT
    $day::DATE AS day,
    hour,
    model,
    requests,
    input_total,
    input_cached,
    input_recomputed,
    input_cached / nullif(input_total, 0) AS cache_hit_ratio,
    input_total / nullif(input_recomputed, 0) AS input_overstatement,
    output_tokens,
    input_total / nullif(output_tokens, 0) AS input_output_ratio,
    reasoning_tokens
FROM figures
ORDER BY model, hour
