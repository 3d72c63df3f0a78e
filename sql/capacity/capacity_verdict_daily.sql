-- infra.capacity_verdict_daily: the verdict of each deployment in force on the day (GPU and hosted-API), decided
-- here and nowhere else (docs/metrics.md, section 6, "Verdict"): the SLO met or the figures missed, GPUs needed with
-- the rule that binds it, GPUs in force and the gap in three parts, the verdict in one word and in plain words,
-- $/MTok delivered and under SLO, the capacity basis and the hours over capacity.
--
-- Reads the day's finished tables as views: day_capacity_plan (infra.capacity_plan_daily), day_capacity
-- (infra.capacity_daily), day_slo_daily (infra.slo_daily), day_cost_per_mtok (finance.cost_per_mtok_daily),
-- day_deployments (core.deployments_daily: the hosted-API deployments in force), and the SLO policy of the day
-- (day_slo_policy: every target and limit, the P99 limits slo_daily does not carry among them; day_slo_isl_bucket:
-- the buckets' order).
--
-- GPUs needed is the plan's GPUs needed (gpus_needed, the larger of the Erlang C plan and the peak
-- sizing); its gap to the GPUs in force splits into gap_slo_capacity (the binding sizing's GPUs before headroom
-- minus the GPUs in force: above 0 the peak itself needs more than runs), gap_headroom (the policy's percentages)
-- and gap_redundancy (the replicas the n_minus_k failure domains take down), which add up to gpus_needed -
-- gpus_in_force.
-- The verdict: 'slo_missed' when the SLO was judged and missed; else 'short' when the peak needs more GPUs than in
-- force; else 'policy' when only the headroom or redundancy policy is short; else 'ok'. A hosted-API deployment has
-- no GPUs of ours: 'slo_missed' or 'ok'. A GPU deployment whose plan has no GPUs needed is judged on its SLO alone,
-- and its words say GPUs needed is not known.
--
-- Figures in the words are printed as the review prints them: GPUs to 2 decimals, a missed figure to 4 decimals (0
-- for milliseconds) or as many more as it takes not to print as its limit (0.99948 misses 0.9995), a limit as %g.
WITH policy AS (
    SELECT model, attainment_target, success_rate_target, queue_p99_ms AS queue_limit, itl_p99_ms AS itl_limit,
           tpot_p99_ms AS tpot_limit
    FROM day_slo_policy
),
slo AS (
    SELECT s.* EXCLUDE (attainment_target, success_rate_target), b.bucket_order, p.attainment_target,
           p.success_rate_target, p.queue_limit, p.itl_limit, p.tpot_limit,
           s.isl_bucket <> 'all' AND s.attainment_met IS NOT NULL AS judged_bucket
    FROM day_slo_daily AS s
    JOIN policy AS p USING (model)
    LEFT JOIN day_slo_isl_bucket AS b USING (model, isl_bucket)
),
-- Every commitment of every row, one row each: 0 attainment, 1 success rate (at least), 2-4 the P99s (at most).
commitments AS (
    SELECT model, isl_bucket, bucket_order, judged_bucket, 0 AS k, 'attainment' AS label, attainment AS figure,
           s.attainment_target AS lim, 4 AS places, attainment_met AS met
    FROM slo AS s
    UNION ALL
    SELECT model, isl_bucket, bucket_order, judged_bucket, 1, 'success rate', success_rate, s.success_rate_target, 4,
           success_rate_met
    FROM slo AS s
    UNION ALL
    SELECT model, isl_bucket, bucket_order, judged_bucket, 2, 'P99 queue', queue_p99_ms, queue_limit, 0, queue_p99_met
    FROM slo
    UNION ALL
    SELECT model, isl_bucket, bucket_order, judged_bucket, 3, 'P99 ITL', itl_p99_ms, itl_limit, 0, itl_p99_met
    FROM slo
    UNION ALL
    SELECT model, isl_bucket, bucket_order, judged_bucket, 4, 'P99 TPOT', tpot_p99_ms, tpot_limit, 0, tpot_p99_met
    FROM slo
),
missed AS (  -- each missed commitment in words: 'success rate 0.9991 < 0.9995', 'P99 queue 412 ms > 300 ms'
    SELECT
        *,
        label || ' ' || CASE WHEN figure IS NULL THEN '—' ELSE format('{:,.{}f}', figure,
            CASE WHEN round(figure, places) <> round(lim, places) THEN places
                 WHEN round(figure, places + 1) <> round(lim, places + 1) THEN places + 1
                 WHEN round(figure, places + 2) <> round(lim, places + 2) THEN places + 2
                 WHEN round(figure, places + 3) <> round(lim, places + 3) THEN places + 3
                 ELSE places + 4 END) END
        || CASE WHEN k <= 1 THEN ' < ' || format('{:g}', lim) ELSE ' ms > ' || format('{:g}', lim) || ' ms' END
            AS words
    FROM commitments
    WHERE met = false AND lim IS NOT NULL
),
-- The missed figures in the review's order: attainment per judged bucket (never the whole-model mean instead), the
-- model's success rate and P99s, then a judged bucket's miss of a commitment the model as a whole met. A bucket not
-- judged (fewer judged requests than min_requests_per_bucket) is never named.
named AS (
    SELECT model, 1 AS part, bucket_order AS o1, k AS o2, 'bucket ' || isl_bucket || ' ' || words AS words
    FROM missed WHERE k = 0 AND isl_bucket <> 'all'
    UNION ALL
    SELECT model, 2, 0, k, words FROM missed WHERE k >= 1 AND isl_bucket = 'all'
    UNION ALL
    SELECT m.model, 3, m.bucket_order, m.k, 'bucket ' || m.isl_bucket || ' ' || m.words
    FROM missed AS m
    JOIN commitments AS w ON w.model = m.model AND w.isl_bucket = 'all' AND w.k = m.k
    WHERE m.k >= 1 AND m.judged_bucket AND w.met IS DISTINCT FROM false
),
model_slo AS (
    SELECT
        w.model,
        w.all_met AS slo_met,
        coalesce(
            (SELECT string_agg(n.words, '; ' ORDER BY n.part, n.o1 NULLS LAST, n.o2) FROM named AS n
             WHERE n.model = w.model),
            (SELECT m.words || ' (buckets too small to judge)' FROM missed AS m
             WHERE m.model = w.model AND m.isl_bucket = 'all' AND m.k = 0)) AS missed_figures
    FROM slo AS w
    WHERE w.isl_bucket = 'all'
),
gpu AS (
    SELECT
        p.model,
        p.deployment_id,
        p.gpus_needed,
        p.binding_sizing AS gpus_needed_rule,
        p.gpus_deployed AS gpus_in_force,
        p.gpus_per_replica,
        p.headroom_failure_replicas,
        p.headroom_n_minus_k,
        p.headroom_failure_domain,
        CASE p.binding_sizing WHEN 'goodput' THEN p.goodput_sizing_base_gpus WHEN 'erlang_c' THEN p.base_gpus
        END AS base_gpus,
        (1 + p.headroom_scaling_lag_pct) * (1 + p.headroom_forecast_error_pct) * (1 + p.headroom_release_pct)
            * (1 + p.headroom_jitter_pct) - 1 AS headroom_pct,
        p.hours_over_capacity,
        c.capacity_source,
        c.capacity_verified,
        CASE c.capacity_source
            WHEN 'loadtest' THEN CASE WHEN c.capacity_verified THEN 'verified load test ' || c.loadtest_run_id
                                      ELSE 'load test ' || c.loadtest_run_id || ', reference only (not verified)' END
            WHEN 'demonstrated' THEN 'demonstrated lower bound'
            ELSE 'no capacity figure' END
        || coalesce(' (load test ' || nullif(c.other_configuration_run_id, '') || ' measured another configuration: '
                    || c.other_configuration_differences || ')', '') AS capacity_basis
    FROM day_capacity_plan AS p
    LEFT JOIN day_capacity AS c USING (model, deployment_id)
),
gaps AS (
    SELECT
        *,
        CASE WHEN gpus_needed IS NOT NULL THEN base_gpus - gpus_in_force END AS gap_slo_capacity,
        CASE WHEN gpus_needed IS NOT NULL
             THEN gpus_needed - base_gpus - headroom_failure_replicas * gpus_per_replica END AS gap_headroom,
        CASE WHEN gpus_needed IS NOT NULL THEN (headroom_failure_replicas * gpus_per_replica)::DOUBLE
        END AS gap_redundancy,
        -- The peak sizing divides by the capacity per GPU: on a lower bound (or an unverified load test) GPUs needed
        -- is at most that figure.
        gpus_needed IS NOT NULL AND gpus_needed_rule = 'goodput'
            AND (capacity_source = 'demonstrated' OR (capacity_source = 'loadtest' AND NOT capacity_verified))
            AS gpus_needed_at_most
    FROM gpu
),
deployments AS (
    SELECT
        g.model, g.deployment_id, 'gpu' AS kind, g.gpus_needed, g.gpus_needed_rule, g.gpus_in_force,
        g.gap_slo_capacity, g.gap_headroom, g.gap_redundancy, g.gpus_needed_at_most, g.gpus_per_replica,
        g.headroom_failure_replicas, g.headroom_pct, g.capacity_source, g.capacity_verified, g.capacity_basis,
        g.hours_over_capacity, g.headroom_n_minus_k, g.headroom_failure_domain
    FROM gaps AS g
    UNION ALL
    SELECT DISTINCT
        d.model, d.deployment_id, 'api', NULL::DOUBLE, NULL::VARCHAR, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE,
        NULL::DOUBLE, false, NULL::INTEGER, NULL::INTEGER, NULL::DOUBLE, NULL::VARCHAR, NULL::BOOLEAN,
        'provider-managed', NULL::BIGINT, NULL::INTEGER, NULL::VARCHAR
    FROM day_deployments AS d
    WHERE d.kind = 'api'
      AND NOT EXISTS (SELECT 1 FROM day_capacity_plan AS p
                      WHERE p.model = d.model AND p.deployment_id = d.deployment_id)
),
costs AS (  -- one currency per deployment and day; a deployment costed in several has no single figure (NULL)
    SELECT
        model, deployment_id,
        CASE WHEN count(DISTINCT currency) = 1 THEN any_value(currency) END AS currency,
        CASE WHEN count(DISTINCT currency) = 1 THEN any_value(cost_per_mtok_output) END AS cost_per_mtok_delivered,
        CASE WHEN count(DISTINCT currency) = 1 THEN any_value(cost_per_mtok_goodput) END AS cost_per_mtok_goodput
    FROM day_cost_per_mtok
    GROUP BY model, deployment_id
),
judged AS (
    SELECT
        d.*,
        s.slo_met,
        s.missed_figures,
        CASE
            WHEN s.slo_met = false THEN 'slo_missed'
            WHEN d.gap_slo_capacity > 1e-9 THEN 'short'
            WHEN d.gpus_needed - d.gpus_in_force > 1e-9 THEN 'policy'
            ELSE 'ok'
        END AS verdict,
        CASE WHEN d.gpus_needed - d.gpus_in_force > 1e-9 AND d.gpus_per_replica > 0
             THEN ceil(round((d.gpus_needed - d.gpus_in_force) / d.gpus_per_replica, 9))::BIGINT END
            AS replicas_to_add,
        CASE s.slo_met WHEN false THEN 'SLO missed' || coalesce(': ' || s.missed_figures, '')
                       WHEN true THEN 'SLO met' ELSE 'SLO not judged' END AS slo_words
    FROM deployments AS d
    LEFT JOIN model_slo AS s USING (model)
),
worded AS (
    SELECT
        *,
        CASE WHEN gpus_needed_at_most THEN
            CASE WHEN capacity_source = 'demonstrated' THEN ' (at most: demonstrated capacity is a lower bound)'
                 ELSE ' (at most: the load test is a reference figure, not verified)' END
             ELSE '' END AS bound_words,
        concat_ws(' and ',  -- concat_ws skips a NULL part
            -- N+k in the policy's failure domain: 'N+1' (replicas), 'N+1 node', 'N+2 racks'
            CASE WHEN gap_redundancy > 1e-9 THEN 'N+' || headroom_n_minus_k
                || CASE WHEN headroom_failure_domain IN ('node', 'rack')
                        THEN ' ' || headroom_failure_domain || CASE WHEN headroom_n_minus_k = 1 THEN '' ELSE 's' END
                        ELSE '' END END,
            CASE WHEN gap_headroom > 1e-9 THEN format('{:.1f}', headroom_pct * 100) || '% headroom' END) AS policy_items
    FROM judged
),
gpu_words AS (
    SELECT
        *,
        CASE
            WHEN kind = 'api' THEN 'provider-managed: no GPUs of ours'
            WHEN gpus_needed IS NULL THEN 'GPUs needed not known (infra.capacity_plan_daily.plan_note says why)'
            WHEN gap_slo_capacity > 1e-9 THEN
                'short: the peak needs ' || format('{:,.2f}', gap_slo_capacity) || ' more GPUs than the '
                || format('{:,.2f}', gpus_in_force) || ' in force' || bound_words
            WHEN gpus_needed - gpus_in_force > 1e-9 THEN
                'policy: ' || coalesce(replicas_to_add || ' more replica' || CASE WHEN replicas_to_add = 1 THEN ''
                                                                               ELSE 's' END
                                       || ' (' || (replicas_to_add * gpus_per_replica) || ' GPUs)',
                                       format('{:,.2f}', gpus_needed - gpus_in_force) || ' more GPUs')
                || coalesce(' for ' || nullif(policy_items, ''), '') || bound_words
            ELSE 'the ' || format('{:,.2f}', gpus_in_force) || ' GPUs in force hold the peak with the headroom policy ('
                 || format('{:,.2f}', gpus_needed) || ' needed)'
        END AS gpu_text
    FROM worded
)
SELECT
    $day::DATE AS day,
    g.model,
    g.deployment_id,
    g.slo_met,
    g.missed_figures,
    g.gpus_needed,
    g.gpus_needed_rule,
    g.gpus_in_force,
    g.gap_slo_capacity,
    g.gap_headroom,
    g.gap_redundancy,
    g.verdict,
    CASE WHEN g.verdict = 'short' THEN g.gpu_text || '; ' || g.slo_words
         ELSE g.slo_words || '; ' || g.gpu_text END AS verdict_text,
    c.cost_per_mtok_delivered,
    c.cost_per_mtok_goodput,
    g.capacity_basis,
    g.hours_over_capacity,
    c.currency,
    g.kind,
    g.replicas_to_add,
    g.gpus_needed_at_most
FROM gpu_words AS g
LEFT JOIN costs AS c USING (model, deployment_id)
ORDER BY g.model, g.deployment_id
