-- The requests of whatif_requests for the LRU replay (tokenledger/whatif/lru.py) with their cache (the unit's one shared
-- cache, or its replica's under $routing when $scope is per_replica), in the files' order: a day's hours one after
-- the other, each by unit, then arrival (whatif_requests is written so; no ORDER BY here, so DuckDB does not sort a
-- day of hash lists again for every scope and routing). tokenledger/whatif/replay.py splits each unit's requests by
-- cache, in order, and checks the order.
-- One row per request with its block hashes, first block first, which the compiled replay reads in place from the
-- Arrow batch (it looks a request's blocks up first to last, then touches them last to first).
SELECT
    unit_id,
    CASE WHEN $scope = 'shared' THEN 0 WHEN $routing = 'random' THEN replica_random ELSE replica_affine END
        AS cache_part,
    seq,
    input_tokens,
    kv_block_tokens,
    hashes
FROM whatif_requests
WHERE list_contains($unit_ids::INTEGER[], unit_id)  -- a filter, not a semi-join: a join may reorder rows
  AND len(hashes) > 0
