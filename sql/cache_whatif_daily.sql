-- infra.cache_whatif_daily: per deployment and scenario of config/whatif.yaml, the day's requests that carry
-- prefix block hashes replayed through the scenario's cache (whatif_results, tokenledger/whatif.py): the input
-- it would have cached and recomputed beside what was observed, and what the difference is worth at the day's unit
-- costs per token class (finance.cost_per_mtok_daily). The replay starts each day with an empty cache.
-- A deployment costed in several currencies, or not at all, that day has no cost figures, and says so in note.
WITH reached AS (
    SELECT deployment_id AS unit, count(*) AS requests
    FROM day_requests
    WHERE status <> 'rejected'
    GROUP BY deployment_id
),
simulated AS (
    SELECT
        unit,
        count(*) AS requests_simulated,
        count(*) FILTER (WHERE len(hashes) <> (input_tokens + kv_block_tokens - 1) // kv_block_tokens)
            AS requests_block_mismatch,
        sum(input_tokens) AS input_tokens,
        sum(cached_input_tokens) AS observed_cached_tokens
    FROM whatif_requests
    GROUP BY unit
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
        s.unit AS deployment_id,
        s.scenario,
        s.cache,
        s.scope,
        s.routing,
        s.cache_blocks,
        s.cache_gb,
        s.caches,
        u.kv_block_tokens,
        u.replicas,
        coalesce(r.requests, 0)::BIGINT AS requests,
        coalesce(m.requests_simulated, 0)::BIGINT AS requests_simulated,
        coalesce(m.requests_block_mismatch, 0)::BIGINT AS requests_block_mismatch,
        coalesce(m.input_tokens, 0)::BIGINT AS input_tokens,
        CASE WHEN s.note IS NULL THEN coalesce(w.cached_tokens, 0) END::BIGINT AS simulated_cached_tokens,
        (input_tokens - simulated_cached_tokens)::BIGINT AS simulated_recomputed_tokens,
        simulated_cached_tokens / nullif(input_tokens, 0) AS simulated_hit_ratio,
        coalesce(m.observed_cached_tokens, 0)::BIGINT AS observed_cached_tokens,
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
            s.note,
            CASE
                WHEN c.unit IS NULL THEN 'no cost was allocated to the deployment on the day, so the change is not valued'
                WHEN c.currencies > 1
                THEN format('the deployment was costed in {} currencies on the day, so the change is not valued',
                            c.currencies)
            END), '') AS note
    FROM whatif_scenario_units AS s
    JOIN whatif_units AS u ON u.unit = s.unit
    LEFT JOIN reached AS r ON r.unit = s.unit
    LEFT JOIN simulated AS m ON m.unit = s.unit
    LEFT JOIN whatif_results AS w ON w.unit = s.unit AND w.scenario = s.scenario
    LEFT JOIN costs AS c ON c.unit = s.unit
)
SELECT * FROM figures
ORDER BY model, deployment_id, scenario
