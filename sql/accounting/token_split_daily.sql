-- infra.token_split_daily: per model and UTC day, input as three figures (total, cached, recomputed) over the
-- requests that reached the model, with the ratios that put them side by side (docs/metrics.md, section 3).
-- Every model in force on the day has a row; a model without requests has zeros and NULL ratios. Beside them, the
-- workload of seed 002's review template: ISL and OSL quantiles (linear interpolation, quantile_cont) over the
-- successful requests, and their correlation.
WITH models AS (
    SELECT model FROM day_deployments
    UNION
    SELECT model FROM day_usage
),
-- Seed 002's workload: the ISL and OSL distributions of the requests served in full (status ok: a cancelled or
-- failed request's output is cut short and would understate OSL), and how ISL and OSL move together.
workload AS (
    SELECT
        model,
        count(*) AS workload_requests,
        (avg(input_tokens::DECIMAL(18, 0)))::DOUBLE AS isl_mean,  -- DECIMAL: an exact, order-free sum
        quantile_cont(input_tokens, [0.1, 0.5, 0.9, 0.99]) AS isl_q,
        max(input_tokens) AS isl_max,
        (avg(output_tokens::DECIMAL(18, 0)))::DOUBLE AS osl_mean,
        quantile_cont(output_tokens, [0.1, 0.5, 0.9, 0.99]) AS osl_q,
        max(output_tokens) AS osl_max,
        -- Pearson's r from exact integer sums (a parallel DOUBLE aggregate depends on thread timing, and a re-run
        -- must be identical); it needs spread on both sides, so a constant ISL or OSL gives NULL, not NaN.
        count(*)::HUGEINT AS n,
        sum(input_tokens::HUGEINT) AS sx,
        sum(output_tokens::HUGEINT) AS sy,
        sum(input_tokens::HUGEINT * input_tokens) AS sxx,
        sum(output_tokens::HUGEINT * output_tokens) AS syy,
        sum(input_tokens::HUGEINT * output_tokens) AS sxy
    FROM day_requests
    WHERE status = 'ok'
    GROUP BY model
),
figures AS (
    SELECT
        m.model,
        coalesce(sum(u.requests), 0)::BIGINT AS requests,
        coalesce(sum(u.input_total), 0)::BIGINT AS input_total,
        coalesce(sum(u.input_cached), 0)::BIGINT AS input_cached,
        coalesce(sum(u.input_recomputed), 0)::BIGINT AS input_recomputed,
        coalesce(sum(u.input_cache_write), 0)::BIGINT AS input_cache_write,
        coalesce(sum(u.output_tokens), 0)::BIGINT AS output_tokens,
        sum(u.reasoning_tokens)::BIGINT AS reasoning_tokens  -- NULL: no request reports it
    FROM models AS m
    LEFT JOIN day_usage AS u ON u.model = m.model
    GROUP BY m.model
)
SELECT
    $day::DATE AS day,
    model,
    requests,
    input_total,
    input_cached,
    input_recomputed,
    input_cached / nullif(input_total, 0) AS cache_hit_ratio,
    input_total / nullif(input_recomputed, 0) AS input_overstatement,
    output_tokens,
    input_total / nullif(output_tokens, 0) AS input_output_ratio,
    coalesce(w.workload_requests, 0)::BIGINT AS workload_requests,
    w.isl_mean,
    w.isl_q[1] AS isl_p10,
    w.isl_q[2] AS isl_p50,
    w.isl_q[3] AS isl_p90,
    w.isl_q[4] AS isl_p99,
    w.isl_max::BIGINT AS isl_max,
    w.osl_mean,
    w.osl_q[1] AS osl_p10,
    w.osl_q[2] AS osl_p50,
    w.osl_q[3] AS osl_p90,
    w.osl_q[4] AS osl_p99,
    w.osl_max::BIGINT AS osl_max,
    CASE WHEN w.n >= 3 AND w.n * w.sxx - w.sx * w.sx > 0 AND w.n * w.syy - w.sy * w.sy > 0
         THEN (w.n * w.sxy - w.sx * w.sy)::DOUBLE
              / sqrt((w.n * w.sxx - w.sx * w.sx)::DOUBLE * (w.n * w.syy - w.sy * w.sy)::DOUBLE) END
        AS isl_osl_correlation,
    input_cache_write,
    reasoning_tokens
FROM figures
LEFT JOIN workload AS w USING (model)
ORDER BY model
