-- The blocks a SHARDS sample of an LRU replay keeps whole, per unit to sample (whatif_sampled_units: unit_id and
-- stride, tokenledger/whatif.py): those in at least $share of a sample of the unit's requests, every stride-th
-- one by seq (about 50,000). Such blocks (a system prompt, shared tool definitions) are few and carry most hits;
-- sampled by their hash like the others, a handful of them decided the estimate (docs/decisions.md, "LRU caches of
-- large days are sampled").
WITH sampled AS (
    SELECT r.unit_id, r.hashes
    FROM whatif_requests AS r
    JOIN whatif_sampled_units AS u ON u.unit_id = r.unit_id
    WHERE r.seq % u.stride = 0 AND len(r.hashes) > 0
),
requests AS (
    SELECT unit_id, count(*) AS requests FROM sampled GROUP BY unit_id
),
blocks AS (
    SELECT unit_id, unnest(list_distinct(hashes)) AS hash FROM sampled
)
SELECT b.unit_id, b.hash
FROM blocks AS b
JOIN requests AS n ON n.unit_id = b.unit_id
GROUP BY b.unit_id, b.hash, n.requests
HAVING count(*) >= $share * n.requests
ORDER BY b.unit_id, b.hash
