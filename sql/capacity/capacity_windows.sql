-- core.capacity_windows: every stable_window_min window of the UTC day, one starting every step_min minutes from
-- midnight and ending by the next midnight, for every deployment in force, judged on the requests received in it
-- against every commitment (docs/metrics.md, section 5: demonstrated sustainable goodput per GPU).
--
-- A window holds (all_met) by the load-test step rule: every judged ISL bucket (at least min_requests_per_bucket
-- effective requests, and at least one) meets attainment_target, and a window with no judged bucket does not
-- hold; the success rate meets its target; the P99s of queue, ITL and TPOT over successful requests are within
-- their limits (a P99 no request recorded is not judged). Requests are judged by sql/accounting/requests_judged.sql.
-- A window qualifies when it holds, its GPUs (time-weighted within the window) are above 0 and every inventory
-- version in force during it has the configuration of the end of the day (its identity: model and model_version,
-- engine and engine_version, gpu_type, gpus_per_replica, tp, pp, quantization, cache_policy; an undeclared version
-- equals an undeclared one): the figure describes that configuration. is_best marks the qualifying window with the highest
-- compliant output / (window seconds * GPUs), the earliest on a tie. The input of the window's effective requests
-- (total, cached, recomputed) is its mix: infra.capacity_daily reads the best window's input per compliant output token
-- for the input at a demonstrated capacity.
--
-- The requests are placed in their windows by sql/capacity/capacity_in_window.sql; the windows' counts, latency percentiles
-- and output are capacity_window_stats (sql/capacity/capacity_window_stats.sql), taken by tokenledger/capacity/day.py a batch
-- of windows at a time so that memory holds a batch's latencies, not the day's.
WITH policy AS (
    SELECT
        model,
        slo_version,
        min_requests_per_bucket,
        attainment_target,
        success_rate_target,
        queue_p99_ms AS queue_p99_limit_ms,
        itl_p99_ms AS itl_p99_limit_ms,
        tpot_p99_ms AS tpot_p99_limit_ms,
        stable_window_min::BIGINT * 60000000 AS window_us,
        step_min::BIGINT * 60000000 AS step_us,
        (epoch_us($day_end::TIMESTAMPTZ) - epoch_us($day_start::TIMESTAMPTZ) - window_us) // step_us AS last_window
    FROM day_slo_policy
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
        arg_max(cache_policy, in_force_to) AS cache_policy
    FROM day_deployments
    WHERE kind = 'gpu'  -- a hosted-API model's capacity is its rate limits (infra.load_hourly)
    GROUP BY deployment_id
),
window_index AS (
    SELECT c.model, c.deployment_id, p.window_us, p.step_us, unnest(range(0, p.last_window + 1)) AS window_index
    FROM configuration AS c
    JOIN policy AS p USING (model)
),
windows AS (
    SELECT
        model,
        deployment_id,
        window_index,
        $day_start::TIMESTAMPTZ + to_microseconds(window_index * step_us) AS window_start,
        $day_start::TIMESTAMPTZ + to_microseconds(window_index * step_us + window_us) AS window_end
    FROM window_index
),
window_gpus AS (
    SELECT
        w.deployment_id,
        w.window_index,
        sum(v.gpus * greatest(epoch(least(v.in_force_to, w.window_end) - greatest(v.in_force_from, w.window_start)),
                              0)) / epoch(w.window_end - w.window_start) AS gpus,
        coalesce(bool_and(v.model = c.model AND v.model_version IS NOT DISTINCT FROM c.model_version
                          AND v.engine IS NOT DISTINCT FROM c.engine
                          AND v.engine_version IS NOT DISTINCT FROM c.engine_version
                          AND v.gpu_type = c.gpu_type AND v.gpus_per_replica = c.gpus_per_replica AND v.tp = c.tp
                          AND v.pp = c.pp AND v.quantization = c.quantization AND v.cache_policy = c.cache_policy)
                     FILTER (WHERE v.in_force_to > w.window_start AND v.in_force_from < w.window_end),
                 false) AS configuration_matches
    FROM windows AS w
    JOIN day_deployments AS v ON v.deployment_id = w.deployment_id
    JOIN configuration AS c ON c.deployment_id = w.deployment_id
    GROUP BY w.deployment_id, w.window_index, w.window_start, w.window_end
),
in_window AS (
    SELECT * FROM capacity_in_window(0, 2147483647)
),
window_stats AS (
    SELECT * FROM capacity_window_stats
),
bucket_counts AS (
    SELECT
        deployment_id,
        window_index,
        isl_bucket,
        count(*) FILTER (WHERE is_effective) AS effective_requests,
        count(*) FILTER (WHERE is_compliant) AS compliant_requests
    FROM in_window
    GROUP BY deployment_id, window_index, isl_bucket
),
buckets AS (
    SELECT
        w.deployment_id,
        w.window_index,
        b.isl_bucket,
        b.bucket_order,
        coalesce(c.effective_requests, 0) AS effective_requests,
        coalesce(c.compliant_requests, 0) AS compliant_requests,
        c.compliant_requests / nullif(c.effective_requests, 0) AS attainment,
        coalesce(c.effective_requests, 0) >= greatest(p.min_requests_per_bucket, 1) AS judged,
        CASE WHEN judged THEN attainment >= p.attainment_target END AS attainment_met
    FROM windows AS w
    JOIN policy AS p ON p.model = w.model
    JOIN day_slo_isl_bucket AS b ON b.model = w.model
    LEFT JOIN bucket_counts AS c
      ON c.deployment_id = w.deployment_id AND c.window_index = w.window_index AND c.isl_bucket = b.isl_bucket
),
bucket_verdicts AS (
    SELECT
        deployment_id,
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
    GROUP BY deployment_id, window_index
),
judged AS (
    SELECT
        w.model,
        w.deployment_id,
        w.window_index,
        w.window_start,
        w.window_end,
        g.gpus,
        g.configuration_matches,
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
        s.queue_p99_ms,
        s.itl_p99_ms,
        s.tpot_p99_ms,
        coalesce(s.output_tokens, 0)::BIGINT AS output_tokens,
        coalesce(s.compliant_output_tokens, 0)::BIGINT AS compliant_output_tokens,
        coalesce(s.input_total, 0)::BIGINT AS input_total,
        coalesce(s.input_cached, 0)::BIGINT AS input_cached,
        v.attainment_met,
        success_rate >= p.success_rate_target AS success_rate_met,
        s.queue_p99_ms <= p.queue_p99_limit_ms AS queue_p99_met,
        s.itl_p99_ms <= p.itl_p99_limit_ms AS itl_p99_met,
        s.tpot_p99_ms <= p.tpot_p99_limit_ms AS tpot_p99_met,
        coalesce(v.attainment_met AND success_rate_met, false)
            AND coalesce(queue_p99_met, true) AND coalesce(itl_p99_met, true) AND coalesce(tpot_p99_met, true)
            AS all_met,
        coalesce(s.compliant_output_tokens, 0) / epoch(w.window_end - w.window_start) AS slo_goodput,
        slo_goodput / nullif(g.gpus, 0) AS goodput_per_gpu,
        all_met AND g.configuration_matches AND g.gpus > 0 AS qualifies,
        p.slo_version
    FROM windows AS w
    JOIN policy AS p ON p.model = w.model
    JOIN window_gpus AS g ON g.deployment_id = w.deployment_id AND g.window_index = w.window_index
    JOIN bucket_verdicts AS v ON v.deployment_id = w.deployment_id AND v.window_index = w.window_index
    LEFT JOIN window_stats AS s ON s.deployment_id = w.deployment_id AND s.window_index = w.window_index
)
SELECT
    $day::DATE AS day,
    model,
    deployment_id,
    window_index::INTEGER AS window_index,
    window_start,
    window_end,
    gpus,
    configuration_matches,
    requests,
    effective_requests,
    successful_requests,
    failed_requests,
    compliant_requests,
    success_rate,
    attainment,
    attainment_min,
    buckets_judged,
    buckets_failed,
    buckets,
    queue_p99_ms,
    itl_p99_ms,
    tpot_p99_ms,
    output_tokens,
    compliant_output_tokens,
    slo_goodput,
    goodput_per_gpu,
    attainment_met,
    success_rate_met,
    queue_p99_met,
    itl_p99_met,
    tpot_p99_met,
    all_met,
    qualifies,
    qualifies AND row_number() OVER (
        PARTITION BY deployment_id ORDER BY qualifies DESC, goodput_per_gpu DESC NULLS LAST, window_index
    ) = 1 AS is_best,
    slo_version,
    input_total,
    input_cached,
    input_total - input_cached AS input_recomputed
FROM judged
ORDER BY model, deployment_id, window_index
