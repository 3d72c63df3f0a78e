-- infra.gpu_usage_daily: infra.gpu_usage_hourly (day_gpu_usage_hourly) summed over the UTC day per deployment (and
-- the unmapped GPUs' row); docs/metrics.md, section 2. Energy adds each hour's on its own basis, so the day's
-- power_basis is 'measured' when every hour the deployment was in force was measured, 'nominal' when none was and
-- 'mixed' otherwise; power_w is the day's mean total power (energy over 24 h) and goodput_per_watt the day's SLO
-- goodput (compliant output / 86,400 s) over it: compliant output tokens per joule. The P95 is over every power
-- sample of the day (day_gpu_samples). Sums are taken in DECIMAL so that a re-run gives the same bits.
WITH spread AS (
    SELECT deployment_id, quantile_cont(value, 0.95) AS power_per_gpu_p95_w, count(DISTINCT gpu_uuid) AS gpus_measured
    FROM day_gpu_samples
    WHERE metric = 'power_w'
    GROUP BY deployment_id
),
gpus AS (
    SELECT deployment_id, list(DISTINCT gpu_uuid ORDER BY gpu_uuid) AS gpu_uuids
    FROM day_gpu_samples
    GROUP BY deployment_id
),
days AS (
    SELECT
        model,
        deployment_id,
        mapped,
        arg_max(gpu_type, hour) AS gpu_type,
        sum(gpus::DECIMAL(38, 12))::DOUBLE / 24.0 AS gpus,
        sum(allocated_gpu_hours::DECIMAL(38, 12))::DOUBLE AS allocated_gpu_hours,
        sum(gpus_measured)::DOUBLE AS measured_gpu_hours,
        sum(power_samples)::BIGINT AS power_samples,
        count(*) FILTER (WHERE power_basis = 'measured') AS measured_hours,
        count(*) FILTER (WHERE power_basis = 'nominal' AND gpus > 0) AS nominal_hours,
        sum(energy_kwh::DECIMAL(38, 12)) FILTER (WHERE power_basis = 'measured')::DOUBLE AS measured_energy_kwh,
        sum(energy_kwh::DECIMAL(38, 12))::DOUBLE AS energy_kwh,
        sum(nominal_power_w::DECIMAL(38, 9))::DOUBLE / 24.0 AS nominal_power_w,
        sum((util_mean_pct * gpus_measured)::DECIMAL(38, 9))::DOUBLE
            / nullif(sum(gpus_measured) FILTER (WHERE util_mean_pct IS NOT NULL), 0) AS util_mean_pct,
        sum((sm_active_mean * gpus_measured)::DECIMAL(38, 12))::DOUBLE
            / nullif(sum(gpus_measured) FILTER (WHERE sm_active_mean IS NOT NULL), 0) AS sm_active_mean,
        sum(active_gpu_hours::DECIMAL(38, 12))::DOUBLE AS active_gpu_hours,
        sum((raw_throughput * 3600.0)::DECIMAL(38, 6))::DOUBLE AS output_tokens,
        sum((slo_goodput * 3600.0)::DECIMAL(38, 6))::DOUBLE AS compliant_output_tokens
    FROM day_gpu_usage_hourly
    GROUP BY model, deployment_id, mapped
)
SELECT
    $day::DATE AS day,
    d.model,
    d.deployment_id,
    d.mapped,
    d.gpu_type,
    d.gpus,
    d.allocated_gpu_hours,
    coalesce(s.gpus_measured, 0)::BIGINT AS gpus_measured,
    coalesce(g.gpu_uuids, [])::VARCHAR[] AS gpu_uuids,
    d.measured_gpu_hours,
    d.active_gpu_hours,
    d.active_gpu_hours / nullif(d.allocated_gpu_hours, 0) AS active_share,
    d.power_samples,
    d.measured_hours::BIGINT AS measured_hours,
    d.measured_energy_kwh * 1000.0 / nullif(d.measured_hours, 0) AS power_mean_w,
    d.measured_energy_kwh * 1000.0 / nullif(d.measured_gpu_hours, 0) AS power_per_gpu_mean_w,
    s.power_per_gpu_p95_w,
    d.nominal_power_w,
    CASE WHEN d.measured_hours = 0 THEN 'nominal' WHEN d.nominal_hours = 0 THEN 'measured' ELSE 'mixed' END
        AS power_basis,
    d.energy_kwh * 1000.0 / 24.0 AS power_w,
    d.energy_kwh,
    d.util_mean_pct,
    d.sm_active_mean,
    d.compliant_output_tokens / 86400.0 AS slo_goodput,
    d.compliant_output_tokens / nullif(d.energy_kwh * 3.6e6, 0) AS goodput_per_watt,
    d.compliant_output_tokens / nullif(d.nominal_power_w * 86400.0, 0) AS goodput_per_watt_nominal,
    d.output_tokens / 86400.0 AS raw_throughput
FROM days AS d
LEFT JOIN spread AS s ON s.deployment_id IS NOT DISTINCT FROM d.deployment_id
LEFT JOIN gpus AS g ON g.deployment_id IS NOT DISTINCT FROM d.deployment_id
ORDER BY d.mapped DESC, d.model, d.deployment_id
