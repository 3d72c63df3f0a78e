-- The deployments the day's prefix-cache what-if covers (tokenledger/whatif/replay.py): every GPU deployment in force that
-- declares kv_block_tokens or served requests carrying prefix_block_hashes, with its block size and replicas as of
-- the version in force at the end of the day and its model's kv_bytes_per_token (config/whatif.yaml). A unit is
-- what one replay runs over: here a deployment, for a trace the trace (sql/whatif/whatif_trace_units.sql).
WITH deployments AS (
    SELECT
        deployment_id,
        arg_max(model, in_force_to) AS model,
        arg_max(kv_block_tokens, in_force_to) AS kv_block_tokens,
        arg_max(replicas, in_force_to) AS replicas
    FROM day_deployments
    WHERE kind = 'gpu'
    GROUP BY deployment_id
),
hashed AS (
    SELECT DISTINCT deployment_id FROM day_requests WHERE prefix_block_hashes IS NOT NULL
)
SELECT
    d.deployment_id AS unit,
    (dense_rank() OVER (ORDER BY d.deployment_id))::INTEGER AS unit_id,
    d.model,
    d.kv_block_tokens,
    d.replicas,
    m.kv_bytes_per_token
FROM deployments AS d
LEFT JOIN cfg_whatif_model AS m ON m.model = d.model
WHERE d.kv_block_tokens IS NOT NULL OR d.deployment_id IN (SELECT deployment_id FROM hashed)
