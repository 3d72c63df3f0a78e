-- The infinite cache's cached tokens per unit over one run of whatif_requests (whatif_run, as in
-- sql/whatif/whatif_first_sightings.sql): a block is cached when its hash was seen in an earlier request of the same cache
-- (the unit's one shared cache, or its replica's under the scenario's routing when it is per replica). A request's
-- cached prefix is its leading run of cached blocks, up to its first block seen for the first time (the earliest
-- of the run's first sightings it made, whatif_run_sightings), counted in tokens up to its input length (the last
-- block is partial). A request lies in one run, so tokenledger/whatif/replay.py adds the runs' figures; each statement
-- joins a run's requests, never the day's (the day's 10M requests joined at once took ~2 GB of RSS).
WITH first_miss AS (
    SELECT unit_id, first // 4294967296 AS seq, min(first % 4294967296) AS pos
    FROM whatif_run_sightings
    GROUP BY ALL
)
SELECT
    r.unit_id,
    sum(least(coalesce(m.pos, len(r.hashes)) * r.kv_block_tokens, r.input_tokens))::BIGINT AS cached_tokens
FROM whatif_run AS r
LEFT JOIN first_miss AS m ON m.unit_id = r.unit_id AND m.seq = r.seq
GROUP BY r.unit_id
