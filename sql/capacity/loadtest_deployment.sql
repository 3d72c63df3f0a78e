-- The version of the run's deployment in force when the run started (config/deployments.yaml, loaded as
-- cfg_deployments): it gives the run its GPUs. No row means the inventory does not have the deployment then.
SELECT
    deployment_id,
    model,
    gpu_type,
    gpus,
    gpus_per_replica,
    gpus // gpus_per_replica AS replicas,
    gpu_power_w,
    slots_per_replica
FROM cfg_deployments
WHERE deployment_id = $deployment_id
  AND valid_from <= $start::TIMESTAMPTZ
  AND coalesce(valid_to, 'infinity'::TIMESTAMPTZ) > $start::TIMESTAMPTZ
