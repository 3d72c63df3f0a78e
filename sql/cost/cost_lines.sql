-- core.cost_lines: every cost line of the UTC day with the deployment it belongs to, its category and currency
-- (docs/metrics.md, section 4): the FOCUS rows of core.billing_charges (source 'focus') and the rate-card rows of
-- on-premises deployments (source 'rate_card', sql/cost/rate_card_charges.sql) and the price-sheet rows of hosted-API
-- deployments (source 'api_price', sql/cost/api_charges.sql), in one shape and one path. A FOCUS line tagged to an API
-- deployment is 'unallocated': that deployment's cost is its price sheet's, and the line would count twice.
--
-- Placement, first rule that applies:
--   1. a tag whose key is one of the policy's deployment_tag_keys (the first key present, in the policy's order):
--      naming a deployment in force that day -> 'tagged'; equal to shared_tag_value -> 'shared'; naming anything
--      else -> 'unallocated';
--   2. no deployment tag: ResourceId matching a deployment's resource_ids glob -> 'resource_id' (the first
--      deployment by id when several match);
--   3. otherwise -> 'shared' (untagged).
-- A shared line becomes 'unallocated' when the day's shared-cost key totals 0: there is nothing to spread it over.
-- Category: the first category rule (by rule_order) whose every condition matches, globs compared
-- case-insensitively; no rule matches -> 'platform'. A rate-card line prices GPU-hours, so it is 'gpu'.
WITH policy AS (
    SELECT p.*, (SELECT coalesce(sum(key_value), 0) FROM day_shared_key) AS shared_key_total
    FROM day_cost_policy AS p
),
deployments AS (
    SELECT deployment_id, arg_max(model, in_force_to) AS model, arg_max(kind, in_force_to) AS kind
    FROM day_deployments
    GROUP BY deployment_id
),
resource_patterns AS (
    SELECT DISTINCT deployment_id, pattern, glob_like(pattern) AS like_pattern
    FROM (SELECT deployment_id, unnest(resource_ids) AS pattern FROM day_deployments WHERE kind <> 'api')
),
rules AS (
    SELECT r.*
    FROM cfg_cost_category_rule AS r
    JOIN policy AS p USING (price_version)
),
charges AS (
    SELECT 'focus' AS source, * FROM day_billing
    UNION ALL BY NAME
    SELECT 'rate_card' AS source, * FROM day_rate_card_charges
    UNION ALL BY NAME
    SELECT 'api_price' AS source, * FROM day_api_charges
),
matched AS (
    SELECT
        c.*,
        p.price_version,
        p.shared_tag_value,
        p.shared_cost_key,
        p.shared_key_total,
        list_filter(
            list_transform(p.deployment_tag_keys,
                           lambda k: [k, nullif(trim(json_extract_string(c.Tags, k)), '')]),
            lambda t: t[2] IS NOT NULL)[1] AS tag,
        tag[1] AS tag_key,
        tag[2] AS tag_value,
        (SELECT min([r.deployment_id, r.pattern]) FROM resource_patterns AS r
         WHERE like_escape(c.ResourceId, r.like_pattern, '\')) AS resource_match,
        (SELECT min({'rule_order': r.rule_order, 'category': r.category}) FROM rules AS r
         WHERE (r.service_category IS NULL
                OR ilike_escape(c.ServiceCategory, glob_like(r.service_category), '\'))
           AND (r.service_name IS NULL OR ilike_escape(c.ServiceName, glob_like(r.service_name), '\'))
           AND (r.sku_id IS NULL OR ilike_escape(c.SkuId, glob_like(r.sku_id), '\'))
           AND (r.resource_id IS NULL OR ilike_escape(c.ResourceId, glob_like(r.resource_id), '\'))
           AND (r.charge_category IS NULL
                OR ilike_escape(c.ChargeCategory, glob_like(r.charge_category), '\'))) AS rule_match
    FROM charges AS c
    CROSS JOIN policy AS p
),
placed AS (
    SELECT
        m.*,
        CASE
            WHEN d.kind = 'api' AND m.source <> 'api_price' THEN 'unallocated'
            WHEN d.deployment_id IS NOT NULL THEN 'tagged'
            WHEN m.tag_value = m.shared_tag_value THEN 'shared'
            WHEN m.tag_value IS NOT NULL THEN 'unallocated'
            WHEN m.resource_match IS NOT NULL THEN 'resource_id'
            ELSE 'shared'
        END AS first_placement,
        CASE
            WHEN d.kind = 'api' AND m.source <> 'api_price'
                THEN 'tag ' || m.tag_key || ' = ' || m.tag_value || ' names a hosted-API deployment, whose cost '
                     || 'comes from its price sheet: placing this line on it too would count it twice'
            WHEN d.deployment_id IS NOT NULL THEN 'tag ' || m.tag_key || ' = ' || m.tag_value
            WHEN m.tag_value = m.shared_tag_value THEN 'tag ' || m.tag_key || ' = ' || m.tag_value || ': shared pool'
            WHEN m.tag_value IS NOT NULL
                THEN 'tag ' || m.tag_key || ' = ' || m.tag_value || ' names no deployment in force on the day'
            WHEN m.resource_match IS NOT NULL
                THEN 'ResourceId matches ' || m.resource_match[2] || ' of ' || m.resource_match[1]
            ELSE 'untagged, and no deployment''s resource_ids match the ResourceId: shared'
        END AS first_reason,
        CASE WHEN d.kind = 'api' AND m.source <> 'api_price' THEN NULL
             ELSE coalesce(d.deployment_id, CASE WHEN m.tag_value IS NULL THEN m.resource_match[1] END)
        END AS placed_deployment
    FROM matched AS m
    LEFT JOIN deployments AS d ON d.deployment_id = m.tag_value
)
SELECT
    $day::DATE AS day,
    p.source,
    p.source_file,
    p.source_line,
    p.ChargePeriodStart,
    p.ChargePeriodEnd,
    p.ChargeCategory,
    p.ChargeClass,
    p.ServiceCategory,
    p.ServiceName,
    p.ProviderName,
    p.ResourceId,
    p.SkuId,
    p.Tags,
    p.BillingCurrency AS currency,
    p.day_fraction,
    p.effective_cost_day,
    p.billed_cost_day,
    p.price_version,
    p.placed_deployment AS deployment_id,
    d.model,
    CASE WHEN p.first_placement = 'shared' AND p.shared_key_total = 0 THEN 'unallocated'
         ELSE p.first_placement END AS placement,
    CASE WHEN p.first_placement = 'shared' AND p.shared_key_total = 0
         THEN p.first_reason || ', but ' || p.shared_cost_key || ' totals 0 on the day: nothing to spread it over'
         ELSE p.first_reason END AS placement_reason,
    CASE p.source WHEN 'rate_card' THEN 'gpu' WHEN 'api_price' THEN 'api'
                  ELSE coalesce(p.rule_match.category, 'platform') END AS category,
    CASE WHEN p.source IN ('rate_card', 'api_price') THEN NULL ELSE p.rule_match.rule_order END AS category_rule
FROM placed AS p
LEFT JOIN deployments AS d ON d.deployment_id = p.placed_deployment
ORDER BY p.source, p.source_file, p.source_line, p.ResourceId, p.ChargePeriodStart
