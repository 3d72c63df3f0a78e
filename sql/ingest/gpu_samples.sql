-- core.gpu_samples: the day's accepted GPU telemetry (gpu_day: neither quarantined, skipped nor a duplicate), one
-- measure a row, each with the deployment whose version in force at the sample's time claims its GPU (gpu_matches;
-- none: deployment_id NULL, an unmapped GPU).
WITH accepted AS (
    SELECT * FROM gpu_day WHERE reason IS NULL AND NOT skipped AND NOT duplicate
),
measures AS (
    UNPIVOT accepted ON power_w, gpu_util_pct, sm_active, fb_used_mib INTO NAME metric VALUE value
)
SELECT
    $day::DATE AS day,
    s.sampled_at,
    hour(s.sampled_at)::INTEGER AS hour,
    s.gpu_uuid,
    s.hostname,
    s.gpu_index,
    s.gpu_model,
    s.namespace,
    s.pod,
    s.metric,
    s.value,
    m.deployment_id,
    m.model,
    s.source_file,
    s.source_line
FROM measures AS s
LEFT JOIN gpu_matches AS m
  ON m.gpu_uuid = s.gpu_uuid
 AND m.hostname IS NOT DISTINCT FROM s.hostname AND m.gpu_index IS NOT DISTINCT FROM s.gpu_index
 AND m.namespace IS NOT DISTINCT FROM s.namespace AND m.pod IS NOT DISTINCT FROM s.pod
 AND s.sampled_at >= m.in_force_from AND s.sampled_at < m.in_force_to
ORDER BY s.gpu_uuid, s.sampled_at, s.metric, s.source_file, s.source_line
