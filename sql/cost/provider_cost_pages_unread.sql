-- Each page of raw/provider_costs/ (day_provider_cost_pages: one row per file, its JSON document `page`) that
-- cannot be compared, with why: a document that is not a page of either shape
-- finance.provider_cost_reconciliation_daily reads (Anthropic's cost report: data[] buckets with starting_at;
-- OpenAI's Costs API: object 'page', data[] buckets with start_time), a bucket whose start is not a time, or an
-- amount that is not a number (Anthropic's amount, a decimal string; OpenAI's amount.value), or an object (the page,
-- a bucket, a result, its amount) holding a key twice. A page whose data[] is empty has nothing to say and is not
-- one.
WITH shaped AS (
    SELECT
        file,
        page,
        CASE
            WHEN json_type(page) <> 'OBJECT'
                THEN format('a JSON {} where a page (an object) belongs',
                            CASE WHEN json_type(page) IN ('UBIGINT', 'BIGINT', 'DOUBLE') THEN 'number'
                                 WHEN json_type(page) = 'VARCHAR' THEN 'string'
                                 ELSE lower(json_type(page)) END)
            WHEN json_type(page, '$.data') IS DISTINCT FROM 'ARRAY'
                THEN 'no data array of buckets'
            WHEN json_array_length(page, '$.data') = 0
                THEN NULL
            WHEN json_extract(page, '$.data[0].starting_at') IS NOT NULL
                THEN NULL
            WHEN page ->> 'object' = 'page' AND json_extract(page, '$.data[0].start_time') IS NOT NULL
                THEN NULL
            ELSE 'its buckets have neither starting_at (Anthropic) nor start_time (OpenAI)'
        END AS problem,
        CASE WHEN json_extract(page, '$.data[0].starting_at') IS NOT NULL THEN 'anthropic'
             WHEN page ->> 'object' = 'page' THEN 'openai' END AS shape
    FROM day_provider_cost_pages
),
buckets AS (
    SELECT file, shape, unnest(json_extract(page, '$.data[*]')) AS b,
           generate_subscripts(json_extract(page, '$.data[*]'), 1) AS b_index
    FROM shaped WHERE problem IS NULL AND shape IS NOT NULL
),
times AS (
    SELECT
        file,
        CASE shape
            WHEN 'anthropic' THEN format('data[{}].starting_at: {} is not a time (an ISO 8601 timestamp, e.g. '
                                         '"2026-11-16T00:00:00Z")', b_index - 1,
                                         coalesce(b -> 'starting_at', 'missing'))
            ELSE format('data[{}].start_time: {} is not a time (Unix seconds, e.g. 1794787200)', b_index - 1,
                        coalesce(b -> 'start_time', 'missing'))
        END AS problem
    FROM buckets
    WHERE CASE shape WHEN 'anthropic' THEN try_cast(b ->> 'starting_at' AS TIMESTAMPTZ) IS NULL
                     ELSE try_cast(b ->> 'start_time' AS BIGINT) IS NULL END
),
results AS (
    SELECT file, shape, b_index, r_index, r
    FROM buckets
    CROSS JOIN LATERAL (SELECT unnest(json_extract(b, '$.results[*]')) AS r,
                               generate_subscripts(json_extract(b, '$.results[*]'), 1) AS r_index)
),
amounts AS (
    SELECT
        file,
        format('data[{}].results[{}]: the amount {} is not a number, or is beyond 10^26 ({})', b_index - 1,
               r_index - 1,
               coalesce(CASE shape WHEN 'anthropic' THEN r -> 'amount' ELSE r -> '$.amount.value' END::VARCHAR,
                        'missing'),
               CASE shape WHEN 'anthropic' THEN 'Anthropic writes a decimal string in cents, e.g. "123.45"'
                          ELSE 'OpenAI writes amount.value as a JSON number, e.g. 1.2345' END) AS problem
    FROM results
    WHERE try_cast(CASE shape WHEN 'anthropic' THEN r ->> 'amount' ELSE r ->> '$.amount.value' END
                   AS DECIMAL(38, 12)) IS NULL
),
currencies AS (
    SELECT
        file,
        format('data[{}].results[{}]: {}', b_index - 1, r_index - 1,
               CASE WHEN code IS NULL AND shape = 'anthropic'
                        THEN 'the currency is missing (Anthropic writes "currency": "USD" beside each amount)'
                    WHEN code IS NULL
                        THEN 'amount.currency is missing (OpenAI writes "amount": {"value": 1.2345, "currency": '
                             '"usd"})'
                    ELSE format('the currency {} is not a three-letter code (ISO 4217, e.g. "USD")', code_json)
               END) AS problem
    FROM (SELECT *,
                 CASE shape WHEN 'anthropic' THEN r ->> 'currency' ELSE r ->> '$.amount.currency' END AS code,
                 CASE shape WHEN 'anthropic' THEN r -> 'currency' ELSE r -> '$.amount.currency' END::VARCHAR
                     AS code_json
          FROM results)
    WHERE code IS NULL OR NOT regexp_full_match(code, '[A-Za-z]{3}')
),
repeated AS (
    -- an object holding a key twice: a JSON parser keeps one of the two values, which one was meant cannot be told
    SELECT file, format('{}: the key "{}" is written twice in one object, so which value is meant cannot be told',
                        place, left(k, 80)) AS problem
    FROM (
        SELECT file, 'the page' AS place, json_keys(page) AS ks FROM shaped WHERE json_type(page) = 'OBJECT'
        UNION ALL
        SELECT file, format('data[{}]', b_index - 1), json_keys(b) FROM buckets
        UNION ALL
        SELECT file, format('data[{}].results[{}]', b_index - 1, r_index - 1), json_keys(r) FROM results
        UNION ALL
        SELECT file, format('data[{}].results[{}].amount', b_index - 1, r_index - 1), json_keys(r, '$.amount')
        FROM results WHERE json_type(r, '$.amount') = 'OBJECT'
    )
    CROSS JOIN LATERAL (SELECT list_filter(ks, lambda key, n: list_position(ks, key) < n)[1] AS k)
    WHERE k IS NOT NULL
)
SELECT DISTINCT file, problem
FROM (SELECT file, problem FROM shaped WHERE problem IS NOT NULL
      UNION ALL SELECT file, problem FROM repeated
      UNION ALL SELECT file, problem FROM times
      UNION ALL SELECT file, problem FROM amounts
      UNION ALL SELECT file, problem FROM currencies)
ORDER BY file, problem
