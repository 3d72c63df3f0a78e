-- infra.goodput_hourly: per model, deployment and UTC hour (0-23), output produced and compliant output over
-- the hour's 3,600 s, GPUs time-weighted within the hour, and the hour's attainment over all its requests
-- (not per ISL bucket: infra.slo_daily and infra.slo_hourly have those), and the capacity-top signal: an hour whose
-- raw throughput rose over the previous hour's while its SLO goodput fell. Every deployment in force has all 24 hours;
-- an hour it was not in force has 0 GPUs and a NULL goodput per GPU.
WITH hours AS (
    SELECT
        range::INTEGER AS hour,
        $day_start::TIMESTAMPTZ + to_hours(range) AS hour_start,
        $day_start::TIMESTAMPTZ + to_hours(range + 1) AS hour_end
    FROM range(24)
),
gpus AS (
    SELECT
        d.model,
        d.deployment_id,
        h.hour,
        sum(d.gpus * greatest(epoch(least(d.in_force_to, h.hour_end) - greatest(d.in_force_from, h.hour_start)),
                              0) / 3600.0) AS gpus
    FROM day_deployments AS d
    CROSS JOIN hours AS h
    GROUP BY d.model, d.deployment_id, h.hour
),
usage AS (
    SELECT
        hour,
        model,
        deployment_id,
        sum(output_produced) AS output_produced,
        sum(compliant_output_tokens) AS compliant_output_tokens,
        sum(effective_requests) AS effective_requests,
        sum(compliant_requests) AS compliant_requests,
        sum(judged_requests) AS judged_requests
    FROM day_usage
    GROUP BY hour, model, deployment_id
),
figures AS (
    SELECT
        g.hour,
        g.model,
        g.deployment_id,
        g.gpus,
        coalesce(u.output_produced, 0)::BIGINT AS output_tokens,
        coalesce(u.compliant_output_tokens, 0)::BIGINT AS compliant_output_tokens,
        coalesce(u.effective_requests, 0)::BIGINT AS effective_requests,
        coalesce(u.compliant_requests, 0)::BIGINT AS compliant_requests,
        coalesce(u.judged_requests, 0)::BIGINT AS judged_requests
    FROM gpus AS g
    LEFT JOIN usage AS u ON u.hour = g.hour AND u.model = g.model AND u.deployment_id = g.deployment_id
)
SELECT
    $day::DATE AS day,
    hour,
    model,
    deployment_id,
    gpus,
    output_tokens,
    compliant_output_tokens,
    output_tokens / 3600.0 AS raw_throughput,
    compliant_output_tokens / 3600.0 AS slo_goodput,
    slo_goodput / nullif(gpus, 0) AS goodput_per_gpu,
    effective_requests,
    compliant_requests,
    compliant_requests / nullif(judged_requests, 0) AS attainment,
    $slo_version AS slo_version,
    -- Seed 003's sign that capacity is exhausted: more raw throughput than the hour before, yet less SLO goodput.
    -- Compared within the day only (hour 0 has no hour before it here: NULL).
    output_tokens > lag(output_tokens) OVER w AND compliant_output_tokens < lag(compliant_output_tokens) OVER w
        AS capacity_top
FROM figures
WINDOW w AS (PARTITION BY model, deployment_id ORDER BY hour)
ORDER BY model, deployment_id, hour
