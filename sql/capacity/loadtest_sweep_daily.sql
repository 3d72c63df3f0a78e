-- infra.loadtest_sweep_daily: goodput against concurrency along the load test that speaks for each deployment on the
-- day (loadtest_choice: sql/capacity/capacity_loadtest_choice.sql, the most recent run of the configuration in force),
-- one row per step of that run, read from loadtest_history (core.loadtest_steps of every day up to this one).
--
-- concurrency is Little's law on the step: its measured arrival rate x the mean E2E of its successful requests (s),
-- the requests in flight; per replica, over the replicas under test (the run's GPUs / the configuration's
-- gpus_per_replica, which the identity holds equal to the run's). The knee is the run's lambda_slo_max step: the
-- highest arrival rate below the lowest step that broke a commitment (docs/adr/0122-batching-and-the-sweep.md); a run
-- with no such step has no knee. A deployment without a run of its configuration has no rows.
SELECT
    $day::DATE AS day,
    c.model,
    c.deployment_id,
    c.loadtest_run_id,
    c.loadtest_start,
    c.loadtest_verified,
    h.max_num_seqs,
    h.max_num_batched_tokens,
    h.chunked_prefill,
    h.step_index,
    h.arrival_rate,
    h.arrival_rate_measured,
    h.e2e_mean_ms,
    h.gpus,
    h.gpus / d.gpus_per_replica AS replicas_under_test,
    h.arrival_rate_measured * h.e2e_mean_ms / 1000.0 AS concurrency,
    concurrency / nullif(replicas_under_test, 0) AS concurrency_per_replica,
    h.goodput_per_gpu,
    h.attainment,
    h.ttft_p99_ms,
    h.queue_p99_ms,
    h.itl_p99_ms,
    h.tpot_p99_ms,
    h.e2e_p99_ms,
    h.all_met,
    h.is_lambda_slo_max_step AS is_knee
FROM loadtest_choice AS c
JOIN loadtest_history AS h ON h.run_id = c.loadtest_run_id
JOIN (
    SELECT deployment_id, arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica
    FROM day_deployments
    GROUP BY deployment_id
) AS d ON d.deployment_id = c.deployment_id
ORDER BY c.model, c.deployment_id, h.step_index
