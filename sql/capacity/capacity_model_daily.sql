-- infra.capacity_model_daily: per model, GPU deployment in force and UTC day, the work model and the load test
-- checked against production (docs/metrics.md, section 6). capacity_model_inputs
-- (sql/capacity/capacity_model_inputs.sql) holds production's mix, the test's mix at its lambda_slo_max step, the
-- capacity and the planning peak; capacity_model_figures what tokenledger.capacity.day computed from them with
-- tokenledger/capacity/work.py: C_prefill and C_decode fitted to the load test's steps below saturation (else to
-- the production hours not over capacity, labelled), the work per output token of each mix, the work one GPU
-- sustains at the capacity point, the peak's work rate, the test's staleness and likeness to production, and the
-- capacity rescaled to production's mix.
SELECT
    $day::DATE AS day,
    i.model,
    i.deployment_id,
    f.c_prefill,
    f.c_decode,
    f.coefficients_source,
    f.coefficients_run_id,
    f.fit_points,
    f.fit_r2,
    f.fit_note,
    i.requests,
    i.isl_p50,
    i.isl_p90,
    i.osl_p50,
    i.osl_p90,
    i.cached_share,
    i.recomputed_input_per_request,
    i.output_per_request,
    i.loadtest_run_id,
    i.loadtest_requests,
    i.loadtest_isl_p50,
    i.loadtest_isl_p90,
    i.loadtest_osl_p50,
    i.loadtest_osl_p90,
    i.loadtest_cached_share,
    i.loadtest_recomputed_input_per_request,
    i.loadtest_output_per_request,
    i.loadtest_age_days,
    f.loadtest_stale,
    f.loadtest_representative,
    f.representativeness_rule,
    i.capacity_goodput_per_gpu,
    i.capacity_source,
    f.work_per_output_token_production,
    f.work_per_output_token_capacity,
    f.sustainable_work_per_gpu,
    i.peak_output_token_rate,
    i.peak_recomputed_input_token_rate,
    f.peak_work_rate,
    f.capacity_goodput_per_gpu_rescaled,
    f.model_note
FROM capacity_model_inputs AS i
JOIN capacity_model_figures AS f ON f.deployment_id = i.deployment_id
ORDER BY i.model, i.deployment_id
