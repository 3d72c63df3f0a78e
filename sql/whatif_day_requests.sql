-- The day's requests the prefix-cache what-if replays, one row each: those that reached (every status but
-- rejected) a deployment of whatif_units with a block size and carry prefix_block_hashes. seq is the arrival order
-- within the deployment, ties broken by request_id, so a replay is the same on every run. replica_affine and
-- replica_random are the replica a request meets under each routing: a hash of its session_id (of its request_id
-- when it has none) or of its request_id, modulo the deployment's replicas; md5 so that any tool can repeat it
-- (sql/md5_mod.sql). They are computed only when a scenario of config/whatif.yaml is per replica and the
-- deployment has more than one (else 0): they are read nowhere else.
-- Written in (unit_id, seq) order, the order the LRU replay reads it in (sql/whatif_lru_requests.sql). seq is
-- numbered over the requests' keys alone and joined back by request_id (unique in a day), so that only the one
-- ORDER BY carries the hash lists: a window over the whole rows sorted them twice (the 10M-request day's
-- staging 112 s -> 50 s).
WITH keyed AS (
    SELECT
        r.request_id,
        r.deployment_id,
        row_number() OVER (PARTITION BY r.deployment_id ORDER BY r.received_at, r.request_id) AS seq
    FROM day_requests AS r
    JOIN whatif_units AS u ON u.unit = r.deployment_id
    WHERE r.status <> 'rejected'
      AND r.prefix_block_hashes IS NOT NULL
      AND u.kv_block_tokens IS NOT NULL
)
SELECT
    u.unit,
    u.unit_id,
    k.seq,
    r.request_id,
    r.input_tokens,
    r.cached_input_tokens,
    r.output_tokens,
    u.kv_block_tokens,
    CASE WHEN u.replicas = 1 OR NOT w.per_replica THEN 0
         ELSE md5_mod(coalesce(r.session_id, r.request_id), u.replicas) END::INTEGER AS replica_affine,
    CASE WHEN u.replicas = 1 OR NOT w.per_replica THEN 0 ELSE md5_mod(r.request_id, u.replicas) END::INTEGER
        AS replica_random,
    r.prefix_block_hashes AS hashes
FROM day_requests AS r
JOIN keyed AS k ON k.request_id = r.request_id AND k.deployment_id = r.deployment_id
JOIN whatif_units AS u ON u.unit = r.deployment_id
CROSS JOIN (SELECT count(*) FILTER (scope = 'per_replica') > 0 AS per_replica FROM cfg_whatif_scenario) AS w
ORDER BY u.unit_id, k.seq
