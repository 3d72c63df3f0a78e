-- core.loadtest_steps for one run: every arrival-rate step measured on its measurement segment
-- [step start + warmup_min, step end), with the commitments of docs/metrics.md section 2, and the run's
-- lambda_slo_max (section 5) on every row. Requests are the run's accepted ones judged against the SLO policy in
-- force on the run's day (requests_judged); a request belongs to the segment it was received in.
--
-- A step holds (all_met) when every judged ISL bucket meets attainment_target (a bucket with fewer effective
-- requests than min_requests_per_bucket is not judged, and a step with no judged bucket does not hold), the
-- success rate meets its target, and the P99s of queue, ITL and TPOT over successful requests are within their
-- limits (a P99 no request recorded a value for is not judged). A step is stable when its segment lasts at least
-- stable_window_min minutes and every stable_window_min window in it, one every step_min minutes, holds too.
-- lambda_slo_max is the highest arrival rate below the lowest failing step's; verified when its step is stable.
WITH run AS (
    SELECT
        r.run_id,
        r.model,
        r.deployment_id,
        timezone('UTC', r.start)::DATE AS day,
        r.warmup_min,
        d.gpu_type,
        d.gpus,
        d.gpu_power_w,
        p.slo_version,
        p.attainment_target,
        p.success_rate_target,
        p.min_requests_per_bucket,
        p.queue_p99_ms AS queue_p99_limit_ms,
        p.itl_p99_ms AS itl_p99_limit_ms,
        p.tpot_p99_ms AS tpot_p99_limit_ms,
        p.stable_window_min,
        p.step_min
    FROM cfg_loadtest_run AS r
    JOIN run_deployment AS d ON d.deployment_id = r.deployment_id
    JOIN day_slo_policy AS p ON p.model = r.model
),
steps AS (
    SELECT
        s.step_index,
        s.arrival_rate,
        s.step_start,
        s.step_end,
        s.step_start + to_minutes(run.warmup_min) AS segment_start,
        s.step_end AS segment_end,
        epoch(s.step_end - s.step_start) / 60.0 - run.warmup_min AS segment_minutes
    FROM cfg_loadtest_step AS s
    CROSS JOIN run
),
-- window_index -1 is the whole segment; 0, 1, ... are the stable_window_min windows that fit in it.
windows AS (
    SELECT step_index, -1 AS window_index, segment_start AS window_start, segment_end AS window_end
    FROM steps
    UNION ALL
    SELECT
        step_index,
        window_index,
        segment_start + to_minutes(window_index * step_min) AS window_start,
        segment_start + to_minutes(window_index * step_min + stable_window_min) AS window_end
    FROM (
        SELECT
            s.step_index,
            s.segment_start,
            run.step_min,
            run.stable_window_min,
            unnest(range(0, greatest(floor((s.segment_minutes - run.stable_window_min) / run.step_min)::BIGINT + 1,
                                     0))) AS window_index
        FROM steps AS s
        CROSS JOIN run
    )
),
in_window AS (
    SELECT w.step_index, w.window_index, j.*
    FROM windows AS w
    JOIN requests_judged AS j ON j.received_at >= w.window_start AND j.received_at < w.window_end
),
window_stats AS (
    SELECT
        step_index,
        window_index,
        count(*) AS requests,
        count(*) FILTER (WHERE is_effective) AS effective_requests,
        count(*) FILTER (WHERE is_success) AS successful_requests,
        count(*) FILTER (WHERE is_failure) AS failed_requests,
        count(*) FILTER (WHERE is_compliant) AS compliant_requests,
        quantile_cont(ttft_ms, 0.99) FILTER (WHERE is_success) AS ttft_p99_ms,
        quantile_cont(queue_ms, 0.99) FILTER (WHERE is_success) AS queue_p99_ms,
        quantile_cont(itl_max_ms, 0.99) FILTER (WHERE is_success) AS itl_p99_ms,
        quantile_cont(tpot_ms, 0.99) FILTER (WHERE is_success) AS tpot_p99_ms,
        quantile_cont(e2e_ms, 0.99) FILTER (WHERE is_success) AS e2e_p99_ms,
        (avg(e2e_ms::DECIMAL(18, 3)) FILTER (WHERE is_success))::DOUBLE AS e2e_mean_ms,  -- exact, order-free
        coalesce(sum(output_tokens) FILTER (WHERE is_success), 0)::BIGINT AS output_tokens,
        coalesce(sum(output_tokens) FILTER (WHERE is_compliant), 0)::BIGINT AS compliant_output_tokens,
        -- the mix of the step (effective requests): what the work model and the likeness to production read
        coalesce(sum(output_tokens) FILTER (WHERE is_effective), 0)::BIGINT AS effective_output_tokens,
        coalesce(sum(input_tokens) FILTER (WHERE is_effective), 0)::BIGINT AS input_total,
        coalesce(sum(coalesce(cached_input_tokens, 0)) FILTER (WHERE is_effective), 0)::BIGINT AS input_cached,
        quantile_disc(input_tokens, 0.5) FILTER (WHERE is_effective) AS isl_p50,
        quantile_disc(input_tokens, 0.9) FILTER (WHERE is_effective) AS isl_p90,
        quantile_disc(output_tokens, 0.5) FILTER (WHERE is_effective) AS osl_p50,
        quantile_disc(output_tokens, 0.9) FILTER (WHERE is_effective) AS osl_p90,
        min(received_at) AS first_received_at,
        -- a request without e2e_ms (rejected) finished when it was received
        max(epoch(received_at) + coalesce(e2e_ms, 0) / 1000.0) AS last_finished_epoch
    FROM in_window
    GROUP BY step_index, window_index
),
bucket_counts AS (
    SELECT
        step_index,
        window_index,
        isl_bucket,
        count(*) FILTER (WHERE is_effective) AS effective_requests,
        count(*) FILTER (WHERE is_compliant) AS compliant_requests
    FROM in_window
    GROUP BY step_index, window_index, isl_bucket
),
buckets AS (
    SELECT
        w.step_index,
        w.window_index,
        b.isl_bucket,
        b.bucket_order,
        coalesce(c.effective_requests, 0) AS effective_requests,
        coalesce(c.compliant_requests, 0) AS compliant_requests,
        c.compliant_requests / nullif(c.effective_requests, 0) AS attainment,
        coalesce(c.effective_requests, 0) >= greatest(run.min_requests_per_bucket, 1) AS judged,
        CASE WHEN judged THEN attainment >= run.attainment_target END AS attainment_met
    FROM windows AS w
    CROSS JOIN day_slo_isl_bucket AS b
    CROSS JOIN run
    LEFT JOIN bucket_counts AS c
      ON c.step_index = w.step_index AND c.window_index = w.window_index AND c.isl_bucket = b.isl_bucket
),
bucket_verdicts AS (
    SELECT
        step_index,
        window_index,
        list({
            'isl_bucket': isl_bucket,
            'effective_requests': effective_requests,
            'compliant_requests': compliant_requests,
            'attainment': attainment,
            'judged': judged,
            'attainment_met': attainment_met
        } ORDER BY bucket_order) AS buckets,
        count(*) FILTER (WHERE judged) AS buckets_judged,
        coalesce(list(isl_bucket ORDER BY bucket_order) FILTER (WHERE judged AND NOT attainment_met),
                 []::VARCHAR[]) AS buckets_failed,
        min(attainment) FILTER (WHERE judged) AS attainment_min,
        bool_and(attainment_met) FILTER (WHERE judged) AS attainment_met
    FROM buckets
    GROUP BY step_index, window_index
),
judged AS (
    SELECT
        w.step_index,
        w.window_index,
        coalesce(s.requests, 0) AS requests,
        coalesce(s.effective_requests, 0) AS effective_requests,
        coalesce(s.successful_requests, 0) AS successful_requests,
        coalesce(s.failed_requests, 0) AS failed_requests,
        coalesce(s.compliant_requests, 0) AS compliant_requests,
        s.successful_requests / nullif(s.effective_requests, 0) AS success_rate,
        s.compliant_requests / nullif(s.effective_requests, 0) AS attainment,
        v.attainment_min,
        v.buckets_judged,
        v.buckets_failed,
        v.buckets,
        s.ttft_p99_ms,
        s.queue_p99_ms,
        s.itl_p99_ms,
        s.tpot_p99_ms,
        s.e2e_p99_ms,
        s.e2e_mean_ms,
        s.first_received_at,
        to_timestamp(s.last_finished_epoch) AS last_finished_at,
        s.last_finished_epoch - epoch(s.first_received_at) AS wall_time_s,
        coalesce(s.output_tokens, 0) AS output_tokens,
        coalesce(s.compliant_output_tokens, 0) AS compliant_output_tokens,
        coalesce(s.effective_output_tokens, 0) AS effective_output_tokens,
        coalesce(s.input_total, 0) AS input_total,
        coalesce(s.input_cached, 0) AS input_cached,
        coalesce(s.input_total, 0) - coalesce(s.input_cached, 0) AS input_recomputed,
        s.isl_p50,
        s.isl_p90,
        s.osl_p50,
        s.osl_p90,
        v.attainment_met,
        success_rate >= run.success_rate_target AS success_rate_met,
        s.queue_p99_ms <= run.queue_p99_limit_ms AS queue_p99_met,
        s.itl_p99_ms <= run.itl_p99_limit_ms AS itl_p99_met,
        s.tpot_p99_ms <= run.tpot_p99_limit_ms AS tpot_p99_met,
        coalesce(attainment_met AND success_rate_met, false)
            AND coalesce(queue_p99_met, true) AND coalesce(itl_p99_met, true) AND coalesce(tpot_p99_met, true)
            AS all_met
    FROM windows AS w
    CROSS JOIN run
    JOIN bucket_verdicts AS v ON v.step_index = w.step_index AND v.window_index = w.window_index
    LEFT JOIN window_stats AS s ON s.step_index = w.step_index AND s.window_index = w.window_index
),
stability AS (
    SELECT
        step_index,
        count(*) AS stable_windows,
        count(*) FILTER (WHERE all_met) AS stable_windows_met
    FROM judged
    WHERE window_index >= 0
    GROUP BY step_index
),
step_rows AS (
    SELECT
        st.*,
        j.* EXCLUDE (step_index, window_index),
        j.requests / (st.segment_minutes * 60.0) AS arrival_rate_measured,
        coalesce(b.stable_windows, 0) AS stable_windows,
        coalesce(b.stable_windows_met, 0) AS stable_windows_met,
        st.segment_minutes >= run.stable_window_min AND stable_windows_met = stable_windows AS stable,
        j.output_tokens / nullif(j.wall_time_s, 0) AS raw_throughput,
        j.compliant_output_tokens / nullif(j.wall_time_s, 0) AS slo_goodput,
        slo_goodput / run.gpus AS goodput_per_gpu,
        slo_goodput / (run.gpus * run.gpu_power_w) AS goodput_per_watt
    FROM steps AS st
    CROSS JOIN run
    JOIN judged AS j ON j.step_index = st.step_index AND j.window_index = -1
    LEFT JOIN stability AS b ON b.step_index = st.step_index
),
lowest_failing AS (
    SELECT min(arrival_rate) FILTER (WHERE NOT all_met) AS first_failing_step_rate FROM step_rows
),
slo_max AS (
    SELECT
        f.first_failing_step_rate,
        max(s.arrival_rate) FILTER (
            WHERE s.all_met AND s.arrival_rate < coalesce(f.first_failing_step_rate, 'infinity')
        ) AS lambda_slo_max
    FROM step_rows AS s
    CROSS JOIN lowest_failing AS f
    GROUP BY f.first_failing_step_rate
),
at_max AS (
    SELECT s.goodput_per_gpu AS goodput_per_gpu_at_max, s.stable AS verified
    FROM step_rows AS s
    JOIN slo_max AS l ON s.arrival_rate = l.lambda_slo_max
)
SELECT
    run.run_id,
    run.model,
    run.deployment_id,
    run.day,
    run.slo_version,
    run.gpu_type,
    run.gpus,
    s.step_index,
    s.arrival_rate,
    s.step_start,
    s.step_end,
    s.segment_start,
    s.segment_end,
    s.segment_minutes,
    s.requests,
    s.arrival_rate_measured,
    s.effective_requests,
    s.successful_requests,
    s.failed_requests,
    s.compliant_requests,
    s.success_rate,
    s.attainment,
    s.attainment_min,
    s.buckets_judged,
    s.buckets_failed,
    s.buckets,
    s.ttft_p99_ms,
    s.queue_p99_ms,
    s.itl_p99_ms,
    s.tpot_p99_ms,
    s.e2e_p99_ms,
    s.e2e_mean_ms,
    s.first_received_at,
    s.last_finished_at,
    s.wall_time_s,
    s.output_tokens,
    s.compliant_output_tokens,
    s.effective_output_tokens,
    s.input_total,
    s.input_cached,
    s.input_recomputed,
    s.isl_p50,
    s.isl_p90,
    s.osl_p50,
    s.osl_p90,
    s.raw_throughput,
    s.slo_goodput,
    s.goodput_per_gpu,
    s.goodput_per_watt,
    run.attainment_target,
    run.success_rate_target,
    s.attainment_met,
    s.success_rate_met,
    s.queue_p99_met,
    s.itl_p99_met,
    s.tpot_p99_met,
    s.all_met,
    run.stable_window_min,
    s.stable_windows,
    s.stable_windows_met,
    s.stable,
    coalesce(s.arrival_rate = l.lambda_slo_max, false) AS is_lambda_slo_max_step,
    l.lambda_slo_max,
    m.goodput_per_gpu_at_max,
    coalesce(m.verified, false) AS verified,
    l.first_failing_step_rate,
    $rows_read::BIGINT AS rows_read,
    $rows_accepted::BIGINT AS rows_accepted,
    $rows_quarantined::BIGINT AS rows_quarantined,
    $duplicates_merged::BIGINT AS duplicates_merged
FROM step_rows AS s
CROSS JOIN run
CROSS JOIN slo_max AS l
LEFT JOIN at_max AS m ON true
ORDER BY s.step_index
