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
-- Nothing of the provider's is dropped or summed across currencies (docs/adr/0113-provider-figures-in-one-currency-
-- and-every-page.md); `not_compared` says what the row's comparison lacks:
-- - the comparison is made in the cost policy's currency (day_cost_policy.currency, tokenledger's prices). A result
--   in another currency is summed into its own currency's row (provider_cost in that currency, no tokenledger_cost),
--   counted there in results_not_compared and named (file, data[i].results[j]) on that row and on the policy
--   currency's row of the same provider, model and tier, whose provider_cost leaves it out. (A result without a
--   currency stops the day: sql/cost/provider_cost_pages_unread.sql.)
-- - a page whose has_more is true has a next page; the APIs page by whole buckets, so it starts with the bucket
--   after the page's last one (its ending_at / end_time). When no landed page of that provider starts there, the
--   buckets from there on are unknown: a day whose bucket no landed page holds, on or after that start, is
--   incomplete, and every row of that provider says so (incomplete_pages, and the file and next_page in
--   not_compared), a row of the provider alone if tokenledger has none. A page without has_more says nothing of
--   more (a script's merge of every page into one data[] is read as complete).
WITH policy AS (
    SELECT currency AS policy_currency FROM day_cost_policy
),
pages AS (
    SELECT
        file,
        page,
        CASE WHEN json_extract(page, '$.data[0].starting_at') IS NOT NULL THEN 'anthropic'
             WHEN page ->> 'object' = 'page' AND json_extract(page, '$.data[0].start_time') IS NOT NULL
                 THEN 'openai' END AS provider,
        coalesce(page ->> 'has_more' = 'true', false) AS has_more,
        page -> 'next_page' AS next_page
    FROM day_provider_cost_pages
),
buckets AS (
    SELECT
        file,
        provider,
        has_more,
        next_page,
        b,
        b_index,
        CASE provider WHEN 'anthropic' THEN (b ->> 'starting_at')::TIMESTAMPTZ
                      ELSE to_timestamp((b ->> 'start_time')::BIGINT) END AS bucket_start,
        CASE provider WHEN 'anthropic' THEN try_cast(b ->> 'ending_at' AS TIMESTAMPTZ)
                      ELSE to_timestamp(try_cast(b ->> 'end_time' AS BIGINT)) END AS bucket_end
    FROM (SELECT file, provider, has_more, next_page, unnest(json_extract(page, '$.data[*]')) AS b,
                 generate_subscripts(json_extract(page, '$.data[*]'), 1) - 1 AS b_index
          FROM pages WHERE provider IS NOT NULL)
),
anthropic AS (
    SELECT
        'anthropic' AS provider,
        bucket_start,
        r ->> 'model' AS model,
        r ->> 'service_tier' AS service_tier,
        upper(r ->> 'currency') AS currency,
        (r ->> 'amount')::DECIMAL(38, 12) / 100 AS amount,
        r::VARCHAR AS result,
        file,
        b_index,
        r_index
    FROM (SELECT * FROM buckets WHERE provider = 'anthropic')
    CROSS JOIN LATERAL (SELECT unnest(json_extract(b, '$.results[*]')) AS r,
                               generate_subscripts(json_extract(b, '$.results[*]'), 1) - 1 AS r_index)
),
openai AS (
    SELECT
        'openai' AS provider,
        bucket_start,
        nullif(trim(split_part(r ->> 'line_item', ',', 1)), '') AS model,
        CASE WHEN r ->> 'line_item' ILIKE '%batch%' THEN 'batch'
             WHEN r ->> 'line_item' ILIKE '%flex%' THEN 'flex'
             WHEN r ->> 'line_item' ILIKE '%priority%' THEN 'priority'
             WHEN r ->> 'line_item' IS NOT NULL THEN 'standard' END AS service_tier,
        upper(r ->> '$.amount.currency') AS currency,
        (r ->> '$.amount.value')::DECIMAL(38, 12) AS amount,
        r::VARCHAR AS result,
        file,
        b_index,
        r_index
    FROM (SELECT * FROM buckets WHERE provider = 'openai')
    CROSS JOIN LATERAL (SELECT unnest(json_extract(b, '$.results[*]')) AS r,
                               generate_subscripts(json_extract(b, '$.results[*]'), 1) - 1 AS r_index)
),
rows AS (
    -- a page downloaded twice (two files with the same buckets) counts once: results identical in every field (the
    -- whole result object: token type, description, workspace, project, line item...) but for the file. Two results
    -- of equal amount that differ in any field are two costs. Of the copies, the first file's is kept (and named).
    SELECT DISTINCT ON (provider, bucket_start, result, copy)
        provider, model, service_tier, currency, amount, file, b_index, r_index
    FROM (SELECT *, row_number() OVER (PARTITION BY file, provider, bucket_start, result ORDER BY b_index, r_index)
                        AS copy
          FROM (SELECT * FROM anthropic UNION ALL SELECT * FROM openai))
    WHERE bucket_start >= $day_start::TIMESTAMPTZ AND bucket_start < $day_end::TIMESTAMPTZ
    ORDER BY provider, bucket_start, result, copy, file
),
-- the pages of a provider whose next page is not landed, where that leaves this day unknown
spans AS (
    SELECT file, provider, any_value(has_more) AS has_more, any_value(next_page) AS next_page,
           min(bucket_start) AS first_start,
           arg_max(coalesce(bucket_end, bucket_start + INTERVAL 1 DAY), bucket_start) AS next_start
    FROM buckets
    GROUP BY file, provider
),
holes AS (
    SELECT
        provider,
        count(*) AS incomplete_pages,
        string_agg(format('{}: has_more is true and the next page (next_page {}, buckets from {}) is not landed, so '
                          'the provider figure of the day is incomplete: land every page',
                          file, coalesce(next_page::VARCHAR, 'missing'),
                          strftime(timezone('UTC', next_start), '%Y-%m-%dT%H:%M:%SZ')), '; ' ORDER BY file)
            AS note
    FROM spans AS s
    WHERE has_more
      AND next_start < $day_end::TIMESTAMPTZ
      AND NOT EXISTS (SELECT 1 FROM spans AS n WHERE n.provider = s.provider AND n.first_start = s.next_start)
      AND NOT EXISTS (SELECT 1 FROM buckets AS d WHERE d.provider = s.provider
                      AND d.bucket_start >= $day_start::TIMESTAMPTZ AND d.bucket_start < $day_end::TIMESTAMPTZ)
    GROUP BY provider
),
-- a provider whose files give no model compares as a whole
whole AS (
    SELECT DISTINCT provider FROM rows WHERE model IS NULL
),
keyed AS (
    SELECT
        provider,
        CASE WHEN provider IN (SELECT provider FROM whole) THEN NULL ELSE model END AS model,
        CASE WHEN provider IN (SELECT provider FROM whole) THEN NULL ELSE coalesce(service_tier, 'standard') END
            AS service_tier,
        currency, amount, file, b_index, r_index
    FROM rows
),
provider_side AS (
    SELECT
        provider, model, service_tier, currency,
        sum(amount) AS provider_cost,
        string_agg(DISTINCT file, ', ' ORDER BY file) AS provider_files
    FROM keyed
    GROUP BY ALL
),
-- the results in a currency other than the policy's, per provider, model, tier and currency: the first three named
other_currency AS (
    SELECT
        provider, model, service_tier, currency,
        count(*) AS results,
        array_to_string(list(format('{} data[{}].results[{}]', file, b_index, r_index)
                             ORDER BY file, b_index, r_index)[1:3], ', ')
            || CASE WHEN count(*) > 3 THEN format(' and {} more', count(*) - 3) ELSE '' END AS named
    FROM keyed, policy
    WHERE currency <> policy_currency
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
    WHERE d.provider IN (SELECT provider FROM provider_side UNION SELECT provider FROM holes)
    GROUP BY ALL
),
compared AS (
    SELECT
        coalesce(p.provider, o.provider) AS provider,
        coalesce(p.model, o.model) AS model,
        coalesce(p.service_tier, o.service_tier) AS service_tier,
        coalesce(p.currency, o.currency) AS currency,
        p.provider_cost,
        o.tokenledger_cost,
        o.requests_unpriced,
        o.source_cost,
        p.provider_files
    FROM provider_side AS p
    FULL JOIN ours AS o
           ON o.provider = p.provider AND o.model IS NOT DISTINCT FROM p.model
          AND o.service_tier IS NOT DISTINCT FROM p.service_tier AND o.currency = p.currency
    -- a provider whose day is incomplete and of which tokenledger priced nothing: a row of the provider alone
    UNION ALL
    SELECT h.provider, NULL, NULL, policy_currency, NULL, NULL, 0, NULL, NULL
    FROM holes AS h, policy
    WHERE h.provider NOT IN (SELECT provider FROM provider_side UNION SELECT provider FROM ours)
),
noted AS (
    SELECT
        c.*,
        coalesce(own.results, 0) AS results_not_compared,
        coalesce(h.incomplete_pages, 0) AS incomplete_pages,
        nullif(concat_ws('; ',
            CASE WHEN own.results IS NOT NULL
                 THEN format('{} result(s) in {} not compared: tokenledger prices in {} (the currency of the cost '
                             'policy) and applies no exchange rate: {}', own.results, c.currency, policy_currency,
                             own.named) END,
            (SELECT string_agg(format('{} result(s) of the provider in {} are not in provider_cost (their own row '
                                      'has them): {}', x.results, x.currency, x.named), '; ' ORDER BY x.currency)
             FROM other_currency AS x
             WHERE c.currency = policy_currency AND x.provider = c.provider
               AND x.model IS NOT DISTINCT FROM c.model AND x.service_tier IS NOT DISTINCT FROM c.service_tier),
            h.note), '') AS not_compared
    FROM compared AS c
    CROSS JOIN policy
    LEFT JOIN other_currency AS own
           ON own.provider = c.provider AND own.model IS NOT DISTINCT FROM c.model
          AND own.service_tier IS NOT DISTINCT FROM c.service_tier AND own.currency = c.currency
    LEFT JOIN holes AS h ON h.provider = c.provider
)
SELECT
    $day::DATE AS day,
    provider,
    model,
    service_tier,
    currency,
    CAST(provider_cost AS DECIMAL(38, 12)) AS provider_cost,
    CAST(tokenledger_cost AS DECIMAL(38, 12)) AS tokenledger_cost,
    CAST(tokenledger_cost - provider_cost AS DECIMAL(38, 12)) AS difference,
    abs(difference) <= $tolerance::DECIMAL(38, 12) * abs(provider_cost) + 0.000001 AS within_tolerance,
    coalesce(requests_unpriced, 0)::BIGINT AS requests_unpriced,
    CAST(source_cost AS DECIMAL(38, 12)) AS source_cost,
    provider_files,
    results_not_compared::BIGINT AS results_not_compared,
    incomplete_pages::BIGINT AS incomplete_pages,
    not_compared
FROM noted
ORDER BY provider, model NULLS FIRST, service_tier, currency
