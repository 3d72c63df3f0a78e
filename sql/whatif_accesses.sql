-- The block accesses of whatif_requests for the LRU replay (tokenledger/lru.py), in the order a cache sees them:
-- by unit and cache (the unit's one shared cache, or its replica's under $routing when $scope is per_replica),
-- then by arrival, each request's blocks last to first (a request touches its tail first, its head last).
SELECT
    unit_id,
    CASE WHEN $scope = 'shared' THEN 0 WHEN $routing = 'random' THEN replica_random ELSE replica_affine END
        AS cache_part,
    seq,
    unnest(hashes) AS hash,
    generate_subscripts(hashes, 1) AS pos,
    input_tokens,
    kv_block_tokens
FROM whatif_requests
WHERE unit_id IN (SELECT unnest($unit_ids::INTEGER[]))
ORDER BY unit_id, cache_part, seq, pos DESC
