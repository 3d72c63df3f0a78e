-- The traces the prefix-cache what-if replays (tokenledger/whatif/replay.py): every trace folder of raw/traces/ that
-- landed requests (staged_traces), with the block size, replicas and KV bytes per token config/whatif.yaml gives it.
SELECT
    t.trace AS unit,
    (dense_rank() OVER (ORDER BY t.trace))::INTEGER AS unit_id,
    NULL::VARCHAR AS model,
    t.kv_block_tokens,
    t.replicas,
    t.kv_bytes_per_token
FROM cfg_whatif_trace AS t
WHERE t.trace IN (SELECT trace FROM staged_traces)
