-- The day's charges of hosted-API deployments (kind api), priced from their sheets (day_api_costs, computed by
-- sql/cost/api_usage_costs.sql) and shaped like core.billing_charges rows, so that allocation has one path: one row per
-- API deployment, its cost over every token class, in the policy's currency, tagged to the deployment with the
-- policy's first deployment tag key (the tokens of its priced requests). The line points at the deployment in deployments.yaml; SkuId names the sheet.
SELECT
    $day::DATE AS day,
    $day_start::TIMESTAMPTZ AS ChargePeriodStart,
    $day_end::TIMESTAMPTZ AS ChargePeriodEnd,
    date_trunc('month', $day_start::TIMESTAMPTZ) AS BillingPeriodStart,
    a.cost_api AS EffectiveCost,
    a.cost_api AS BilledCost,
    p.currency AS BillingCurrency,
    'Usage' AS ChargeCategory,
    NULL::VARCHAR AS ChargeClass,
    'AI and Machine Learning' AS ServiceCategory,
    'Hosted API (price sheet)' AS ServiceName,
    a.provider AS ProviderName,
    'api:' || a.price_sheet || ':' || a.deployment_id AS ResourceId,
    a.price_sheet AS SkuId,
    (a.tokens_input_uncached + a.tokens_cache_read + a.tokens_cache_write_5m + a.tokens_cache_write_1h
     + a.tokens_output)::DOUBLE AS ConsumedQuantity,
    'Tokens' AS ConsumedUnit,
    json_object(p.deployment_tag_keys[1], a.deployment_id) AS Tags,
    1.0::DOUBLE AS day_fraction,
    a.cost_api AS effective_cost_day,
    a.cost_api AS billed_cost_day,
    ConsumedQuantity AS consumed_quantity_day,
    $deployments_file AS source_file,
    a.config_line AS source_line
FROM day_api_costs AS a
CROSS JOIN day_cost_policy AS p
WHERE a.cost_api IS NOT NULL  -- a deployment none of whose requests could be priced has no line: unknown, not 0
ORDER BY a.deployment_id
