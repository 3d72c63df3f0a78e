-- The version of the run's deployment in force when the run started (config/deployments.yaml, loaded as
-- cfg_deployments): it gives the run its GPUs, and the batching settings the run ran with where run.yaml declares
-- none (sql/capacity/loadtest_batching.sql). No row means the inventory does not have the deployment then.
SELECT
    deployment_id,
    model,
    gpu_type,
    gpus,
    gpus_per_replica,
    gpus // gpus_per_replica AS replicas,
    gpu_power_w,
    slots_per_replica,
    max_num_seqs,
    max_num_batched_tokens,
    chunked_prefill
FROM cfg_deployments
WHERE deployment_id = $deployment_id
  AND valid_from <= $start::TIMESTAMPTZ
  AND coalesce(valid_to, 'infinity'::TIMESTAMPTZ) > $start::TIMESTAMPTZ
