-- infra.cache_whatif_traces: per landed trace (raw/traces/<trace>/) and scenario of config/whatif.yaml, the trace's
-- requests replayed through the scenario's cache (whatif_results, tokenledger/whatif.py), without cost: input
-- cached and recomputed and the hit ratio, the same figures as infra.cache_whatif_daily has for a day.
WITH simulated AS (
    SELECT
        unit,
        count(*) AS requests_simulated,
        count(*) FILTER (WHERE len(hashes) <> (input_tokens + kv_block_tokens - 1) // kv_block_tokens)
            AS requests_block_mismatch,
        sum(input_tokens) AS input_tokens,
        sum(output_tokens) AS output_tokens
    FROM whatif_requests
    GROUP BY unit
)
SELECT
    s.unit AS trace,
    s.scenario,
    s.cache,
    s.scope,
    s.routing,
    s.cache_blocks,
    s.cache_gb,
    s.caches,
    u.kv_block_tokens,
    u.replicas,
    coalesce(m.requests_simulated, 0)::BIGINT AS requests_simulated,
    coalesce(m.requests_block_mismatch, 0)::BIGINT AS requests_block_mismatch,
    coalesce(m.input_tokens, 0)::BIGINT AS input_tokens,
    coalesce(m.output_tokens, 0)::BIGINT AS output_tokens,
    CASE WHEN s.note IS NULL THEN coalesce(w.cached_tokens, 0) END::BIGINT AS simulated_cached_tokens,
    (input_tokens - simulated_cached_tokens)::BIGINT AS simulated_recomputed_tokens,
    simulated_cached_tokens / nullif(input_tokens, 0) AS simulated_hit_ratio,
    s.note
FROM whatif_scenario_units AS s
JOIN whatif_units AS u ON u.unit = s.unit
LEFT JOIN simulated AS m ON m.unit = s.unit
LEFT JOIN whatif_results AS w ON w.unit = s.unit AND w.scenario = s.scenario
ORDER BY trace, scenario
