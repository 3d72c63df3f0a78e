-- The demonstrated capacity of each deployment on the day, from its windows in core.capacity_windows: the best
-- qualifying window (its goodput per GPU is the lower bound of docs/metrics.md section 5), how many windows were
-- judged, held and qualified, and, for the capacity note when none qualified, every commitment that some judged
-- window missed: in how many judged windows, and the best value any judged window reached against its limit.
WITH policy AS (
    SELECT model, stable_window_min, min_requests_per_bucket, attainment_target, success_rate_target,
           queue_p99_ms AS queue_limit_ms, itl_p99_ms AS itl_limit_ms, tpot_p99_ms AS tpot_limit_ms
    FROM day_slo_policy
),
counts AS (
    SELECT
        model,
        deployment_id,
        count(*) AS windows,
        count(*) FILTER (WHERE buckets_judged > 0) AS windows_judged,
        count(*) FILTER (WHERE all_met) AS windows_met,
        count(*) FILTER (WHERE all_met AND NOT configuration_matches) AS windows_met_other_configuration,
        count(*) FILTER (WHERE qualifies) AS windows_qualified,
        max(effective_requests) AS max_window_effective_requests
    FROM day_capacity_windows
    GROUP BY model, deployment_id
),
best AS (
    SELECT deployment_id, window_start, window_end, goodput_per_gpu, compliant_output_tokens, gpus
    FROM day_capacity_windows
    WHERE is_best
),
judged AS (
    SELECT * FROM day_capacity_windows WHERE buckets_judged > 0
),
judged_buckets AS (
    SELECT deployment_id, model, unnest(buckets) AS b FROM judged
),
missed AS (
    SELECT
        j.deployment_id,
        'bucket ' || j.b.isl_bucket || ' attainment' AS commitment,
        'min' AS kind,
        any_value(p.attainment_target) AS target,
        count(*) FILTER (WHERE NOT j.b.attainment_met) AS windows_missed,
        max(j.b.attainment) AS best
    FROM judged_buckets AS j
    JOIN policy AS p USING (model)
    WHERE j.b.judged
    GROUP BY j.deployment_id, j.b.isl_bucket
    UNION ALL
    SELECT deployment_id, 'success rate', 'min', any_value(p.success_rate_target),
           count(*) FILTER (WHERE NOT success_rate_met), max(success_rate)
    FROM judged JOIN policy AS p USING (model) GROUP BY deployment_id
    UNION ALL
    SELECT deployment_id, 'P99 queue', 'max', any_value(p.queue_limit_ms),
           count(*) FILTER (WHERE NOT queue_p99_met), min(queue_p99_ms)
    FROM judged JOIN policy AS p USING (model) GROUP BY deployment_id
    UNION ALL
    SELECT deployment_id, 'P99 ITL', 'max', any_value(p.itl_limit_ms),
           count(*) FILTER (WHERE NOT itl_p99_met), min(itl_p99_ms)
    FROM judged JOIN policy AS p USING (model) GROUP BY deployment_id
    UNION ALL
    SELECT deployment_id, 'P99 TPOT', 'max', any_value(p.tpot_limit_ms),
           count(*) FILTER (WHERE NOT tpot_p99_met), min(tpot_p99_ms)
    FROM judged JOIN policy AS p USING (model) GROUP BY deployment_id
),
missed_list AS (
    SELECT
        deployment_id,
        list({'commitment': commitment, 'kind': kind, 'target': target, 'windows_missed': windows_missed,
              'best': best} ORDER BY windows_missed DESC, commitment) AS missed
    FROM missed
    WHERE windows_missed > 0
    GROUP BY deployment_id
)
SELECT
    c.model,
    c.deployment_id,
    p.stable_window_min,
    p.min_requests_per_bucket,
    c.windows,
    c.windows_judged,
    c.windows_met,
    c.windows_met_other_configuration,
    c.windows_qualified,
    c.max_window_effective_requests,
    b.window_start AS best_window_start,
    b.window_end AS best_window_end,
    b.goodput_per_gpu AS demonstrated_goodput_per_gpu,
    coalesce(m.missed, []) AS missed
FROM counts AS c
JOIN policy AS p USING (model)
LEFT JOIN best AS b USING (deployment_id)
LEFT JOIN missed_list AS m USING (deployment_id)
ORDER BY c.model, c.deployment_id
