-- The SLO policy each model of the day is judged by: version $slo_version, the model's own row when slo.yaml
-- overrides it (overrides already merged into it), else the default row ('*'). One row per model that is in
-- force or served requests on the day; policy_model says which row was used.
WITH models AS (
    SELECT model FROM day_deployments
    UNION
    SELECT model FROM day_requests
)
SELECT
    m.model,
    p.model AS policy_model,
    p.* EXCLUDE (model, _line)
FROM models AS m
JOIN cfg_slo_policy AS p
  ON p.slo_version = $slo_version AND p.model IN (m.model, '*')
QUALIFY row_number() OVER (PARTITION BY m.model ORDER BY p.model = '*') = 1
