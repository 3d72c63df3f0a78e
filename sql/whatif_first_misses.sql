-- The infinite cache over the requests of unit $unit_id in whatif_requests (the unit's one shared cache, or its
-- replica's under $routing when $scope is per_replica), for the blocks whose hash falls in part $part of $parts
-- (hash(block) % $parts): per request (unit_id, seq) that sighted one of them first in its cache, the earliest
-- such block's position. A block's first sighting depends only on the accesses of the same hash in the same
-- unit, so units and parts are independent, and a request's first miss is the least over all parts
-- (sql/whatif_infinite.sql). tokenledger/whatif.py takes a unit at a time, in as many parts as keep each
-- aggregation's groups (and what DuckDB spills of them) to a bounded share; whatif_requests is sorted by unit, so
-- the scan reads only the unit's row groups.
-- The sighting (seq, pos) is packed as seq * 2^32 + pos, one BIGINT, which DuckDB's min aggregates ~1.5x faster
-- than a struct (a block position is below 2^32; a seq of 2^31 or more would fail with an overflow error, not
-- wrap). Fixed-width keys (unit_id rather than the unit's name, made the 10M-request day's aggregation 97 s ->
-- 75 s), and one unit at a time, grouped by cache and hash only. The part is taken in UBIGINT (hash()'s type):
-- with an INTEGER $parts DuckDB widened every hash to HUGEINT, whose modulo took 17.9 s of a 1M-request day's
-- 10.7 s part (on two threads), 6x the part's aggregation.
WITH accesses AS (
    SELECT
        CASE WHEN $scope = 'shared' THEN 0 WHEN $routing = 'random' THEN replica_random ELSE replica_affine END
            AS cache_part,
        seq,
        unnest(hashes) AS hash,
        generate_subscripts(hashes, 1) - 1 AS pos
    FROM whatif_requests
    WHERE unit_id = $unit_id
),
first_sighting AS (
    SELECT min(seq * 4294967296 + pos) AS first
    FROM accesses
    WHERE $parts = 1 OR hash(hash) % $parts::UBIGINT = $part::UBIGINT
    GROUP BY cache_part, hash
)
SELECT $unit_id::INTEGER AS unit_id, first // 4294967296 AS seq, min(first % 4294967296) AS pos
FROM first_sighting
GROUP BY ALL
