-- infra.slo_hourly: attainment per model, ISL bucket and UTC hour (all 24 hours, every bucket of the model's
-- policy), plus one 'all' row per model and hour (docs/metrics.md, section 2; seed 003: an overall mean never stands
-- in for the per-bucket figures, and a peak hour can sink one bucket while the day's mean hides it). Built from
-- core.usage_hourly (the requests judged once, by sql/accounting/requests_judged.sql). A bucket-hour with fewer effective
-- requests with measured latency than the policy's min_requests_per_bucket is not judged (attainment_met NULL), as in infra.slo_daily.
WITH buckets AS (
    SELECT model, isl_bucket, bucket_order FROM day_slo_isl_bucket
    UNION ALL
    SELECT model, 'all', NULL::INTEGER FROM day_slo_policy
),
hours AS (
    SELECT range::INTEGER AS hour FROM range(24)
),
counts AS (
    SELECT
        model,
        hour,
        CASE WHEN grouping(isl_bucket) = 1 THEN 'all' ELSE isl_bucket END AS isl_bucket,
        sum(effective_requests) AS effective_requests,
        sum(compliant_requests) AS compliant_requests,
        sum(judged_requests) AS judged_requests
    FROM day_usage
    GROUP BY GROUPING SETS ((model, hour, isl_bucket), (model, hour))
)
SELECT
    $day::DATE AS day,
    h.hour,
    b.model,
    b.isl_bucket,
    coalesce(c.effective_requests, 0)::BIGINT AS effective_requests,
    coalesce(c.compliant_requests, 0)::BIGINT AS compliant_requests,
    c.compliant_requests / nullif(c.judged_requests, 0) AS attainment,
    p.attainment_target,
    coalesce(c.judged_requests, 0) >= p.min_requests_per_bucket AS judged,
    CASE WHEN coalesce(c.judged_requests, 0) >= p.min_requests_per_bucket
         THEN c.compliant_requests / nullif(c.judged_requests, 0) >= p.attainment_target END AS attainment_met,
    p.slo_version
FROM buckets AS b
JOIN day_slo_policy AS p ON p.model = b.model
CROSS JOIN hours AS h
LEFT JOIN counts AS c ON c.model = b.model AND c.hour = h.hour AND c.isl_bucket = b.isl_bucket
ORDER BY b.model, h.hour, b.bucket_order NULLS LAST
