-- Valid requests whose model (or named deployment) the inventory does not have in force on the day, one row per
-- (model, deployment_id) with where it first appears. Any row here stops the day: without the deployment there
-- are no GPU-hours or costs to set against these tokens, so the fix is in config/deployments.yaml.
SELECT
    s.model,
    s.deployment_id,
    count(*) AS requests,
    min_by(s.source_file, (s.file_index, s.source_line)) AS first_file,
    min_by(s.source_line, (s.file_index, s.source_line)) AS first_line
FROM staged_gateway AS s
WHERE s.reason IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM deployments_day AS d
      WHERE d.model = s.model AND (s.deployment_id IS NULL OR d.deployment_id = s.deployment_id)
  )
GROUP BY s.model, s.deployment_id
ORDER BY requests DESC
