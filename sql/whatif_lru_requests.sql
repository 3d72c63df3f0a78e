-- The requests of whatif_requests for the LRU replay (tokenledger/lru.py), in the order a cache sees them: by unit
-- and cache (the unit's one shared cache, or its replica's under $routing when $scope is per_replica), then by
-- arrival. One row per request with its block hashes; tokenledger/whatif.py turns them into block accesses, each
-- request's blocks last to first (a request touches its tail first, its head last), so that DuckDB sorts requests
-- rather than their tens of blocks each.
SELECT
    unit_id,
    CASE WHEN $scope = 'shared' THEN 0 WHEN $routing = 'random' THEN replica_random ELSE replica_affine END
        AS cache_part,
    seq,
    input_tokens,
    kv_block_tokens,
    hashes
FROM whatif_requests
WHERE unit_id IN (SELECT unnest($unit_ids::INTEGER[]))
  AND len(hashes) > 0
ORDER BY unit_id, cache_part, seq
