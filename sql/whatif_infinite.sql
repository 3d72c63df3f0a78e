-- The infinite cache over whatif_requests, per unit: a block is cached when its hash was seen in an earlier request
-- of the same cache (the unit's one shared cache, or its replica's under the scenario's routing when it is per
-- replica). A request's cached prefix is its leading run of cached blocks, up to its first block seen for the first
-- time, counted in tokens up to its input length (the last block is partial). A set computation: the first
-- sighting of each hash is found by aggregation, and a request's first miss is the earliest block it sighted
-- first, the least over the parts the blocks were taken in (whatif_first_misses, sql/whatif_first_misses.sql).
WITH requests AS (
    SELECT unit_id, seq, input_tokens, kv_block_tokens, len(hashes) AS blocks
    FROM whatif_requests
),
first_miss AS (
    SELECT unit_id, seq, min(pos) AS pos
    FROM whatif_first_misses
    GROUP BY unit_id, seq
)
SELECT
    u.unit,
    sum(least(coalesce(m.pos, r.blocks) * r.kv_block_tokens, r.input_tokens))::BIGINT AS cached_tokens
FROM requests AS r
LEFT JOIN first_miss AS m ON m.unit_id = r.unit_id AND m.seq = r.seq
JOIN whatif_units AS u ON u.unit_id = r.unit_id
GROUP BY u.unit
