-- A run of consecutive hours ($first_hour to $last_hour, received from $run_start to before $run_end) of the day's
-- requests the prefix-cache what-if replays (hashed: those rows of whatif_day_rows, sql/whatif/whatif_day_rows.sql, that
-- carry block hashes, read by their bounds on received_at, so that DuckDB reads only their hash lists from the
-- day's file), numbered and in the order the LRU replay reads them (sql/whatif/whatif_lru_requests.sql): by unit_id, then
-- seq. seq is the arrival order within the unit over the whole day, ties broken by request_id, so a replay is the
-- same on every run: the run's own order plus the unit's requests of earlier hours (whatif_seq_offsets: at the
-- unit's first hour in the run, the least offset of its hours there). tokenledger/whatif/replay.py writes the runs in
-- order, one file each. seq is numbered over the requests' keys alone and joined back by request_id (unique in a
-- day), so that only the one ORDER BY carries the hash lists: a window over the whole rows sorted them twice.
WITH run_rows AS MATERIALIZED (  -- read once, and without a condition on the hash lists (sql/whatif/whatif_day_rows.sql)
    SELECT *
    FROM whatif_day_rows
    WHERE received_at >= $run_start::TIMESTAMPTZ AND received_at < $run_end::TIMESTAMPTZ
),
hashed AS (
    SELECT * FROM run_rows WHERE hashes IS NOT NULL
),
keyed AS (
    SELECT
        request_id,
        unit_id,
        row_number() OVER (PARTITION BY unit_id ORDER BY received_at, request_id) AS n
    FROM hashed
)
SELECT
    r.unit,
    r.unit_id,
    o.seq_offset + k.n AS seq,
    r.request_id,
    r.input_tokens,
    r.cached_input_tokens,
    r.output_tokens,
    r.kv_block_tokens,
    r.replica_affine,
    r.replica_random,
    r.hashes
FROM hashed AS r
JOIN keyed AS k ON k.request_id = r.request_id AND k.unit_id = r.unit_id
JOIN (
    SELECT unit_id, min(seq_offset) AS seq_offset
    FROM whatif_seq_offsets
    WHERE hour BETWEEN $first_hour AND $last_hour
    GROUP BY unit_id
) AS o ON o.unit_id = r.unit_id
ORDER BY r.unit_id, seq
