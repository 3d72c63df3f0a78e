-- infra.cache_whatif_daily: per deployment and scenario of config/whatif.yaml, the day's requests that carry
-- prefix block hashes replayed through the scenario's cache (whatif_figures, sql/whatif/whatif_figures.sql): the input
-- it would have cached and recomputed beside what was observed, and what the difference is worth at the day's unit
-- costs per token class (finance.cost_per_mtok_daily). The replay starts each day with an empty cache.
-- A deployment costed in several currencies, or not at all, that day has no cost figures, and says so in note.
WITH reached AS (
    SELECT deployment_id AS unit, count(*) AS requests
    FROM day_requests
    WHERE status <> 'rejected'
    GROUP BY deployment_id
),
costs AS (
    SELECT
        deployment_id AS unit,
        count(*) AS currencies,
        any_value(currency) AS currency,
        any_value(unit_cost_cached_per_mtok) AS unit_cost_cached_per_mtok,
        any_value(unit_cost_recomputed_per_mtok) AS unit_cost_recomputed_per_mtok,
        any_value(price_version) AS price_version
    FROM day_costs
    GROUP BY deployment_id
),
figures AS (
    SELECT
        $day::DATE AS day,
        u.model,
        f.unit AS deployment_id,
        f.scenario,
        f.cache,
        f.scope,
        f.routing,
        f.cache_blocks,
        f.cache_gb,
        f.caches,
        f.kv_block_tokens,
        f.replicas,
        coalesce(r.requests, 0)::BIGINT AS requests,
        f.requests_simulated,
        f.requests_block_mismatch,
        f.input_tokens,
        f.simulated_cached_tokens,
        f.simulated_recomputed_tokens,
        f.simulated_hit_ratio,
        f.method,
        f.sampling_rate,
        f.sampled_accesses,
        f.block_accesses,
        f.observed_cached_tokens,
        observed_cached_tokens / nullif(input_tokens, 0) AS observed_hit_ratio,
        CASE WHEN c.currencies = 1 THEN c.currency END AS currency,
        CASE WHEN c.currencies = 1 THEN c.unit_cost_cached_per_mtok END AS unit_cost_cached_per_mtok,
        CASE WHEN c.currencies = 1 THEN c.unit_cost_recomputed_per_mtok END AS unit_cost_recomputed_per_mtok,
        (observed_cached_tokens * unit_cost_cached_per_mtok
         + (input_tokens - observed_cached_tokens) * unit_cost_recomputed_per_mtok) / 1e6 AS observed_input_cost,
        (simulated_cached_tokens * unit_cost_cached_per_mtok
         + simulated_recomputed_tokens * unit_cost_recomputed_per_mtok) / 1e6 AS simulated_input_cost,
        simulated_input_cost - observed_input_cost AS cost_change,
        cost_change / nullif(input_tokens, 0) * 1e6 AS cost_change_per_mtok_input,
        CASE WHEN c.currencies = 1 THEN c.price_version END AS price_version,
        nullif(concat_ws('; ',
            f.note,
            CASE
                WHEN c.unit IS NULL THEN 'no cost was allocated to the deployment on the day, so the change is not valued'
                WHEN c.currencies > 1
                THEN format('the deployment was costed in {} currencies on the day, so the change is not valued',
                            c.currencies)
            END), '') AS note
    FROM whatif_figures AS f
    JOIN whatif_units AS u ON u.unit = f.unit
    LEFT JOIN reached AS r ON r.unit = f.unit
    LEFT JOIN costs AS c ON c.unit = f.unit
)
SELECT * FROM figures
ORDER BY model, deployment_id, scenario
