-- The SLO policy each model of the day is judged by: version $slo_version, the model's own row when slo.yaml
-- overrides it (overrides already merged into it), else the default row ('*'). One row per model that is in
-- force or served requests on the day; policy_model says which row was used. Optional keys left out take their
-- defaults here.
WITH models AS (
    SELECT model FROM day_deployments
    UNION
    SELECT model FROM day_requests
)
SELECT
    m.model,
    p.model AS policy_model,
    p.* EXCLUDE (model, _line) REPLACE (
        -- the optional keys' defaults (docs/configuration.md)
        coalesce(p.loadtest_max_age_days, 90) AS loadtest_max_age_days,
        coalesce(p.loadtest_recomputed_input_tolerance_pct, 25.0) AS loadtest_recomputed_input_tolerance_pct,
        coalesce(p.loadtest_isl_p90_tolerance_pct, 50.0) AS loadtest_isl_p90_tolerance_pct,
        coalesce(p.headroom_failure_domain, 'replica') AS headroom_failure_domain
    )
FROM models AS m
JOIN cfg_slo_policy AS p
  ON p.slo_version = $slo_version AND p.model IN (m.model, '*')
QUALIFY row_number() OVER (PARTITION BY m.model ORDER BY p.model = '*') = 1
