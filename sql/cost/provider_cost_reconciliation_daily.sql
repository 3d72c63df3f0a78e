-- finance.provider_cost_reconciliation_daily: what each hosted-API provider says the UTC day cost, from its own
-- cost export in raw/provider_costs/ (day_provider_cost_pages: one row per file, its JSON document `page`), beside
-- what tokenledger priced (core.api_request_costs), per provider, model and service tier, and the difference.
-- Read as the providers write them:
-- - Anthropic's Admin API cost report (GET /v1/organizations/cost_report, group_by description): data[] buckets
--   {starting_at, ending_at, results[] {amount, currency, model, service_tier, cost_type, ...}}, amount a decimal
--   string in the currency's lowest unit (cents: "123.45" USD is 1.2345);
-- - OpenAI's organization Costs API (GET /v1/organization/costs): data[] buckets {start_time, end_time (Unix
--   seconds), results[] {amount {value, currency}, line_item, project_id}}, value in the currency. A line item is
--   read as `<model>, <what>` (its model before the first comma); without line items the bucket is the
--   provider's whole day, and both sides are compared per provider alone.
-- A bucket counts on the day it starts (bucket_width 1d, UTC); a page repeated in two files counts once. A
-- provider is a deployment's `provider` in deployments.yaml. provider_cost NULL: the provider's files say nothing of
-- that model and tier that day; tokenledger_cost NULL: no request of it was priced. within_tolerance: |difference| <=
-- $tolerance x provider_cost (the ledger resource's provider_cost_tolerance), NULL when a side is missing.
WITH anthropic AS (
    SELECT
        'anthropic' AS provider,
        (b ->> 'starting_at')::TIMESTAMPTZ AS bucket_start,
        r ->> 'model' AS model,
        r ->> 'service_tier' AS service_tier,
        upper(coalesce(r ->> 'currency', 'USD')) AS currency,
        (r ->> 'amount')::DECIMAL(38, 12) / 100 AS amount,
        r::VARCHAR AS result,
        file
    FROM (SELECT file, unnest(json_extract(page, '$.data[*]')) AS b FROM day_provider_cost_pages
          WHERE json_extract(page, '$.data[0].starting_at') IS NOT NULL)
    CROSS JOIN LATERAL (SELECT unnest(json_extract(b, '$.results[*]')) AS r)
),
openai AS (
    SELECT
        'openai' AS provider,
        to_timestamp((b ->> 'start_time')::BIGINT) AS bucket_start,
        nullif(trim(split_part(r ->> 'line_item', ',', 1)), '') AS model,
        CASE WHEN r ->> 'line_item' ILIKE '%batch%' THEN 'batch'
             WHEN r ->> 'line_item' ILIKE '%flex%' THEN 'flex'
             WHEN r ->> 'line_item' ILIKE '%priority%' THEN 'priority'
             WHEN r ->> 'line_item' IS NOT NULL THEN 'standard' END AS service_tier,
        upper(r ->> '$.amount.currency') AS currency,
        (r ->> '$.amount.value')::DECIMAL(38, 12) AS amount,
        r::VARCHAR AS result,
        file
    FROM (SELECT file, unnest(json_extract(page, '$.data[*]')) AS b FROM day_provider_cost_pages
          WHERE page ->> 'object' = 'page' AND json_extract(page, '$.data[0].start_time') IS NOT NULL)
    CROSS JOIN LATERAL (SELECT unnest(json_extract(b, '$.results[*]')) AS r)
),
rows AS (
    -- a page downloaded twice (two files with the same buckets) counts once: results identical in every field (the
    -- whole result object: token type, description, workspace, project, line item...) but for the file. Two results
    -- of equal amount that differ in any field are two costs.
    SELECT DISTINCT ON (provider, bucket_start, result, r_index)
        provider, model, service_tier, currency, amount, file
    FROM (SELECT *, row_number() OVER (PARTITION BY file, provider, bucket_start, result) AS r_index
          FROM (SELECT * FROM anthropic UNION ALL SELECT * FROM openai))
    WHERE bucket_start >= $day_start::TIMESTAMPTZ AND bucket_start < $day_end::TIMESTAMPTZ
),
-- a provider whose files give no model compares as a whole
whole AS (
    SELECT DISTINCT provider FROM rows WHERE model IS NULL
),
provider_side AS (
    SELECT
        provider,
        CASE WHEN provider IN (SELECT provider FROM whole) THEN NULL ELSE model END AS model,
        CASE WHEN provider IN (SELECT provider FROM whole) THEN NULL ELSE coalesce(service_tier, 'standard') END
            AS service_tier,
        currency,
        sum(amount) AS provider_cost,
        string_agg(DISTINCT file, ', ' ORDER BY file) AS provider_files
    FROM rows
    GROUP BY ALL
),
ours AS (
    SELECT
        d.provider,
        CASE WHEN d.provider IN (SELECT provider FROM whole) THEN NULL ELSE c.model END AS model,
        CASE WHEN d.provider IN (SELECT provider FROM whole) THEN NULL ELSE c.service_tier END AS service_tier,
        c.currency,
        sum(c.cost) AS tokenledger_cost,
        count(*) FILTER (WHERE c.price_status = 'unpriced') AS requests_unpriced,
        sum(c.source_cost) AS source_cost
    FROM day_api_request_costs AS c
    JOIN (SELECT deployment_id, arg_max(provider, in_force_to) AS provider FROM day_deployments
          WHERE kind = 'api' GROUP BY deployment_id) AS d USING (deployment_id)
    WHERE d.provider IN (SELECT provider FROM provider_side)
    GROUP BY ALL
)
SELECT
    $day::DATE AS day,
    coalesce(p.provider, o.provider) AS provider,
    coalesce(p.model, o.model) AS model,
    coalesce(p.service_tier, o.service_tier) AS service_tier,
    coalesce(p.currency, o.currency) AS currency,
    CAST(p.provider_cost AS DECIMAL(38, 12)) AS provider_cost,
    CAST(o.tokenledger_cost AS DECIMAL(38, 12)) AS tokenledger_cost,
    CAST(o.tokenledger_cost - p.provider_cost AS DECIMAL(38, 12)) AS difference,
    abs(difference) <= $tolerance::DECIMAL(38, 12) * abs(p.provider_cost) + 0.000001 AS within_tolerance,
    coalesce(o.requests_unpriced, 0)::BIGINT AS requests_unpriced,
    CAST(o.source_cost AS DECIMAL(38, 12)) AS source_cost,
    p.provider_files
FROM provider_side AS p
FULL JOIN ours AS o
       ON o.provider = p.provider AND o.model IS NOT DISTINCT FROM p.model
      AND o.service_tier IS NOT DISTINCT FROM p.service_tier AND o.currency = p.currency
ORDER BY provider, model NULLS FIRST, service_tier, currency
