-- focus.cost_and_usage_daily: the tenant showback of the UTC day as a FinOps FOCUS 1.2 cost and usage dataset.
-- One Usage row per tenant, model, deployment, token class (its SkuMeter) and currency with tokens that day: the
-- class's tokens (ConsumedQuantity, in Tokens; PricingQuantity in 1000000 Tokens) and its part of the tenant's
-- showback cost (finance.tenant_showback_daily). A tenant's cost of a model is split over its (deployment, class)
-- cells by weighted tokens, tokens * the class weight of day_token_class_weights (the showback's own weights, so a
-- class costs the same per token for every tenant and deployment of a model: the model's cost per weighted token
-- times the weight). Each part is rounded to 1e-12 and the rounding residual goes to the cell with the most weighted
-- tokens (ties: deployment_id, then the class order below), so a tenant's parts add up to its showback cost
-- exactly. Classes: output (produced, successful requests, less their reasoning tokens), reasoning (the reasoning
-- tokens of those requests, a part of output, at most all of it; weighted as output, as the showback weighs them),
-- uncached input (recomputed, less cache writes), cache writes of the five-minute and of the one-hour lifetime,
-- cached input (cache reads). Output and reasoning add up to the output produced. SkuPriceDetails holds the model's
-- properties (FOCUS 1.3's ModelId, ModelVersion, ModelDeveloper, ModelFamily; keys without a value left out), of the
-- deployment as it stood at the end of the day; SkuPriceId carries the model version so that one SkuPriceId has one
-- SkuPriceDetails. A showback row with a NULL cost (the model's tenants have no weighted tokens) has nothing to split
-- and no row here. Column rules: data_contracts/focus/focus_cost_and_usage_daily.odcs.yaml; the mapping is in
-- docs/adr/0060-focus-export.md.
WITH classes AS (
    SELECT * FROM (VALUES
        (1, 'output', 'Output Tokens'),
        (2, 'reasoning', 'Reasoning Tokens'),
        (3, 'input_uncached', 'Uncached Input Tokens'),
        (4, 'input_cache_write', 'Cache Write Tokens'),
        (5, 'input_cache_write_1h', 'One-Hour Cache Write Tokens'),
        (6, 'input_cached', 'Cached Input Tokens')
    ) AS c(class_order, token_class, meter)
),
usage AS (
    SELECT
        tenant_id,
        model,
        deployment_id,
        -- reasoning is a part of output: NULL (not reported) is none, and never more than the output it is part of
        least(coalesce(sum(reasoning_produced), 0), sum(output_produced))::BIGINT AS reasoning,
        (sum(output_produced) - reasoning)::BIGINT AS output,
        sum(input_recomputed - input_cache_write)::BIGINT AS input_uncached,
        sum(input_cache_write - input_cache_write_1h)::BIGINT AS input_cache_write,
        sum(input_cache_write_1h)::BIGINT AS input_cache_write_1h,
        sum(input_cached)::BIGINT AS input_cached
    FROM day_usage
    GROUP BY tenant_id, model, deployment_id
),
cells AS (
    SELECT
        u.tenant_id,
        u.model,
        u.deployment_id,
        c.class_order,
        c.token_class,
        c.meter,
        CASE c.token_class WHEN 'output' THEN u.output WHEN 'reasoning' THEN u.reasoning
             WHEN 'input_uncached' THEN u.input_uncached
             WHEN 'input_cache_write' THEN u.input_cache_write WHEN 'input_cache_write_1h' THEN u.input_cache_write_1h
             ELSE u.input_cached END AS tokens,
        tokens * CASE WHEN c.token_class IN ('output', 'reasoning') THEN w.w_output
                      WHEN c.token_class = 'input_uncached' THEN w.w_uncached
                      WHEN c.token_class = 'input_cache_write' THEN w.w_cache_write
                      WHEN c.token_class = 'input_cache_write_1h' THEN w.w_cache_write_1h
                      ELSE w.w_cached END AS weighted_tokens
    FROM usage AS u
    CROSS JOIN classes AS c
    JOIN day_token_class_weights AS w USING (model)
),
-- The deployment as it stood at the end of its day (its last version in force; a property it leaves out is NULL).
deployments AS (
    SELECT
        deployment_id,
        arg_max(kind, in_force_to) AS kind,
        arg_max(provider, in_force_to) AS provider,
        arg_max_null(model_version, in_force_to) AS model_version,
        arg_max_null(model_developer, in_force_to) AS model_developer,
        arg_max_null(model_family, in_force_to) AS model_family
    FROM day_deployments
    GROUP BY deployment_id
),
parts AS (
    SELECT
        s.tenant_id,
        s.model,
        s.currency,
        s.price_version,
        s.cost AS tenant_cost,
        c.deployment_id,
        c.token_class,
        c.meter,
        c.tokens,
        c.weighted_tokens / nullif(sum(c.weighted_tokens) OVER tenant_model, 0) AS part_share,
        CAST(s.cost::DOUBLE * coalesce(part_share, 0) AS DECIMAL(38, 12)) AS rounded_cost,
        row_number() OVER (tenant_model ORDER BY c.weighted_tokens DESC, c.deployment_id, c.class_order) AS part_rank
    FROM day_showback AS s
    JOIN cells AS c USING (tenant_id, model)
    WHERE s.cost IS NOT NULL AND c.tokens > 0
    WINDOW tenant_model AS (PARTITION BY s.tenant_id, s.model, s.currency)
),
costed AS (
    SELECT
        *,
        CAST(CASE WHEN part_rank = 1
                  THEN tenant_cost - (sum(rounded_cost) OVER (PARTITION BY tenant_id, model, currency) - rounded_cost)
                  ELSE rounded_cost END AS DECIMAL(38, 12)) AS cost
    FROM parts
)
SELECT
    c.cost AS BilledCost,
    c.tenant_id AS BillingAccountId,
    NULL::VARCHAR AS BillingAccountName,
    c.currency AS BillingCurrency,
    date_trunc('month', $day_start::TIMESTAMPTZ) + INTERVAL 1 MONTH AS BillingPeriodEnd,
    date_trunc('month', $day_start::TIMESTAMPTZ) AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    NULL::VARCHAR AS ChargeClass,
    format('{} of {} on deployment {} for tenant {}', c.meter, c.model, c.deployment_id, c.tenant_id)
        AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    $day_end::TIMESTAMPTZ AS ChargePeriodEnd,
    $day_start::TIMESTAMPTZ AS ChargePeriodStart,
    CAST(c.tokens AS DECIMAL(38, 12)) AS ConsumedQuantity,
    'Tokens' AS ConsumedUnit,
    c.cost AS ContractedCost,
    c.cost AS EffectiveCost,
    NULL::VARCHAR AS InvoiceId,
    $provider_name AS InvoiceIssuerName,
    c.cost AS ListCost,
    CAST(c.tokens * 0.000001::DECIMAL(7, 6) AS DECIMAL(38, 12)) AS PricingQuantity,
    '1000000 Tokens' AS PricingUnit,
    $provider_name AS ProviderName,
    CASE WHEN d.kind = 'api' THEN d.provider ELSE $provider_name END AS PublisherName,
    c.deployment_id AS ResourceId,
    NULL::VARCHAR AS ResourceName,
    CASE WHEN d.kind = 'api' THEN 'Hosted Model API' ELSE 'Model Deployment' END AS ResourceType,
    'AI and Machine Learning' AS ServiceCategory,
    'LLM Inference' AS ServiceName,
    'Generative AI' AS ServiceSubcategory,
    c.model || '/' || c.token_class AS SkuId,
    c.meter AS SkuMeter,
    -- FOCUS Key-Value Format: a JSON object, keys without a value left out (json_object would write them as null)
    json_merge_patch('{}'::JSON, json_object('ModelDeveloper', d.model_developer),
                     json_object('ModelFamily', d.model_family),
                     json_object('ModelId', c.model), json_object('ModelVersion', d.model_version))
        AS SkuPriceDetails,
    c.model || '/' || c.token_class || coalesce('@' || d.model_version, '') AS SkuPriceId,
    json_object('tokenledger:tenant', c.tenant_id, 'tokenledger:model', c.model,
                'tokenledger:deployment', c.deployment_id) AS Tags,
    c.model AS x_Model,
    c.token_class AS x_TokenClass,
    c.cost::DOUBLE / c.tokens * 1e6 AS x_EffectiveUnitPrice,
    c.price_version AS x_PriceVersion
FROM costed AS c
LEFT JOIN deployments AS d USING (deployment_id)
ORDER BY BillingCurrency, x_Model, BillingAccountId, ResourceId, SkuId
