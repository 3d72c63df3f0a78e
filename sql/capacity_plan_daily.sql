-- infra.capacity_plan_daily: per model, deployment in force and UTC day, the capacity plan of spec/metrics.md
-- section 6. capacity_plan_inputs (sql/capacity_plan_inputs.sql) holds the peak, service times, inventory and
-- policy; capacity_plan_figures holds what tokenledger.capacity computed from them with tokenledger/queueing.py:
-- Little's law, the least Erlang C slots with P(wait > queue_p99_ms) <= 1 - attainment_target, replicas both
-- ways (Erlang C and seed 000's rule with its redundancy), and GPUs needed with the policy's headroom itemized
-- (the parts add up: base_gpus + the four percentage parts + headroom_failure_gpus = gpus_needed).
SELECT
    $day::DATE AS day,
    i.model,
    i.deployment_id,
    i.peak_arrival_rate,
    i.mean_service_time_s,
    f.littles_law_concurrency,
    f.erlang_c_slots,
    f.replicas_needed_erlang,
    f.replicas_needed_seed_rule,
    i.headroom_n_minus_k AS headroom_failure_replicas,
    f.headroom_pct_total,
    f.gpus_needed,
    i.gpus_deployed::DOUBLE AS gpus_deployed,
    i.gpus_deployed - f.gpus_needed AS gpu_surplus,
    i.peak_to_mean,
    i.hours_over_capacity,
    i.max_backlog_tokens,
    i.peak_basis,
    i.peak_window_start,
    i.peak_window_end,
    i.peak_requests,
    i.requests,
    i.successful_requests,
    i.p99_service_time_s,
    f.offered_load,
    f.p_wait_over_limit,
    i.queue_p99_ms,
    i.attainment_target,
    i.slots_per_replica,
    i.gpus_per_replica,
    f.seed_rule_required_concurrency,
    f.seed_rule_redundancy,
    f.base_gpus,
    i.headroom_scaling_lag_pct,
    i.headroom_forecast_error_pct,
    i.headroom_release_pct,
    i.headroom_jitter_pct,
    f.headroom_scaling_lag_gpus,
    f.headroom_forecast_error_gpus,
    f.headroom_release_gpus,
    f.headroom_jitter_gpus,
    f.headroom_failure_gpus,
    f.replicas_needed,
    f.plan_note,
    i.slo_version
FROM capacity_plan_inputs AS i
JOIN capacity_plan_figures AS f ON f.deployment_id = i.deployment_id
ORDER BY i.model, i.deployment_id
