-- The load-test run that speaks for each deployment in force on the day: the most recent run (by its start, the
-- first step's start) that started before the end of the day, of the same deployment_id, measured on a version
-- whose configuration (gpu_type, gpus_per_replica, tp, pp, quantization) equals the version in force at the end
-- of the day. The replica count may differ: goodput per GPU carries over a scale-up. loadtest_history holds
-- core.loadtest_steps of every day up to this one; the run's configuration is the inventory version in force at
-- its start. One row per deployment in force, with NULL run columns when no run matches.
WITH runs AS (
    SELECT
        run_id,
        any_value(deployment_id) AS deployment_id,
        min(step_start) AS run_start,
        any_value(lambda_slo_max) AS lambda_slo_max,
        any_value(goodput_per_gpu_at_max) AS goodput_per_gpu_at_max,
        bool_or(verified) AS verified,
        any_value(first_failing_step_rate) AS first_failing_step_rate,
        any_value(stable_window_min) AS stable_window_min,
        max(segment_minutes) FILTER (WHERE is_lambda_slo_max_step) AS lambda_step_minutes,
        max(stable_windows_met) FILTER (WHERE is_lambda_slo_max_step) AS lambda_step_windows_met,
        max(stable_windows) FILTER (WHERE is_lambda_slo_max_step) AS lambda_step_windows
    FROM loadtest_history
    GROUP BY run_id
),
runs_configured AS (
    SELECT r.*, v.gpu_type, v.gpus_per_replica, v.tp, v.pp, v.quantization
    FROM runs AS r
    LEFT JOIN cfg_deployments AS v
      ON v.deployment_id = r.deployment_id
     AND v.valid_from <= r.run_start
     AND (v.valid_to IS NULL OR v.valid_to > r.run_start)
    WHERE r.run_start < $day_end::TIMESTAMPTZ
),
configuration AS (
    SELECT
        deployment_id,
        arg_max(model, in_force_to) AS model,
        arg_max(gpu_type, in_force_to) AS gpu_type,
        arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica,
        arg_max(tp, in_force_to) AS tp,
        arg_max(pp, in_force_to) AS pp,
        arg_max(quantization, in_force_to) AS quantization
    FROM day_deployments
    GROUP BY deployment_id
),
compared AS (
    SELECT
        c.deployment_id,
        r.* EXCLUDE (deployment_id, gpu_type, gpus_per_replica, tp, pp, quantization),
        coalesce(r.gpu_type = c.gpu_type AND r.gpus_per_replica = c.gpus_per_replica AND r.tp = c.tp
                 AND r.pp = c.pp AND r.quantization = c.quantization, false) AS same_configuration
    FROM configuration AS c
    JOIN runs_configured AS r ON r.deployment_id = c.deployment_id
),
chosen AS (
    SELECT *
    FROM compared
    WHERE same_configuration
    QUALIFY row_number() OVER (PARTITION BY deployment_id ORDER BY run_start DESC, run_id DESC) = 1
),
others AS (
    SELECT deployment_id, count(*) FILTER (WHERE NOT same_configuration) AS runs_other_configuration
    FROM compared
    GROUP BY deployment_id
)
SELECT
    c.model,
    c.deployment_id,
    r.run_id AS loadtest_run_id,
    r.run_start AS loadtest_start,
    r.lambda_slo_max,
    r.goodput_per_gpu_at_max,
    coalesce(r.verified, false) AS loadtest_verified,
    r.first_failing_step_rate,
    r.stable_window_min AS loadtest_stable_window_min,
    r.lambda_step_minutes,
    r.lambda_step_windows_met,
    r.lambda_step_windows,
    coalesce(o.runs_other_configuration, 0) AS runs_other_configuration
FROM configuration AS c
LEFT JOIN chosen AS r ON r.deployment_id = c.deployment_id
LEFT JOIN others AS o ON o.deployment_id = c.deployment_id
ORDER BY c.model, c.deployment_id
