-- The blocks a SHARDS sample of unit $unit_id's LRU replay keeps whole (tokenledger/whatif/replay.py): those in at least
-- $least of a sample of its requests, every $stride-th by seq (about 50,000 of them; $least is 0.1% of that). Such
-- blocks (a system prompt, shared tool definitions) are few and carry most hits; sampled by their hash like the
-- others, a handful of them decided the estimate (docs/adr/0084-lru-caches-of-large-days-are-sampled.md). A
-- unit at a time, so that the conditions reach the scan of whatif_requests, which then decodes only the sample's
-- hash lists (a join with the units' strides decoded all of them: 2.4-4.6 s against 0.6-0.8 s on the 1M-request
-- day). A block twice in a request (hashes that break the prefix convention) counts twice.
SELECT hash
FROM (
    SELECT unnest(hashes) AS hash
    FROM whatif_requests
    WHERE unit_id = $unit_id AND seq % $stride = 0
)
GROUP BY hash
HAVING count(*) >= $least
ORDER BY hash
