-- Per unit (a deployment of the day, or a landed trace): the requests the prefix-cache what-if replays
-- (whatif_requests) and their block accesses, counted before the replay (tokenledger/whatif/replay.py), which replays an
-- LRU scenario exactly up to the sampling budget's accesses and samples above it; sql/whatif/whatif_figures.sql publishes
-- them beside what the replay found.
SELECT
    unit,
    count(*) AS requests_simulated,
    count(*) FILTER (WHERE len(hashes) <> (input_tokens + kv_block_tokens - 1) // kv_block_tokens)
        AS requests_block_mismatch,
    sum(len(hashes)) AS block_accesses,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cached_input_tokens) AS observed_cached_tokens
FROM whatif_requests
GROUP BY unit
