-- infra.capacity_trend: per model and published day, rolling 7- and 28-day figures over the calendar window
-- [day - 6, day] and [day - 27, day]. Only days that were published count: a missing day is absent from both
-- numerator and denominator, never a zero. Ratios are ratios of sums (a cost per MTok over a week is the week's
-- cost over the week's compliant tokens), not averages of daily ratios. Money stays apart by currency.
-- Its three sources are the published day files of each table, with the day taken from their folder names
-- (tokenledger/publish/versions.py, published_days).
WITH capacity AS (
    SELECT
        day,
        model,
        sum(gpus) AS gpus,
        sum(compliant_output_tokens) AS compliant_output_tokens,
        sum(daily_capacity_tokens) AS daily_capacity_tokens,
        sum(output_tokens) FILTER (WHERE daily_capacity_tokens IS NOT NULL) AS output_with_capacity
    FROM ({capacity_days})
    GROUP BY day, model
), cost AS (
    SELECT day, model, currency, sum(cost_total) AS cost_total, sum(compliant_output_tokens) AS costed_tokens
    FROM ({cost_days})
    GROUP BY day, model, currency
), slo AS (
    SELECT day, model, {judged_requests} AS judged_requests, compliant_requests
    FROM ({slo_days})
    WHERE isl_bucket = 'all'
), daily AS (
    SELECT c.*, k.currency, k.cost_total, k.costed_tokens, s.judged_requests, s.compliant_requests
    FROM capacity AS c
    LEFT JOIN cost AS k ON k.day = c.day AND k.model = c.model
    LEFT JOIN slo AS s ON s.day = c.day AND s.model = c.model
)
SELECT
    day,
    model,
    currency,
    count(*) OVER w7 AS days_7d,
    count(*) OVER w28 AS days_28d,
    sum(cost_total) OVER w7 / nullif(sum(costed_tokens) OVER w7, 0) * 1e6 AS cost_per_mtok_goodput_7d,
    sum(cost_total) OVER w28 / nullif(sum(costed_tokens) OVER w28, 0) * 1e6 AS cost_per_mtok_goodput_28d,
    sum(compliant_output_tokens) OVER w7 / nullif(sum(gpus) OVER w7 * 86400, 0) AS goodput_per_gpu_7d,
    sum(compliant_output_tokens) OVER w28 / nullif(sum(gpus) OVER w28 * 86400, 0) AS goodput_per_gpu_28d,
    avg(daily_capacity_tokens) OVER w7 AS daily_capacity_tokens_7d,
    avg(daily_capacity_tokens) OVER w28 AS daily_capacity_tokens_28d,
    sum(output_with_capacity) OVER w7 / nullif(sum(daily_capacity_tokens) OVER w7, 0) AS utilization_7d,
    sum(output_with_capacity) OVER w28 / nullif(sum(daily_capacity_tokens) OVER w28, 0) AS utilization_28d,
    sum(compliant_requests) OVER w7 / nullif(sum(judged_requests) OVER w7, 0) AS attainment_7d,
    sum(compliant_requests) OVER w28 / nullif(sum(judged_requests) OVER w28, 0) AS attainment_28d
FROM daily
WINDOW
    w7 AS (PARTITION BY model, currency ORDER BY day RANGE BETWEEN INTERVAL 6 DAY PRECEDING AND CURRENT ROW),
    w28 AS (PARTITION BY model, currency ORDER BY day RANGE BETWEEN INTERVAL 27 DAY PRECEDING AND CURRENT ROW)
ORDER BY model, currency, day
