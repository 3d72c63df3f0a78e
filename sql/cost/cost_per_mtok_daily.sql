-- finance.cost_per_mtok_daily: per deployment, currency and UTC day, the cost allocated to the deployment by
-- category (core.cost_allocation_daily, 'unallocated' excluded) against the tokens it served (core.usage_hourly),
-- as $/MTok delivered, under SLO and over all tokens, and per token class (docs/metrics.md, section 4).
-- output_tokens here is output produced (successful requests); input figures are over reached requests. The unit
-- costs per class are scaled so that input_cached * u_c + input_recomputed * u_r + output_tokens * u_o (per 1e6)
-- equals cost_total, with u_c : u_r : u_o = the policy's weights. A quotient over 0 tokens is NULL.
-- One row per deployment in force and currency it was allocated cost in; gpus is time-weighted (GPU-hours / 24).
-- A hosted-API deployment (kind api) has the same columns: its GPU figures (gpu_type, gpus, cost_gpu) are NULL,
-- never zero; cost_api is its price-sheet cost (sql/cost/api_usage_costs.sql), and its classes are weighted by the sheet.
-- source_cost is what the request logs' source said the requests cost (LiteLLM's spend), kept beside, never used;
-- source_cost_difference = cost_total - source_cost.
-- Beside the allocation basis, the usage basis (infra.gpu_usage_daily): cost_idle is the GPU cost of the allocated
-- GPU-hours that were not active (cost_gpu x (1 - active_gpu_hours / allocated_gpu_hours)), and
-- cost_per_mtok_goodput_active the cost without it per 1M compliant output tokens; cost_energy is the day's GPU energy
-- (on its power_basis) at the policy's energy_price_per_kwh, a line of its own that is not in cost_total (the bill
-- and the rate cards already hold the power the GPUs drew), in the policy's currency only.
WITH deployments AS (
    SELECT deployment_id, arg_max(model, in_force_to) AS model, arg_max(gpu_type, in_force_to) AS gpu_type,
           sum(gpu_hours) / 24.0 AS gpus, arg_max(kind, in_force_to) AS kind
    FROM day_deployments
    GROUP BY deployment_id
),
costs AS (
    SELECT
        deployment_id,
        currency,
        any_value(price_version) AS price_version,
        coalesce(sum(cost) FILTER (WHERE category = 'gpu'), 0) AS cost_gpu,
        coalesce(sum(cost) FILTER (WHERE category = 'cpu'), 0) AS cost_cpu,
        coalesce(sum(cost) FILTER (WHERE category = 'network'), 0) AS cost_network,
        coalesce(sum(cost) FILTER (WHERE category = 'storage'), 0) AS cost_storage,
        coalesce(sum(cost) FILTER (WHERE category = 'platform'), 0) AS cost_platform,
        coalesce(sum(cost) FILTER (WHERE category = 'api'), 0) AS cost_api,
        sum(cost) AS cost_total
    FROM day_cost_allocation
    WHERE placement <> 'unallocated'
    GROUP BY deployment_id, currency
),
usage AS (
    SELECT
        deployment_id,
        sum(output_produced) AS output_tokens,
        sum(compliant_output_tokens) AS compliant_output_tokens,
        sum(input_total) AS input_total,
        sum(input_cached) AS input_cached,
        sum(input_recomputed) AS input_recomputed,
        sum(input_cache_write) AS input_cache_write,
        sum(source_cost) AS source_cost
    FROM day_usage
    GROUP BY deployment_id
),
figures AS (
    SELECT
        d.model,
        c.deployment_id,
        d.gpu_type,
        d.gpus,
        c.currency,
        c.cost_gpu,
        c.cost_cpu,
        c.cost_network,
        c.cost_storage,
        c.cost_platform,
        c.cost_api,
        c.cost_total,
        d.kind,
        a.price_sheet,
        u.source_cost,
        coalesce(u.input_cache_write, 0)::BIGINT AS input_cache_write,
        coalesce(u.output_tokens, 0)::BIGINT AS output_tokens,
        coalesce(u.compliant_output_tokens, 0)::BIGINT AS compliant_output_tokens,
        coalesce(u.input_total, 0)::BIGINT AS input_total,
        coalesce(u.input_cached, 0)::BIGINT AS input_cached,
        coalesce(u.input_recomputed, 0)::BIGINT AS input_recomputed,
        c.price_version,
        -- A GPU deployment's classes are weighted by the policy; a hosted-API deployment's by its price sheet (per
        -- 1M tokens; every class at the prices its tokens were charged at, whatever tier, region or context rate
        -- priced them, else the sheet's standard rate), so that with no shared cost the unit costs below are the
        -- prices paid.
        CASE WHEN d.kind = 'api'
             THEN coalesce(a.cost_cache_read::DOUBLE * 1e6 / nullif(a.tokens_cache_read, 0),
                           a.cache_read_per_mtok::DOUBLE)
             ELSE p.weight_cached END AS w_cached,
        CASE WHEN d.kind = 'api'
             THEN coalesce((a.cost_input_uncached + a.cost_cache_write)::DOUBLE * 1e6
                           / nullif(a.tokens_input_uncached + a.tokens_cache_write_5m + a.tokens_cache_write_1h, 0),
                           a.input_per_mtok::DOUBLE)
             ELSE p.weight_recomputed END AS w_recomputed,
        CASE WHEN d.kind = 'api'
             THEN coalesce(a.cost_cache_write::DOUBLE * 1e6
                           / nullif(a.tokens_cache_write_5m + a.tokens_cache_write_1h, 0),
                           a.cache_write_per_mtok::DOUBLE)
             ELSE p.weight_recomputed END AS w_cache_write,
        CASE WHEN d.kind = 'api'
             THEN coalesce(a.cost_output::DOUBLE * 1e6 / nullif(a.tokens_output, 0), a.output_per_mtok::DOUBLE)
             ELSE p.weight_output END AS w_output,
        input_cached * w_cached + input_recomputed * w_recomputed + output_tokens * w_output AS weighted_tokens,
        g.allocated_gpu_hours,
        g.active_gpu_hours,
        g.energy_kwh,
        g.power_basis,
        CASE WHEN c.currency = p.currency THEN g.energy_kwh * p.energy_price_per_kwh END AS cost_energy,
        CASE WHEN d.kind = 'gpu' AND g.active_gpu_hours IS NOT NULL AND g.allocated_gpu_hours > 0
             THEN c.cost_gpu * (1 - least(g.active_gpu_hours / g.allocated_gpu_hours, 1)) END AS cost_idle
    FROM costs AS c
    JOIN deployments AS d USING (deployment_id)
    LEFT JOIN usage AS u USING (deployment_id)
    LEFT JOIN day_api_costs AS a USING (deployment_id)
    JOIN day_cost_policy AS p ON p.price_version = c.price_version
    LEFT JOIN day_gpu_usage AS g ON g.deployment_id = c.deployment_id
)
SELECT
    $day::DATE AS day,
    model,
    deployment_id,
    gpu_type,
    gpus,
    currency,
    CASE WHEN kind = 'api' THEN NULL ELSE CAST(cost_gpu AS DECIMAL(38, 12)) END AS cost_gpu,
    CAST(cost_cpu AS DECIMAL(38, 12)) AS cost_cpu,
    CAST(cost_network AS DECIMAL(38, 12)) AS cost_network,
    CAST(cost_storage AS DECIMAL(38, 12)) AS cost_storage,
    CAST(cost_platform AS DECIMAL(38, 12)) AS cost_platform,
    CAST(cost_total AS DECIMAL(38, 12)) AS cost_total,
    output_tokens,
    compliant_output_tokens,
    input_total,
    input_cached,
    input_recomputed,
    cost_total::DOUBLE / nullif(output_tokens, 0) * 1e6 AS cost_per_mtok_output,
    cost_total::DOUBLE / nullif(compliant_output_tokens, 0) * 1e6 AS cost_per_mtok_goodput,
    cost_total::DOUBLE / nullif(input_total + output_tokens, 0) * 1e6 AS cost_per_mtok_total,
    cost_total::DOUBLE / nullif(weighted_tokens, 0) * w_cached * 1e6 AS unit_cost_cached_per_mtok,
    cost_total::DOUBLE / nullif(weighted_tokens, 0) * w_recomputed * 1e6 AS unit_cost_recomputed_per_mtok,
    cost_total::DOUBLE / nullif(weighted_tokens, 0) * w_output * 1e6 AS unit_cost_output_per_mtok,
    price_version,
    w_cached AS weight_cached,
    w_recomputed AS weight_recomputed,
    w_output AS weight_output,
    kind,
    CASE WHEN kind = 'api' THEN CAST(cost_api AS DECIMAL(38, 12)) END AS cost_api,
    input_cache_write,
    cost_total::DOUBLE / nullif(weighted_tokens, 0) * w_cache_write * 1e6 AS unit_cost_cache_write_per_mtok,
    price_sheet,
    CAST(source_cost AS DECIMAL(38, 12)) AS source_cost,
    CAST(cost_total - source_cost AS DECIMAL(38, 12)) AS source_cost_difference,
    allocated_gpu_hours,
    active_gpu_hours,
    CAST(cost_idle AS DECIMAL(38, 12)) AS cost_idle,
    (cost_total - cost_idle)::DOUBLE / nullif(compliant_output_tokens, 0) * 1e6 AS cost_per_mtok_goodput_active,
    energy_kwh,
    power_basis,
    CAST(cost_energy AS DECIMAL(38, 12)) AS cost_energy,
    cost_energy::DOUBLE / nullif(compliant_output_tokens, 0) * 1e6 AS cost_energy_per_mtok_goodput
FROM figures
ORDER BY model, deployment_id, currency
