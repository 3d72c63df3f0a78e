-- The price sheet of each hosted-API deployment in force on the UTC day (kind api), from the cost policy in force
-- (config costs.yaml api_prices, typed as cfg_api_price): its standard rate (service tier standard, the sheet's own
-- regions, input within any long-context threshold), which weights its token classes where it served no priced
-- token of a class. One row per deployment: its last version of the day names the sheet (a sheet change takes
-- effect with the day, as a new price_version does). A deployment whose sheet the policy lacks has NULL prices;
-- its requests are unpriced (sql/cost/api_request_costs.sql).
WITH deployments AS (
    SELECT
        deployment_id,
        arg_max(model, in_force_to) AS model,
        arg_max(provider, in_force_to) AS provider,
        arg_max(price_sheet, in_force_to) AS price_sheet,
        arg_max(config_line, in_force_to) AS config_line
    FROM day_deployments
    WHERE kind = 'api'
    GROUP BY deployment_id
)
SELECT
    d.deployment_id,
    d.model,
    d.provider,
    d.price_sheet,
    d.config_line,
    p.price_version,
    s.input_per_mtok,
    s.cache_read_per_mtok,
    s.cache_write_per_mtok,
    s.cache_write_1h_per_mtok,
    s.output_per_mtok,
    s.source AS price_source
FROM deployments AS d
CROSS JOIN day_cost_policy AS p
LEFT JOIN cfg_api_price AS s
       ON s.price_version = p.price_version AND s.price_sheet = d.price_sheet
      AND s.service_tier = 'standard' AND s.inference_region IS NULL AND s.context_tier = 'standard'
ORDER BY d.deployment_id
