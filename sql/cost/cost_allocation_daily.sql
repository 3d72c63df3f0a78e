-- core.cost_allocation_daily: the day's cost lines (core.cost_lines) summed by where they land, per currency.
-- Lines placed on a deployment ('tagged', 'resource_id') stay on it; 'unallocated' lines stay without one; the
-- 'shared' lines of each currency, source and category are spread over the deployments in force in proportion
-- to the policy's shared_cost_key (day_shared_key). Each share is rounded to 1e-12 of the currency unit and the
-- rounding residual goes to the deployment with the largest key (ties: the first by id), so the shares add up
-- to the shared cost exactly. Grain: currency x source x placement x deployment_id x category.
WITH direct AS (
    SELECT
        currency,
        price_version,
        source,
        placement,
        deployment_id,
        model,
        category,
        sum(effective_cost_day) AS cost,
        count(*) AS lines
    FROM day_cost_lines
    WHERE placement <> 'shared'
    GROUP BY ALL
),
shared AS (
    SELECT currency, price_version, source, category, sum(effective_cost_day) AS cost, count(*) AS lines
    FROM day_cost_lines
    WHERE placement = 'shared'
    GROUP BY ALL
),
shares AS (
    SELECT
        s.currency,
        s.price_version,
        s.source,
        s.category,
        s.cost AS shared_cost,
        s.lines,
        k.deployment_id,
        k.model,
        CAST(s.cost::DOUBLE * k.key_value / sum(k.key_value) OVER spread AS DECIMAL(38, 12)) AS rounded_share,
        row_number() OVER (spread ORDER BY k.key_value DESC, k.deployment_id) AS share_rank
    FROM shared AS s
    CROSS JOIN day_shared_key AS k
    WHERE k.key_value > 0
    WINDOW spread AS (PARTITION BY s.currency, s.source, s.category)
),
spread AS (
    SELECT
        currency,
        price_version,
        source,
        'shared' AS placement,
        deployment_id,
        model,
        category,
        CASE WHEN share_rank = 1
             THEN shared_cost - (sum(rounded_share) OVER (PARTITION BY currency, source, category) - rounded_share)
             ELSE rounded_share END AS cost,
        lines
    FROM shares
)
SELECT
    $day::DATE AS day,
    currency,
    price_version,
    source,
    placement,
    deployment_id,
    model,
    category,
    CAST(cost AS DECIMAL(38, 12)) AS cost,
    lines::BIGINT AS lines
FROM (SELECT * FROM direct UNION ALL BY NAME SELECT * FROM spread)
ORDER BY currency, source, placement, deployment_id NULLS LAST, category
