-- GPUs that two deployments claim at the same time (gpu_matches): the first few, for the error that stops the day.
SELECT a.gpu_uuid, a.hostname, a.gpu_index, a.namespace, a.pod, a.deployment_id, b.deployment_id
FROM gpu_matches AS a
JOIN gpu_matches AS b
  ON a.gpu_uuid = b.gpu_uuid
 AND a.hostname IS NOT DISTINCT FROM b.hostname AND a.gpu_index IS NOT DISTINCT FROM b.gpu_index
 AND a.namespace IS NOT DISTINCT FROM b.namespace AND a.pod IS NOT DISTINCT FROM b.pod
 AND a.deployment_id < b.deployment_id
 AND a.in_force_from < b.in_force_to AND b.in_force_from < a.in_force_to
ORDER BY 1, 6, 7
LIMIT 10
