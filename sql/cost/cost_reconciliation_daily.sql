-- finance.cost_reconciliation_daily: per currency and UTC day, the bill against where its cost went
-- (docs/metrics.md, section 4). billed_effective_cost is the day's share of FOCUS EffectiveCost read straight from
-- core.billing_charges; allocated_cost is the FOCUS cost placed on deployments (directly or spread as shared);
-- unallocated_cost is what could not be placed (core.cost_lines says why). difference = billed_effective_cost -
-- allocated_cost - unallocated_cost, balanced when |difference| <= 1e-6. Beside them: rate_card_cost, the
-- on-premises cost of the rate-card lines (never on the bill, always on a deployment), deployment_cost, the cost
-- on deployments from both sources (the day's sum of finance.cost_per_mtok_daily.cost_total), and billed_cost,
-- FOCUS BilledCost (invoiced, never allocated), and api_cost, the price-sheet cost of hosted-API deployments
-- (never on the cloud bill this table reconciles; a bill line tagged to an API deployment stays unallocated). One row per currency with any cost line; none on a day without.
-- The hosted-API requests of the day (core.api_request_costs, in the policy's currency) priced and unpriced, the
-- unpriced share and why they were not priced (each reason with its count, commonest first), on the policy
-- currency's row: the blocking check api_requests_priced fails the day above max_unpriced_share.
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
api AS (
    SELECT
        (SELECT currency FROM day_cost_policy) AS currency,
        count(*) FILTER (WHERE price_status = 'priced') AS api_requests_priced,
        count(*) FILTER (WHERE price_status = 'unpriced') AS api_requests_unpriced
    FROM day_api_request_costs
    HAVING count(*) > 0
),
reasons AS (
    SELECT string_agg(unpriced_reason || ': ' || n, '; ' ORDER BY n DESC, unpriced_reason) AS api_unpriced_reasons
    FROM (SELECT unpriced_reason, count(*) AS n FROM day_api_request_costs WHERE price_status = 'unpriced'
          GROUP BY ALL)
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
        CAST(coalesce(b.billed_cost, 0) AS DECIMAL(38, 12)) AS billed_cost,
        coalesce(q.api_requests_priced, 0)::BIGINT AS api_requests_priced,
        coalesce(q.api_requests_unpriced, 0)::BIGINT AS api_requests_unpriced
    FROM billed AS b
    FULL JOIN allocated AS a USING (currency)
    FULL JOIN rate_card AS r USING (currency)
    FULL JOIN api AS q USING (currency)
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
    api_cost,
    api_requests_priced,
    api_requests_unpriced,
    api_requests_unpriced / nullif(api_requests_priced + api_requests_unpriced, 0) AS api_unpriced_share,
    CASE WHEN api_requests_unpriced > 0 THEN (SELECT api_unpriced_reasons FROM reasons) END AS api_unpriced_reasons
FROM figures
ORDER BY currency
