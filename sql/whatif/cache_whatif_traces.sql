-- infra.cache_whatif_traces: per landed trace (raw/traces/<trace>/) and scenario of config/whatif.yaml, the trace's
-- requests replayed through the scenario's cache, without cost: input cached and recomputed and the hit ratio,
-- the same figures as infra.cache_whatif_daily has for a day (whatif_figures, sql/whatif/whatif_figures.sql).
SELECT
    unit AS trace,
    scenario,
    cache,
    scope,
    routing,
    cache_blocks,
    cache_gb,
    caches,
    kv_block_tokens,
    replicas,
    requests_simulated,
    requests_block_mismatch,
    input_tokens,
    output_tokens,
    simulated_cached_tokens,
    simulated_recomputed_tokens,
    simulated_hit_ratio,
    method,
    sampling_rate,
    sampled_accesses,
    block_accesses,
    note
FROM whatif_figures
ORDER BY trace, scenario
