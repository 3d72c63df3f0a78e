-- infra.gpu_usage_hourly: per GPU deployment and UTC hour, what its GPUs drew and how busy they were, from the day's
-- telemetry (day_gpu_samples, core.gpu_samples), beside the GPUs allocated (day_deployments) and the hour's goodput
-- (day_goodput, infra.goodput_hourly); docs/metrics.md, section 2. A GPU's hour is the mean of its samples in it (a
-- gap is filled by that mean): the deployment's mean total power is the sum over its GPUs of their means, its
-- energy that power over the hour. A GPU sample is active when its utilization is above the floor of the version in
-- force (gpu_active_floor_pct, default 5%); active GPU-hours add each GPU's share of active utilization samples.
-- power_basis says which power goodput_per_watt is over: 'measured' when a GPU of the deployment was sampled in the
-- hour, else 'nominal' (GPUs x gpu_power_w). GPUs sampled but claimed by no deployment are one row per hour with
-- mapped false and a NULL deployment. Every GPU deployment in force on the day has all 24 hours. Sums and means of
-- samples are taken in DECIMAL (to 1e-6 of the unit), so a day re-run gives the same bits
-- (docs/adr/0096-reproducible-to-the-bit.md).
WITH hours AS (
    SELECT
        range::INTEGER AS hour,
        $day_start::TIMESTAMPTZ + to_hours(range) AS hour_start,
        $day_start::TIMESTAMPTZ + to_hours(range + 1) AS hour_end
    FROM range(24)
),
allocated AS (
    SELECT
        d.model,
        d.deployment_id,
        h.hour,
        arg_max(d.gpu_type, d.in_force_to) AS gpu_type,
        arg_max(coalesce(d.gpu_active_floor_pct, 5.0), d.in_force_to) AS active_floor_pct,
        sum(d.gpus * greatest(epoch(least(d.in_force_to, h.hour_end) - greatest(d.in_force_from, h.hour_start)),
                              0) / 3600.0) AS gpus,
        sum(d.gpus * d.gpu_power_w
            * greatest(epoch(least(d.in_force_to, h.hour_end) - greatest(d.in_force_from, h.hour_start)), 0)
            / 3600.0) AS nominal_power_w
    FROM day_deployments AS d
    CROSS JOIN hours AS h
    WHERE d.kind = 'gpu'
    GROUP BY d.model, d.deployment_id, h.hour
),
samples AS (
    SELECT s.*, coalesce(a.active_floor_pct, 5.0) AS active_floor_pct
    FROM day_gpu_samples AS s
    LEFT JOIN allocated AS a ON a.deployment_id = s.deployment_id AND a.hour = s.hour
),
per_gpu AS (
    SELECT
        deployment_id,
        hour,
        gpu_uuid,
        avg(value::DECIMAL(38, 6)) FILTER (WHERE metric = 'power_w')::DOUBLE AS power_w,
        count(*) FILTER (WHERE metric = 'power_w') AS power_samples,
        avg(value::DECIMAL(38, 6)) FILTER (WHERE metric = 'gpu_util_pct')::DOUBLE AS util_pct,
        count(*) FILTER (WHERE metric = 'gpu_util_pct' AND value > active_floor_pct)
            / nullif(count(*) FILTER (WHERE metric = 'gpu_util_pct'), 0) AS active_share,
        avg(value::DECIMAL(38, 6)) FILTER (WHERE metric = 'sm_active')::DOUBLE AS sm_active,
        avg(value::DECIMAL(38, 6)) FILTER (WHERE metric = 'fb_used_mib')::DOUBLE AS fb_used_mib
    FROM samples
    GROUP BY deployment_id, hour, gpu_uuid
),
spread AS (
    SELECT deployment_id, hour, quantile_cont(value, 0.95) AS power_per_gpu_p95_w
    FROM day_gpu_samples
    WHERE metric = 'power_w'
    GROUP BY deployment_id, hour
),
measured AS (
    SELECT
        g.deployment_id,
        g.hour,
        count(*) FILTER (WHERE g.power_samples > 0) AS gpus_measured,
        list(g.gpu_uuid ORDER BY g.gpu_uuid) AS gpu_uuids,
        sum(g.power_samples) AS power_samples,
        sum(g.power_w::DECIMAL(38, 9))::DOUBLE AS power_mean_w,
        avg(g.util_pct::DECIMAL(38, 9))::DOUBLE AS util_mean_pct,
        sum(g.active_share::DECIMAL(38, 12))::DOUBLE AS active_gpu_hours,
        avg(g.sm_active::DECIMAL(38, 9))::DOUBLE AS sm_active_mean,
        avg(g.fb_used_mib::DECIMAL(38, 9))::DOUBLE AS fb_used_mean_mib,
        any_value(s.power_per_gpu_p95_w) AS power_per_gpu_p95_w
    FROM per_gpu AS g
    LEFT JOIN spread AS s ON s.deployment_id IS NOT DISTINCT FROM g.deployment_id AND s.hour = g.hour
    GROUP BY g.deployment_id, g.hour
),
figures AS (
    SELECT
        a.model,
        a.deployment_id,
        true AS mapped,
        a.hour,
        a.gpu_type,
        a.gpus,
        a.nominal_power_w,
        a.active_floor_pct,
        m.* EXCLUDE (deployment_id, hour),
        p.raw_throughput,
        p.slo_goodput
    FROM allocated AS a
    LEFT JOIN measured AS m ON m.deployment_id = a.deployment_id AND m.hour = a.hour
    LEFT JOIN day_goodput AS p ON p.deployment_id = a.deployment_id AND p.hour = a.hour
    UNION ALL BY NAME
    SELECT NULL AS model, NULL AS deployment_id, false AS mapped, m.hour, NULL AS gpu_type, 5.0 AS active_floor_pct,
           m.* EXCLUDE (deployment_id, hour)
    FROM measured AS m
    WHERE m.deployment_id IS NULL
)
SELECT
    $day::DATE AS day,
    hour,
    model,
    deployment_id,
    mapped,
    gpu_type,
    gpus,
    gpus AS allocated_gpu_hours,
    coalesce(gpus_measured, 0)::BIGINT AS gpus_measured,
    coalesce(gpu_uuids, [])::VARCHAR[] AS gpu_uuids,
    coalesce(power_samples, 0)::BIGINT AS power_samples,
    CASE WHEN gpus_measured > 0 THEN power_mean_w END AS power_mean_w,
    CASE WHEN gpus_measured > 0 THEN power_mean_w / gpus_measured END AS power_per_gpu_mean_w,
    power_per_gpu_p95_w,
    nominal_power_w,
    CASE WHEN gpus_measured > 0 THEN 'measured' ELSE 'nominal' END AS power_basis,
    CASE WHEN gpus_measured > 0 THEN power_mean_w ELSE nominal_power_w END AS power_w,
    -- the basis' mean total power over the hour: W x 1 h / 1,000
    CASE WHEN gpus_measured > 0 THEN power_mean_w ELSE nominal_power_w END / 1000.0 AS energy_kwh,
    util_mean_pct,
    sm_active_mean,
    fb_used_mean_mib,
    active_floor_pct::DOUBLE AS active_floor_pct,
    active_gpu_hours,
    raw_throughput,
    slo_goodput,
    slo_goodput / nullif(CASE WHEN gpus_measured > 0 THEN power_mean_w ELSE nominal_power_w END, 0)
        AS goodput_per_watt,
    slo_goodput / nullif(nominal_power_w, 0) AS goodput_per_watt_nominal
FROM figures
ORDER BY mapped DESC, model, deployment_id, hour
