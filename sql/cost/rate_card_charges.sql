-- The day's charges of on-premises deployments, costed from the rate card of the policy in force and shaped like
-- core.billing_charges rows, so that allocation has one path (docs/metrics.md, section 4). One row per deployment
-- version in force (a mid-day change gives two): its GPU-hours times
-- capex_per_gpu / lifetime_hours + power_kw_per_gpu * pue * price_per_kwh + opex_per_gpu_hour,
-- in the policy's currency, tagged to the deployment with the policy's first deployment tag key. The line points
-- at the deployment version it costs (deployments.yaml and its line); SkuId names the rate card.
SELECT
    $day::DATE AS day,
    d.in_force_from AS ChargePeriodStart,
    d.in_force_to AS ChargePeriodEnd,
    date_trunc('month', $day_start::TIMESTAMPTZ) AS BillingPeriodStart,
    CAST(d.gpu_hours * (r.capex_per_gpu / r.lifetime_hours + r.power_kw_per_gpu * r.pue * r.price_per_kwh
                        + r.opex_per_gpu_hour) AS DECIMAL(38, 12)) AS EffectiveCost,
    EffectiveCost AS BilledCost,
    p.currency AS BillingCurrency,
    'Usage' AS ChargeCategory,
    NULL::VARCHAR AS ChargeClass,
    'Compute' AS ServiceCategory,
    'On-premises GPU (rate card)' AS ServiceName,
    'on-premises' AS ProviderName,
    'rate-card:' || d.rate_card || ':' || d.deployment_id AS ResourceId,
    d.rate_card AS SkuId,
    d.gpu_hours AS ConsumedQuantity,
    'GPU-Hours' AS ConsumedUnit,
    json_object(p.deployment_tag_keys[1], d.deployment_id) AS Tags,
    1.0::DOUBLE AS day_fraction,
    EffectiveCost AS effective_cost_day,
    EffectiveCost AS billed_cost_day,
    d.gpu_hours AS consumed_quantity_day,
    $deployments_file AS source_file,
    d.config_line AS source_line
FROM day_deployments AS d
CROSS JOIN day_cost_policy AS p
JOIN cfg_rate_card AS r ON r.price_version = p.price_version AND r.rate_card = d.rate_card
WHERE d.hosting = 'on_prem'
ORDER BY d.deployment_id, d.in_force_from
