-- finance.cost_reconciliation_daily: per currency and UTC day, the bill against where its cost went
-- (docs/metrics.md, section 4). billed_effective_cost is the day's share of FOCUS EffectiveCost read straight from
-- core.billing_charges; allocated_cost is the FOCUS cost placed on deployments (directly or spread as shared);
-- unallocated_cost is what could not be placed (core.cost_lines says why). difference = billed_effective_cost -
-- allocated_cost - unallocated_cost, balanced when |difference| <= 1e-6. Beside them: rate_card_cost, the
-- on-premises cost of the rate-card lines (never on the bill, always on a deployment), deployment_cost, the cost
-- on deployments from both sources (the day's sum of finance.cost_per_mtok_daily.cost_total), and billed_cost,
-- FOCUS BilledCost (invoiced, never allocated), and api_cost, the price-sheet cost of hosted-API deployments
-- (never on the cloud bill this table reconciles; a bill line tagged to an API deployment stays unallocated). One row per currency with any cost line; none on a day without.
WITH billed AS (
    SELECT BillingCurrency AS currency, sum(effective_cost_day) AS billed_effective_cost,
           sum(billed_cost_day) AS billed_cost
    FROM day_billing
    GROUP BY BillingCurrency
),
rate_card AS (
    SELECT currency,
           sum(effective_cost_day) FILTER (WHERE source = 'rate_card') AS rate_card_cost,
           sum(effective_cost_day) FILTER (WHERE source = 'api_price') AS api_cost
    FROM day_cost_lines
    WHERE source IN ('rate_card', 'api_price')
    GROUP BY currency
),
allocated AS (
    SELECT
        currency,
        sum(cost) FILTER (WHERE source = 'focus' AND placement <> 'unallocated') AS allocated_cost,
        sum(cost) FILTER (WHERE placement = 'unallocated') AS unallocated_cost,
        sum(cost) FILTER (WHERE placement <> 'unallocated') AS deployment_cost
    FROM day_cost_allocation
    GROUP BY currency
),
figures AS (
    SELECT
        currency,
        CAST(coalesce(b.billed_effective_cost, 0) AS DECIMAL(38, 12)) AS billed_effective_cost,
        CAST(coalesce(a.allocated_cost, 0) AS DECIMAL(38, 12)) AS allocated_cost,
        CAST(coalesce(a.unallocated_cost, 0) AS DECIMAL(38, 12)) AS unallocated_cost,
        CAST(coalesce(r.rate_card_cost, 0) AS DECIMAL(38, 12)) AS rate_card_cost,
        CAST(coalesce(r.api_cost, 0) AS DECIMAL(38, 12)) AS api_cost,
        CAST(coalesce(a.deployment_cost, 0) AS DECIMAL(38, 12)) AS deployment_cost,
        CAST(coalesce(b.billed_cost, 0) AS DECIMAL(38, 12)) AS billed_cost
    FROM billed AS b
    FULL JOIN allocated AS a USING (currency)
    FULL JOIN rate_card AS r USING (currency)
)
SELECT
    $day::DATE AS day,
    currency,
    billed_effective_cost,
    allocated_cost,
    unallocated_cost,
    CAST(billed_effective_cost - allocated_cost - unallocated_cost AS DECIMAL(38, 12)) AS difference,
    abs(difference) <= 0.000001 AS balanced,
    rate_card_cost,
    deployment_cost,
    billed_cost,
    (SELECT price_version FROM day_cost_policy) AS price_version,
    api_cost
FROM figures
ORDER BY currency
