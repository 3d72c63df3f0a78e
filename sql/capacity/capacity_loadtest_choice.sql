-- The load-test run that speaks for each deployment in force on the day: the most recent run (by its start, the
-- first step's start) that started before the end of the day, of the same deployment_id, measured on a version
-- whose configuration identity equals the version in force at the end of the day. The identity is the model and
-- its model_version, the engine and its engine_version, gpu_type, gpus_per_replica, tp, pp, quantization,
-- cache_policy and the engine's batching settings max_num_seqs, max_num_batched_tokens and chunked_prefill (seed
-- 003: capacity is bound to the model and its configuration; seed 002: an engine or model upgrade voids the old
-- capacity conclusion; seed 000: throughput under an SLA depends on the batching policy). An optional field left
-- undeclared equals an undeclared one. The replica count may differ: goodput per GPU carries over a scale-up.
-- loadtest_history holds core.loadtest_steps of every day up to this one; the run's configuration is the inventory
-- version in force at its start, but for its batching settings, which core.loadtest_steps carries as the run ran
-- them (run.yaml's, else that inventory version's: sql/capacity/loadtest_batching.sql).
--
-- One row per deployment in force, with NULL run columns when no run matches. Beside it: how many runs measured
-- another configuration, and the most recent of them that is newer than the chosen run (or the most recent at all
-- when none matches), with the fields that differ ("engine_version 0.6.3 → 0.7.0"), so the capacity note can say
-- why a load test was not carried over. slots_at_lambda_slo_max is Little's law on the chosen run's lambda_slo_max
-- step: measured arrival rate x mean E2E of its successful requests / replicas under test (concurrent requests one
-- replica held within SLO), for a capacity plan whose inventory has no slots_per_replica.
WITH runs AS (
    SELECT
        run_id,
        any_value(deployment_id) AS deployment_id,
        min(step_start) AS run_start,
        any_value(gpus) AS gpus,
        any_value(max_num_seqs) AS max_num_seqs,
        any_value(max_num_batched_tokens) AS max_num_batched_tokens,
        any_value(chunked_prefill) AS chunked_prefill,
        any_value(lambda_slo_max) AS lambda_slo_max,
        any_value(goodput_per_gpu_at_max) AS goodput_per_gpu_at_max,
        bool_or(verified) AS verified,
        any_value(first_failing_step_rate) AS first_failing_step_rate,
        any_value(stable_window_min) AS stable_window_min,
        max(segment_minutes) FILTER (WHERE is_lambda_slo_max_step) AS lambda_step_minutes,
        max(stable_windows_met) FILTER (WHERE is_lambda_slo_max_step) AS lambda_step_windows_met,
        max(stable_windows) FILTER (WHERE is_lambda_slo_max_step) AS lambda_step_windows,
        max(arrival_rate_measured * e2e_mean_ms / 1000.0) FILTER (WHERE is_lambda_slo_max_step)
            AS concurrency_at_lambda_slo_max
    FROM loadtest_history
    GROUP BY run_id
),
runs_configured AS (
    SELECT
        r.*,
        v.model, v.model_version, v.engine, v.engine_version, v.gpu_type, v.gpus_per_replica, v.tp, v.pp,
        v.quantization, v.cache_policy
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
        arg_max(model_version, in_force_to) AS model_version,
        arg_max(engine, in_force_to) AS engine,
        arg_max(engine_version, in_force_to) AS engine_version,
        arg_max(gpu_type, in_force_to) AS gpu_type,
        arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica,
        arg_max(tp, in_force_to) AS tp,
        arg_max(pp, in_force_to) AS pp,
        arg_max(quantization, in_force_to) AS quantization,
        arg_max(cache_policy, in_force_to) AS cache_policy,
        arg_max(max_num_seqs, in_force_to) AS max_num_seqs,
        arg_max(max_num_batched_tokens, in_force_to) AS max_num_batched_tokens,
        arg_max(chunked_prefill, in_force_to) AS chunked_prefill
    FROM day_deployments
    WHERE kind = 'gpu'  -- a hosted-API model's capacity is its rate limits (infra.load_hourly)
    GROUP BY deployment_id
),
compared AS (
    SELECT
        c.deployment_id,
        r.* EXCLUDE (deployment_id, model, model_version, engine, engine_version, gpu_type, gpus_per_replica, tp, pp,
                     quantization, cache_policy, max_num_seqs, max_num_batched_tokens, chunked_prefill),
        r.gpus_per_replica AS run_gpus_per_replica,
        -- Each field that differs, as "field run value → value now"; an undeclared value reads "not declared".
        list_filter([
            CASE WHEN r.model IS DISTINCT FROM c.model
                 THEN 'model ' || coalesce(r.model, 'not declared') || ' → ' || c.model END,
            CASE WHEN r.model_version IS DISTINCT FROM c.model_version
                 THEN 'model_version ' || coalesce(r.model_version, 'not declared') || ' → '
                      || coalesce(c.model_version, 'not declared') END,
            CASE WHEN r.engine IS DISTINCT FROM c.engine
                 THEN 'engine ' || coalesce(r.engine, 'not declared') || ' → '
                      || coalesce(c.engine, 'not declared') END,
            CASE WHEN r.engine_version IS DISTINCT FROM c.engine_version
                 THEN 'engine_version ' || coalesce(r.engine_version, 'not declared') || ' → '
                      || coalesce(c.engine_version, 'not declared') END,
            CASE WHEN r.gpu_type IS DISTINCT FROM c.gpu_type
                 THEN 'gpu_type ' || coalesce(r.gpu_type, 'not declared') || ' → ' || c.gpu_type END,
            CASE WHEN r.gpus_per_replica IS DISTINCT FROM c.gpus_per_replica
                 THEN 'gpus_per_replica ' || coalesce(r.gpus_per_replica::VARCHAR, 'not declared') || ' → '
                      || c.gpus_per_replica END,
            CASE WHEN r.tp IS DISTINCT FROM c.tp
                 THEN 'tp ' || coalesce(r.tp::VARCHAR, 'not declared') || ' → ' || c.tp END,
            CASE WHEN r.pp IS DISTINCT FROM c.pp
                 THEN 'pp ' || coalesce(r.pp::VARCHAR, 'not declared') || ' → ' || c.pp END,
            CASE WHEN r.quantization IS DISTINCT FROM c.quantization
                 THEN 'quantization ' || coalesce(r.quantization, 'not declared') || ' → ' || c.quantization END,
            CASE WHEN r.cache_policy IS DISTINCT FROM c.cache_policy
                 THEN 'cache_policy ' || coalesce(r.cache_policy, 'not declared') || ' → ' || c.cache_policy END,
            CASE WHEN r.max_num_seqs IS DISTINCT FROM c.max_num_seqs
                 THEN 'max_num_seqs ' || coalesce(r.max_num_seqs::VARCHAR, 'not declared') || ' → '
                      || coalesce(c.max_num_seqs::VARCHAR, 'not declared') END,
            CASE WHEN r.max_num_batched_tokens IS DISTINCT FROM c.max_num_batched_tokens
                 THEN 'max_num_batched_tokens ' || coalesce(r.max_num_batched_tokens::VARCHAR, 'not declared')
                      || ' → ' || coalesce(c.max_num_batched_tokens::VARCHAR, 'not declared') END,
            CASE WHEN r.chunked_prefill IS DISTINCT FROM c.chunked_prefill
                 THEN 'chunked_prefill ' || coalesce(r.chunked_prefill::VARCHAR, 'not declared') || ' → '
                      || coalesce(c.chunked_prefill::VARCHAR, 'not declared') END
        ], lambda x: x IS NOT NULL) AS differences,
        len(differences) = 0 AS same_configuration
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
),
latest_other AS (
    SELECT o.deployment_id, o.run_id, o.run_start, o.differences
    FROM compared AS o
    LEFT JOIN chosen AS k ON k.deployment_id = o.deployment_id
    WHERE NOT o.same_configuration AND (k.run_start IS NULL OR o.run_start > k.run_start)
    QUALIFY row_number() OVER (PARTITION BY o.deployment_id ORDER BY o.run_start DESC, o.run_id DESC) = 1
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
    coalesce(o.runs_other_configuration, 0) AS runs_other_configuration,
    l.run_id AS other_configuration_run_id,
    l.run_start AS other_configuration_run_start,
    array_to_string(l.differences, ', ') AS other_configuration_differences,
    r.concurrency_at_lambda_slo_max / nullif(r.gpus / r.run_gpus_per_replica, 0) AS slots_at_lambda_slo_max
FROM configuration AS c
LEFT JOIN chosen AS r ON r.deployment_id = c.deployment_id
LEFT JOIN others AS o ON o.deployment_id = c.deployment_id
LEFT JOIN latest_other AS l ON l.deployment_id = c.deployment_id
ORDER BY c.model, c.deployment_id
