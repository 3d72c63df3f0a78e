-- infra.slo_daily: per model, one row for every ISL bucket of its SLO policy (zero counts and NULL figures when
-- the bucket had no requests) and one 'all' row for the whole model (docs/metrics.md, sections 1-2). Failures are
-- also counted by kind (error, timeout, disconnected, rejected), as seed 000's observability asks.
-- Percentiles are over successful requests, with linear interpolation (quantile_cont), taken one measure at a time into
-- slo_percentiles (sql/accounting/slo_percentiles.sql, so that a day's memory holds one measure's values). A bucket with fewer
-- judged requests (effective, with measured latency: sql/accounting/requests_judged.sql) than min_requests_per_bucket is not
-- judged on attainment (attainment_met NULL, judged false) yet keeps its row and figures, and its requests count in
-- the 'all' row (the review says "too few requests to judge (40 of 50)"). A p99 that no request had a value for is
-- NULL, which is not a failure.
-- The 'all' row's all_met is false when any of its own commitments fails or any judged bucket of the model fails: it
-- never hides a failing bucket.
WITH stats AS (
    SELECT
        model,
        CASE WHEN grouping(isl_bucket) = 1 THEN 'all' ELSE isl_bucket END AS isl_bucket,
        count(*) FILTER (WHERE is_effective) AS effective_requests,
        count(*) FILTER (WHERE is_success) AS successful_requests,
        count(*) FILTER (WHERE is_failure) AS failed_requests,
        count(*) FILTER (WHERE NOT is_effective) AS cancelled_requests,
        count(*) FILTER (WHERE status = 'error') AS error_requests,
        count(*) FILTER (WHERE status = 'timeout') AS timeout_requests,
        count(*) FILTER (WHERE status = 'disconnected') AS disconnected_requests,
        count(*) FILTER (WHERE status = 'rejected') AS rejected_requests,
        count(*) FILTER (WHERE is_compliant) AS compliant_requests,
        count(*) FILTER (WHERE is_latency_judged) AS judged_requests,
        count(*) FILTER (WHERE is_itl_unknown) AS itl_unknown_requests
    FROM requests_judged
    GROUP BY GROUPING SETS ((model, isl_bucket), (model))
),
percentiles AS (  -- [P50, P90, P99] of each measure
    SELECT
        model,
        isl_bucket,
        any_value(q) FILTER (WHERE measure = 'ttft_ms') AS ttft_q,
        any_value(q) FILTER (WHERE measure = 'queue_ms') AS queue_q,
        any_value(q) FILTER (WHERE measure = 'itl_max_ms') AS itl_q,
        any_value(q) FILTER (WHERE measure = 'tpot_ms') AS tpot_q,
        any_value(q) FILTER (WHERE measure = 'e2e_ms') AS e2e_q
    FROM slo_percentiles
    GROUP BY model, isl_bucket
),
frame AS (
    SELECT model, isl_bucket, bucket_order FROM day_slo_isl_bucket
    UNION ALL
    SELECT model, 'all' AS isl_bucket, NULL::INTEGER AS bucket_order FROM day_slo_policy
),
figures AS (
    SELECT
        f.model,
        f.isl_bucket,
        f.bucket_order,
        p.slo_version,
        p.attainment_target,
        p.success_rate_target,
        p.min_requests_per_bucket,
        p.queue_p99_ms AS queue_p99_limit_ms,
        p.itl_p99_ms AS itl_p99_limit_ms,
        p.tpot_p99_ms AS tpot_p99_limit_ms,
        coalesce(s.effective_requests, 0) AS effective_requests,
        coalesce(s.successful_requests, 0) AS successful_requests,
        coalesce(s.failed_requests, 0) AS failed_requests,
        coalesce(s.cancelled_requests, 0) AS cancelled_requests,
        coalesce(s.error_requests, 0) AS error_requests,
        coalesce(s.timeout_requests, 0) AS timeout_requests,
        coalesce(s.disconnected_requests, 0) AS disconnected_requests,
        coalesce(s.rejected_requests, 0) AS rejected_requests,
        coalesce(s.compliant_requests, 0) AS compliant_requests,
        coalesce(s.judged_requests, 0) AS judged_requests,
        coalesce(s.itl_unknown_requests, 0) AS itl_unknown_requests,
        q.ttft_q[1] AS ttft_p50_ms,
        q.ttft_q[2] AS ttft_p90_ms,
        q.ttft_q[3] AS ttft_p99_ms,
        q.queue_q[3] AS queue_p99_ms,
        q.itl_q[3] AS itl_p99_ms,
        q.tpot_q[1] AS tpot_p50_ms,
        q.tpot_q[3] AS tpot_p99_ms,
        q.e2e_q[3] AS e2e_p99_ms
    FROM frame AS f
    JOIN day_slo_policy AS p ON p.model = f.model
    LEFT JOIN stats AS s ON s.model = f.model AND s.isl_bucket = f.isl_bucket
    LEFT JOIN percentiles AS q ON q.model = f.model AND q.isl_bucket = f.isl_bucket
),
judged AS (
    SELECT
        *,
        successful_requests / nullif(effective_requests, 0) AS success_rate,
        compliant_requests / nullif(judged_requests, 0) AS attainment,
        itl_unknown_requests / nullif(effective_requests, 0) AS itl_unknown_share,
        judged_requests >= min_requests_per_bucket AS is_judged,
        CASE WHEN is_judged THEN attainment >= attainment_target END AS attainment_met,
        success_rate >= success_rate_target AS success_rate_met,
        queue_p99_ms <= queue_p99_limit_ms AS queue_p99_met,
        itl_p99_ms <= itl_p99_limit_ms AS itl_p99_met,
        tpot_p99_ms <= tpot_p99_limit_ms AS tpot_p99_met,
        -- least() skips NULLs: false if any commitment fails, NULL if none could be judged, else true.
        least(attainment_met, success_rate_met, queue_p99_met, itl_p99_met, tpot_p99_met) AS own_met
    FROM figures
),
buckets_met AS (
    SELECT
        *,
        bool_and(CASE WHEN isl_bucket <> 'all' AND is_judged THEN own_met END)
            OVER (PARTITION BY model) AS judged_buckets_met
    FROM judged
)
SELECT
    $day::DATE AS day,
    model,
    isl_bucket,
    effective_requests,
    successful_requests,
    failed_requests,
    cancelled_requests,
    compliant_requests,
    judged_requests,
    success_rate,
    attainment,
    ttft_p50_ms,
    ttft_p90_ms,
    ttft_p99_ms,
    queue_p99_ms,
    itl_p99_ms,
    tpot_p50_ms,
    tpot_p99_ms,
    e2e_p99_ms,
    itl_unknown_share,
    attainment_target,
    success_rate_target,
    attainment_met,
    success_rate_met,
    queue_p99_met,
    itl_p99_met,
    tpot_p99_met,
    CASE WHEN isl_bucket = 'all' THEN least(own_met, judged_buckets_met) ELSE own_met END AS all_met,
    slo_version,
    error_requests,
    timeout_requests,
    disconnected_requests,
    rejected_requests,
    is_judged AS judged,
    min_requests_per_bucket
FROM buckets_met
ORDER BY model, bucket_order NULLS LAST
