-- infra.capacity_daily: per model, deployment and UTC day, output produced and compliant output over the day's
-- wall time, per GPU and per watt (docs/metrics.md, section 2), then the capacity of section 5: the capacity
-- goodput per GPU chosen by tokenledger.capacity.day (temp table capacity_choice: a verified load test, else the day's
-- demonstrated lower bound, else an unverified load test, else NULL, with the note that says which and why), daily
-- capacity over the day's time-weighted GPUs, utilization, the figures at the capacity point (section 5, in the cost
-- policy's currency: the deployment's daily cost of finance.cost_per_mtok_daily over the daily capacity is the $/MTok
-- under SLO at capacity, daily value = daily capacity / 1e6 x that, revenue at the list price beside it; the day's
-- realized $/MTok under SLO stays beside them), the input at capacity and the agent-task figures of the model.
-- Raw throughput is the output of every effective request over the wall time (section 2); the output of successful
-- requests alone is raw_throughput_successful.
--
-- Input at capacity: the capacity point's input per compliant output token (total, cached, recomputed), times the
-- capacity's output rate (daily capacity / 86,400). A load test's point is its lambda_slo_max step
-- (loadtest_history, core.loadtest_steps); a demonstrated capacity's is its best window (core.capacity_windows,
-- is_best). Both goodputs are compliant output over the same wall time, so the rate equals the point's measured
-- input per second per GPU scaled to the deployment's GPUs. GPUs and power are time-weighted over the versions in force (a scale-up at noon
-- from 16 to 24 GPUs gives 20); the configuration identity (gpu_type, tp, pp, quantization, model_version, engine,
-- engine_version, cache_policy, gpus_per_replica) is that of the version in force at the end of the day. Every deployment in force on the day has a row, with 0 tokens when it served none.
--
-- Agent tasks are per model (a session's requests may reach any of the model's deployments), so every deployment
-- row of a model carries the same task figures: a session is a (model, session_id) with at least one effective
-- request that day; task_attainment is the share of them whose every effective request was compliant;
-- expected_task_attainment is the model's whole-day attainment raised to the mean effective requests per session.
WITH deployments AS (
    SELECT
        model,
        deployment_id,
        arg_max(gpu_type, in_force_to) AS gpu_type,
        arg_max(tp, in_force_to) AS tp,
        arg_max(pp, in_force_to) AS pp,
        arg_max(quantization, in_force_to) AS quantization,
        arg_max(model_version, in_force_to) AS model_version,
        arg_max(engine, in_force_to) AS engine,
        arg_max(engine_version, in_force_to) AS engine_version,
        arg_max(cache_policy, in_force_to) AS cache_policy,
        arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica,
        sum(gpu_hours) AS gpu_hours,
        sum(gpu_hours * gpu_power_w) AS gpu_watt_hours
    FROM day_deployments
    WHERE kind = 'gpu'  -- a hosted-API model's capacity is its rate limits (infra.load_hourly)
    GROUP BY model, deployment_id
),
effective_output AS (
    SELECT model, deployment_id, sum(output_tokens) FILTER (WHERE is_effective) AS effective_output_tokens
    FROM requests_judged
    GROUP BY model, deployment_id
),
loadtest_point AS (  -- a run's lambda_slo_max step: its input per compliant output token
    SELECT
        run_id,
        any_value(input_total / nullif(compliant_output_tokens, 0)) AS input_total_per_output,
        any_value(input_cached / nullif(compliant_output_tokens, 0)) AS input_cached_per_output
    FROM loadtest_history
    WHERE is_lambda_slo_max_step
    GROUP BY run_id
),
window_point AS (  -- the best window of a demonstrated capacity: its input per compliant output token
    SELECT
        deployment_id,
        input_total / nullif(compliant_output_tokens, 0) AS input_total_per_output,
        input_cached / nullif(compliant_output_tokens, 0) AS input_cached_per_output
    FROM day_capacity_windows
    WHERE is_best
),
usage AS (
    SELECT
        model,
        deployment_id,
        sum(output_produced) AS output_produced,
        sum(compliant_output_tokens) AS compliant_output_tokens
    FROM day_usage
    GROUP BY model, deployment_id
),
agent_steps AS (
    SELECT model, sum(session_requests) AS session_requests, sum(session_output_tokens) AS session_output_tokens
    FROM day_usage
    GROUP BY model
),
sessions AS (
    SELECT
        model,
        session_id,
        count(*) FILTER (WHERE is_effective) AS steps,
        bool_and(is_compliant) FILTER (WHERE is_effective) AS every_step_compliant
    FROM requests_judged
    WHERE session_id IS NOT NULL
    GROUP BY model, session_id
),
tasks AS (
    SELECT
        model,
        count(*) FILTER (WHERE steps > 0) AS sessions,
        avg(every_step_compliant::INTEGER) FILTER (WHERE steps > 0) AS task_attainment,
        avg(steps) FILTER (WHERE steps > 0) AS mean_steps_per_session
    FROM sessions
    GROUP BY model
),
model_attainment AS (
    SELECT model, count(*) FILTER (WHERE is_compliant) / nullif(count(*) FILTER (WHERE is_latency_judged), 0) AS attainment
    FROM requests_judged
    GROUP BY model
),
cost_policy AS (
    SELECT price_version, currency
    FROM cfg_cost_policy
    WHERE valid_from <= $day::DATE
    ORDER BY valid_from DESC
    LIMIT 1
),
list_price AS (
    SELECT l.model, l.output_per_mtok
    FROM cfg_list_price AS l
    JOIN cost_policy AS p USING (price_version)
),
cost AS (
    SELECT c.deployment_id, c.cost_per_mtok_goodput, c.cost_total::DOUBLE AS day_cost
    FROM day_cost_per_mtok AS c
    JOIN cost_policy AS p ON p.currency = c.currency
),
figures AS (
    SELECT
        d.model,
        d.deployment_id,
        d.gpu_type,
        d.gpu_hours / 24.0 AS gpus,
        d.tp,
        d.pp,
        d.quantization,
        d.model_version,
        d.engine,
        d.engine_version,
        d.cache_policy,
        d.gpus_per_replica,
        d.gpu_watt_hours / nullif(d.gpu_hours, 0) AS gpu_power_w,
        d.gpu_watt_hours / 24.0 AS gpu_power_total_w,
        epoch($day_end::TIMESTAMPTZ - $day_start::TIMESTAMPTZ)::DOUBLE AS wall_time_s,
        coalesce(u.output_produced, 0)::BIGINT AS output_tokens,
        coalesce(u.compliant_output_tokens, 0)::BIGINT AS compliant_output_tokens,
        coalesce(e.effective_output_tokens, 0)::BIGINT AS effective_output_tokens,
        k.capacity_goodput_per_gpu,
        k.capacity_source,
        k.capacity_verified,
        k.capacity_goodput_per_gpu * (d.gpu_hours / 24.0) * 86400 AS daily_capacity_tokens,
        k.capacity_note,
        k.lambda_slo_max,
        k.loadtest_run_id,
        k.demonstrated_goodput_per_gpu,
        k.loadtest_slots_per_replica,
        k.other_configuration_run_id,
        k.other_configuration_differences,
        (SELECT currency FROM cost_policy) AS currency,
        (SELECT price_version FROM cost_policy) AS price_version,
        lp.output_per_mtok AS list_output_per_mtok,
        c.cost_per_mtok_goodput,
        c.day_cost,
        CASE k.capacity_source WHEN 'loadtest' THEN lt.input_total_per_output
                               WHEN 'demonstrated' THEN w.input_total_per_output END AS input_total_per_output,
        CASE k.capacity_source WHEN 'loadtest' THEN lt.input_cached_per_output
                               WHEN 'demonstrated' THEN w.input_cached_per_output END AS input_cached_per_output,
        CASE WHEN a.session_requests > 0 THEN a.session_output_tokens / a.session_requests
             ELSE p.agent_step_output_tokens END AS mean_output_per_step,
        CASE WHEN a.session_requests > 0 THEN 'measured' ELSE 'policy' END AS mean_output_per_step_source,
        t.sessions,
        t.mean_steps_per_session,
        t.task_attainment,
        m.attainment AS model_attainment
    FROM deployments AS d
    LEFT JOIN usage AS u ON u.model = d.model AND u.deployment_id = d.deployment_id
    JOIN capacity_choice AS k ON k.deployment_id = d.deployment_id
    JOIN day_slo_policy AS p ON p.model = d.model
    LEFT JOIN agent_steps AS a ON a.model = d.model
    LEFT JOIN tasks AS t ON t.model = d.model
    LEFT JOIN model_attainment AS m ON m.model = d.model
    LEFT JOIN list_price AS lp ON lp.model = d.model
    LEFT JOIN cost AS c ON c.deployment_id = d.deployment_id
    LEFT JOIN effective_output AS e ON e.model = d.model AND e.deployment_id = d.deployment_id
    LEFT JOIN loadtest_point AS lt ON lt.run_id = k.loadtest_run_id
    LEFT JOIN window_point AS w ON w.deployment_id = d.deployment_id
),
at_capacity AS (  -- the GPUs cost the day's cost whatever their load: at capacity it buys the daily capacity
    SELECT
        *,
        CASE WHEN daily_capacity_tokens > 0 THEN day_cost END AS day_cost_at_capacity,
        day_cost_at_capacity / (daily_capacity_tokens / 1e6) AS mtok_cost_at_capacity
    FROM figures
)
SELECT
    $day::DATE AS day,
    model,
    deployment_id,
    gpu_type,
    gpus,
    tp,
    pp,
    quantization,
    gpu_power_w,
    wall_time_s,
    output_tokens,
    compliant_output_tokens,
    effective_output_tokens / wall_time_s AS raw_throughput,
    compliant_output_tokens / wall_time_s AS slo_goodput,
    slo_goodput / nullif(gpus, 0) AS goodput_per_gpu,
    slo_goodput / nullif(gpu_power_total_w, 0) AS goodput_per_watt,
    $slo_version AS slo_version,
    capacity_goodput_per_gpu,
    capacity_source,
    capacity_verified,
    daily_capacity_tokens,
    output_tokens / nullif(daily_capacity_tokens, 0) AS utilization,
    daily_capacity_tokens / 1e6 * mtok_cost_at_capacity AS daily_value,
    day_cost_at_capacity AS daily_cost_at_capacity,
    currency,
    mean_output_per_step,
    daily_capacity_tokens / mean_output_per_step AS supported_agent_steps,
    task_attainment,
    model_attainment ** mean_steps_per_session AS expected_task_attainment,
    capacity_note,
    lambda_slo_max,
    loadtest_run_id,
    mean_output_per_step_source,
    demonstrated_goodput_per_gpu,
    list_output_per_mtok,
    cost_per_mtok_goodput,
    price_version,
    coalesce(sessions, 0)::BIGINT AS sessions,
    mean_steps_per_session,
    model_attainment,
    model_version,
    engine,
    engine_version,
    cache_policy,
    gpus_per_replica,
    loadtest_slots_per_replica,
    other_configuration_run_id,
    other_configuration_differences,
    effective_output_tokens,
    output_tokens / wall_time_s AS raw_throughput_successful,
    mtok_cost_at_capacity AS cost_per_mtok_at_capacity,
    daily_capacity_tokens / 1e6 * list_output_per_mtok AS revenue_at_list_price,
    daily_capacity_tokens / 86400 * input_total_per_output AS input_total_rate_at_capacity,
    daily_capacity_tokens / 86400 * input_cached_per_output AS input_cached_rate_at_capacity,
    input_total_rate_at_capacity - input_cached_rate_at_capacity AS input_recomputed_rate_at_capacity,
    input_total_rate_at_capacity * 86400 AS daily_input_capacity_total,
    input_cached_rate_at_capacity * 86400 AS daily_input_capacity_cached,
    input_recomputed_rate_at_capacity * 86400 AS daily_input_capacity_recomputed
FROM at_capacity
ORDER BY model, deployment_id
