-- The infinite cache over whatif_requests, per unit: a block is cached when its hash was seen in an earlier request
-- of the same cache (the unit's one shared cache, or its replica's under $routing when $scope is per_replica). A
-- request's cached prefix is its leading run of cached blocks, up to its first block seen for the first time,
-- counted in tokens up to its input length (the last block is partial). A set computation: the first sighting of
-- each hash is found by one aggregation, and a request's first miss is the earliest block it sighted first. The
-- sighting (seq, pos) is packed as seq * 2^32 + pos, one BIGINT, which DuckDB's min aggregates ~1.5x faster than a
-- struct (a block position is below 2^32; a seq of 2^31 or more would fail with an overflow error, not wrap).
-- Grouped by unit_id, not the unit's name: fixed-width keys made the 10M-request day's aggregation 97 s -> 75 s.
WITH requests AS (
    SELECT
        unit_id,
        seq,
        input_tokens,
        kv_block_tokens,
        len(hashes) AS blocks,
        CASE WHEN $scope = 'shared' THEN 0 WHEN $routing = 'random' THEN replica_random ELSE replica_affine END
            AS cache_part,
        hashes
    FROM whatif_requests
),
accesses AS (
    SELECT unit_id, cache_part, seq, unnest(hashes) AS hash, generate_subscripts(hashes, 1) - 1 AS pos
    FROM requests
),
first_sighting AS (
    SELECT unit_id, min(seq * 4294967296 + pos) AS first
    FROM accesses
    GROUP BY unit_id, cache_part, hash
),
first_miss AS (
    SELECT unit_id, first // 4294967296 AS seq, min(first % 4294967296) AS pos
    FROM first_sighting
    GROUP BY ALL
)
SELECT
    u.unit,
    sum(least(coalesce(m.pos, r.blocks) * r.kv_block_tokens, r.input_tokens))::BIGINT AS cached_tokens
FROM requests AS r
LEFT JOIN first_miss AS m ON m.unit_id = r.unit_id AND m.seq = r.seq
JOIN whatif_units AS u ON u.unit_id = r.unit_id
GROUP BY u.unit
