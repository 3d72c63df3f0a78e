-- core.deployments_daily: one row per deployment version in force during the UTC day [$day_start, $day_end),
-- with the hours it was in force that day and its GPU-hours. A mid-day scale-up gives two rows.
SELECT
    $day::DATE AS day,
    deployment_id,
    model,
    model_version,
    engine,
    engine_version,
    gpu_type,
    gpus,
    gpus_per_replica,
    gpus // gpus_per_replica AS replicas,
    tp,
    pp,
    quantization,
    cache_policy,
    gpu_power_w,
    slots_per_replica,
    scale_out_minutes,
    warmup_minutes,
    hosting,
    rate_card,
    resource_ids,
    valid_from,
    valid_to,
    greatest(valid_from, $day_start::TIMESTAMPTZ) AS in_force_from,
    least(coalesce(valid_to, $day_end::TIMESTAMPTZ), $day_end::TIMESTAMPTZ) AS in_force_to,
    epoch(in_force_to - in_force_from) / 3600.0 AS hours_in_force,
    gpus * hours_in_force AS gpu_hours,
    _line AS config_line
FROM cfg_deployments
WHERE valid_from < $day_end::TIMESTAMPTZ
  AND coalesce(valid_to, 'infinity'::TIMESTAMPTZ) > $day_start::TIMESTAMPTZ
ORDER BY deployment_id, valid_from
