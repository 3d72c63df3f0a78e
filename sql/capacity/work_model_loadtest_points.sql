-- The points the work model of a deployment is fitted to from its load test (docs/metrics.md, section 6, "Work
-- model"): every step of the run that speaks for it (capacity_model_test) below saturation, i.e. holding every
-- commitment at an arrival rate up to the run's lambda_slo_max, whose measurement segment [segment_start,
-- segment_end) the GPU telemetry covers (a sample of the deployment's GPUs in at least 90% of its minutes;
-- loadtest_gpu_samples holds core.gpu_samples of the days the segments touch). x1 = recomputed input tokens/s and
-- x2 = output tokens/s of the segment's effective requests; y = busy GPU-seconds per second: the mean SM activity
-- (else GPU utilization / 100) over the deployment's GPUs and the segment, times the GPUs measured.
WITH steps AS (
    SELECT s.deployment_id, s.run_id, s.step_index, s.segment_start, s.segment_end, s.segment_minutes,
           s.input_recomputed, s.effective_output_tokens
    FROM loadtest_history AS s
    JOIN capacity_model_test AS t ON t.loadtest_run_id = s.run_id
    WHERE s.all_met AND s.lambda_slo_max IS NOT NULL AND s.arrival_rate <= s.lambda_slo_max
),
busy AS (
    SELECT
        s.run_id,
        s.step_index,
        -- averaged in DECIMAL: a parallel DOUBLE sum depends on thread timing, and a re-run must be identical
        (avg(g.value::DECIMAL(18, 6)) FILTER (WHERE g.metric = 'sm_active'))::DOUBLE AS sm_active,
        (avg(g.value::DECIMAL(18, 6)) FILTER (WHERE g.metric = 'gpu_util_pct'))::DOUBLE / 100.0 AS util,
        count(DISTINCT g.gpu_uuid) AS gpus_measured,
        count(DISTINCT date_trunc('minute', g.sampled_at)) AS minutes_sampled
    FROM steps AS s
    JOIN loadtest_gpu_samples AS g
      ON g.deployment_id = s.deployment_id
     AND g.sampled_at >= s.segment_start
     AND g.sampled_at < s.segment_end
     AND g.metric IN ('sm_active', 'gpu_util_pct')
    GROUP BY s.run_id, s.step_index
)
SELECT
    s.deployment_id,
    s.run_id,
    s.step_index,
    s.input_recomputed / (s.segment_minutes * 60.0) AS recomputed_input_token_rate,
    s.effective_output_tokens / (s.segment_minutes * 60.0) AS output_token_rate,
    coalesce(b.sm_active, b.util) * b.gpus_measured AS busy_gpus
FROM steps AS s
JOIN busy AS b ON b.run_id = s.run_id AND b.step_index = s.step_index
WHERE b.minutes_sampled >= 0.9 * s.segment_minutes AND coalesce(b.sm_active, b.util) IS NOT NULL
ORDER BY s.deployment_id, s.step_index
