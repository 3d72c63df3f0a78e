-- infra.capacity_daily (throughput columns): per model, deployment and UTC day, output produced and compliant
-- output over the day's wall time, per GPU and per watt (spec/metrics.md, section 2). GPUs and power are
-- time-weighted over the versions in force (a scale-up at noon from 16 to 24 GPUs gives 20); gpu_type, tp,
-- pp and quantization are those of the version in force at the end of the day. Every deployment in force on
-- the day has a row, with 0 tokens when it served none.
WITH deployments AS (
    SELECT
        model,
        deployment_id,
        arg_max(gpu_type, in_force_to) AS gpu_type,
        arg_max(tp, in_force_to) AS tp,
        arg_max(pp, in_force_to) AS pp,
        arg_max(quantization, in_force_to) AS quantization,
        sum(gpu_hours) AS gpu_hours,
        sum(gpu_hours * gpu_power_w) AS gpu_watt_hours
    FROM day_deployments
    GROUP BY model, deployment_id
),
usage AS (
    SELECT
        model,
        deployment_id,
        sum(output_produced) AS output_produced,
        sum(compliant_output_tokens) AS compliant_output_tokens
    FROM day_usage
    GROUP BY model, deployment_id
),
figures AS (
    SELECT
        d.model,
        d.deployment_id,
        d.gpu_type,
        d.gpu_hours / 24.0 AS gpus,
        d.tp,
        d.pp,
        d.quantization,
        d.gpu_watt_hours / nullif(d.gpu_hours, 0) AS gpu_power_w,
        d.gpu_watt_hours / 24.0 AS gpu_power_total_w,
        epoch($day_end::TIMESTAMPTZ - $day_start::TIMESTAMPTZ)::DOUBLE AS wall_time_s,
        coalesce(u.output_produced, 0)::BIGINT AS output_tokens,
        coalesce(u.compliant_output_tokens, 0)::BIGINT AS compliant_output_tokens
    FROM deployments AS d
    LEFT JOIN usage AS u ON u.model = d.model AND u.deployment_id = d.deployment_id
)
SELECT
    $day::DATE AS day,
    model,
    deployment_id,
    gpu_type,
    gpus,
    tp,
    pp,
    quantization,
    gpu_power_w,
    wall_time_s,
    output_tokens,
    compliant_output_tokens,
    output_tokens / wall_time_s AS raw_throughput,
    compliant_output_tokens / wall_time_s AS slo_goodput,
    slo_goodput / nullif(gpus, 0) AS goodput_per_gpu,
    slo_goodput / nullif(gpu_power_total_w, 0) AS goodput_per_watt,
    $slo_version AS slo_version
FROM figures
ORDER BY model, deployment_id
