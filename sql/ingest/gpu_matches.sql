-- Which deployment each GPU of the day's telemetry belongs to, and when: every distinct set of a GPU's labels in the
-- accepted rows (gpu_day) against the GPU deployment versions in force on the day (day_deployments) whose gpu_uuids,
-- gpu_hosts (host, or host:index) or gpu_pods (namespace/pod) patterns match it (* and ?, sql/common/glob_like.sql).
-- One row per label set and matching version, with the interval the version was in force that day.
WITH gpus AS (
    SELECT DISTINCT gpu_uuid, hostname, gpu_index, namespace, pod
    FROM gpu_day
    WHERE reason IS NULL AND NOT skipped AND NOT duplicate
),
patterns AS (
    SELECT deployment_id, model, in_force_from, in_force_to,
           coalesce(gpu_uuids, []) AS uuids, coalesce(gpu_hosts, []) AS hosts, coalesce(gpu_pods, []) AS pods
    FROM day_deployments
    WHERE kind = 'gpu'
)
SELECT g.*, p.deployment_id, p.model, p.in_force_from, p.in_force_to
FROM gpus AS g
JOIN patterns AS p
  ON list_bool_or(list_transform(p.uuids, lambda x: like_escape(g.gpu_uuid, glob_like(x), '\')))
  OR list_bool_or(list_transform(p.hosts, lambda x: like_escape(g.hostname, glob_like(x), '\')
                  OR like_escape(g.hostname || ':' || g.gpu_index, glob_like(x), '\')))
  OR list_bool_or(list_transform(p.pods, lambda x: like_escape(g.namespace || '/' || g.pod, glob_like(x), '\')))
