-- The day's requests the prefix-cache what-if replays, one row each and in no order, with the UTC hour they
-- arrived in: those that reached (every status but rejected) a deployment of whatif_units with a block size (and,
-- as their readers ask, carry prefix_block_hashes). tokenledger/whatif/replay.py reads them as a view over the day's
-- file: counted per unit and hour (sql/whatif/whatif_seq_offsets.sql), then numbered and sorted a run of hours at a time
-- (sql/whatif/whatif_day_requests.sql), so that no statement sorts a whole large day of hash lists (the 100M-request
-- day's one sort spilled ~50 GB). blocks (the length of hashes) sizes those runs.
-- replica_affine and replica_random are the replica a request meets under each routing: a hash of its
-- session_id (of its request_id when it has none) or of its request_id, modulo the deployment's replicas; md5 so
-- that any tool can repeat it (sql/whatif/replica_of.sql, sql/whatif/md5_mod.sql). They are computed only when a scenario of
-- config/whatif.yaml is per replica and the deployment has more than one (else 0): they are read nowhere else.
SELECT
    hour(timezone('UTC', r.received_at))::INTEGER AS hour,
    u.unit,
    u.unit_id,
    r.received_at,
    r.request_id,
    r.input_tokens,
    r.cached_input_tokens,
    r.output_tokens,
    u.kv_block_tokens,
    replica_of(coalesce(r.session_id, r.request_id), u.replicas, w.per_replica) AS replica_affine,
    replica_of(r.request_id, u.replicas, w.per_replica) AS replica_random,
    r.prefix_block_hashes AS hashes,
    len(r.prefix_block_hashes)::BIGINT AS blocks
FROM day_requests AS r
JOIN whatif_units AS u ON u.unit = r.deployment_id
CROSS JOIN (SELECT count(*) FILTER (scope = 'per_replica') > 0 AS per_replica FROM cfg_whatif_scenario) AS w
WHERE r.status <> 'rejected'
  AND u.kv_block_tokens IS NOT NULL
  -- hashes IS NOT NULL is asked by the readers (sql/whatif/whatif_seq_offsets.sql, sql/whatif/whatif_day_requests.sql), after
  -- DuckDB has read a run of hours: a condition on the hash lists pushed into the scan of the day's file decodes
  -- every row's list (an hour of the 10M-request day 0.38 -> 0.75 s, for each of 24 runs).
