-- The requests of the landed traces (staged_traces, typed by data_contracts/inputs/trace_request.odcs.yaml) in the shape
-- of sql/whatif/whatif_day_requests.sql: seq is the order of arrival (timestamp, then file and line), a request's id is
-- its file and line, and a trace has no observed cache figures. Replicas as sql/whatif/whatif_day_requests.sql finds them.
-- Written in (unit_id, seq) order, as sql/whatif/whatif_day_requests.sql.
WITH t AS (
    SELECT *, format('{}:{}', source_file, source_line) AS line_id FROM staged_traces
)
SELECT
    u.unit,
    u.unit_id,
    row_number() OVER (PARTITION BY u.unit ORDER BY t.timestamp, t.source_file, t.source_line) AS seq,
    t.line_id AS request_id,
    t.input_length AS input_tokens,
    NULL::BIGINT AS cached_input_tokens,
    t.output_length AS output_tokens,
    u.kv_block_tokens,
    replica_of(coalesce(t.session_id, t.line_id), u.replicas, w.per_replica) AS replica_affine,
    replica_of(t.line_id, u.replicas, w.per_replica) AS replica_random,
    t.hash_ids AS hashes
FROM t
JOIN whatif_units AS u ON u.unit = t.trace
CROSS JOIN (SELECT count(*) FILTER (scope = 'per_replica') > 0 AS per_replica FROM cfg_whatif_scenario) AS w
ORDER BY u.unit_id, seq
