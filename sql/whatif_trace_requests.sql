-- The requests of the landed traces (staged_traces, typed by data_contracts/trace_request.odcs.yaml) in the shape
-- of sql/whatif_day_requests.sql: seq is the order of arrival (timestamp, then file and line), a request's id is
-- its file and line, and a trace has no observed cache figures.
SELECT
    u.unit,
    u.unit_id,
    row_number() OVER (PARTITION BY u.unit ORDER BY t.timestamp, t.source_file, t.source_line) AS seq,
    format('{}:{}', t.source_file, t.source_line) AS request_id,
    t.input_length AS input_tokens,
    NULL::BIGINT AS cached_input_tokens,
    t.output_length AS output_tokens,
    u.kv_block_tokens,
    (md5_number(coalesce(t.session_id, format('{}:{}', t.source_file, t.source_line))) % u.replicas::UHUGEINT
        )::INTEGER AS replica_affine,
    (md5_number(format('{}:{}', t.source_file, t.source_line)) % u.replicas::UHUGEINT)::INTEGER AS replica_random,
    t.hash_ids AS hashes
FROM staged_traces AS t
JOIN whatif_units AS u ON u.unit = t.trace
