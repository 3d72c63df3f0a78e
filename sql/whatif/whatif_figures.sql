-- Per unit (a deployment of the day, or a landed trace) and scenario of config/whatif.yaml: what the replay found
-- (whatif_results, tokenledger/whatif/replay.py) beside the requests it replayed (whatif_simulated,
-- sql/whatif/whatif_simulated.sql), and how: exactly, or estimated from a SHARDS sample (method, sampling_rate,
-- sampled_accesses). The figures infra.cache_whatif_daily and infra.cache_whatif_traces share; each adds its own
-- (the day's cost, the trace's output). A cached prefix counts only up to the request's input (the replay's rule);
-- a scenario that could not be replayed for the unit has no simulated figures and says why in note.
SELECT
    s.unit,
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
    coalesce(m.block_accesses, 0)::BIGINT AS block_accesses,
    coalesce(m.input_tokens, 0)::BIGINT AS input_tokens,
    coalesce(m.output_tokens, 0)::BIGINT AS output_tokens,
    coalesce(m.observed_cached_tokens, 0)::BIGINT AS observed_cached_tokens,
    CASE WHEN s.note IS NULL THEN coalesce(w.cached_tokens, 0) END::BIGINT AS simulated_cached_tokens,
    (input_tokens - simulated_cached_tokens)::BIGINT AS simulated_recomputed_tokens,
    simulated_cached_tokens / nullif(input_tokens, 0) AS simulated_hit_ratio,
    CASE WHEN s.note IS NULL THEN coalesce(w.method, 'exact') END AS method,
    CASE WHEN s.note IS NULL THEN coalesce(w.sampling_rate, 1) END::DOUBLE AS sampling_rate,
    CASE WHEN s.note IS NULL THEN coalesce(w.sampled_accesses, 0) END::BIGINT AS sampled_accesses,
    s.note
FROM whatif_scenario_units AS s
JOIN whatif_units AS u ON u.unit = s.unit
LEFT JOIN whatif_simulated AS m ON m.unit = s.unit
LEFT JOIN whatif_results AS w ON w.unit = s.unit AND w.scenario = s.scenario
