-- The day's cost of each hosted-API deployment by token class (docs/metrics.md, section 4, for a model priced per
-- token): the sum over its priced requests of core.api_request_costs (each priced at its tier, region and context
-- rate; a rejected request is not billed and not there). Classes: uncached input (input - cache reads - cache
-- writes), cache reads, cache writes of the five-minute and of the one-hour lifetime, output (reasoning included,
-- at its own price where the sheet gives one). The tokens are those of the priced requests; the unpriced ones are
-- counted apart (requests_unpriced) and cost nothing here: cost_api is NULL, not 0, when the deployment had requests
-- and none of them could be priced. Money is DECIMAL(38,12).
WITH requests AS (
    SELECT
        deployment_id,
        count(*) FILTER (WHERE price_status = 'priced') AS requests_priced,
        count(*) FILTER (WHERE price_status = 'unpriced') AS requests_unpriced,
        sum(tokens_input_uncached) FILTER (WHERE price_status = 'priced') AS tokens_input_uncached,
        sum(tokens_cache_read) FILTER (WHERE price_status = 'priced') AS tokens_cache_read,
        sum(tokens_cache_write_5m) FILTER (WHERE price_status = 'priced') AS tokens_cache_write_5m,
        sum(tokens_cache_write_1h) FILTER (WHERE price_status = 'priced') AS tokens_cache_write_1h,
        sum(tokens_output) FILTER (WHERE price_status = 'priced') AS tokens_output,
        sum(cost_input_uncached) AS cost_input_uncached,
        sum(cost_cache_read) AS cost_cache_read,
        sum(cost_cache_write) AS cost_cache_write,
        sum(cost_output) AS cost_output
    FROM day_api_request_costs
    GROUP BY deployment_id
)
SELECT * EXCLUDE (known) FROM (
SELECT
    a.*,
    coalesce(r.requests_priced, 0)::BIGINT AS requests_priced,
    coalesce(r.requests_unpriced, 0)::BIGINT AS requests_unpriced,
    coalesce(r.tokens_input_uncached, 0)::BIGINT AS tokens_input_uncached,
    coalesce(r.tokens_cache_read, 0)::BIGINT AS tokens_cache_read,
    coalesce(r.tokens_cache_write_5m, 0)::BIGINT AS tokens_cache_write_5m,
    coalesce(r.tokens_cache_write_1h, 0)::BIGINT AS tokens_cache_write_1h,
    coalesce(r.tokens_output, 0)::BIGINT AS tokens_output,
    -- no request at all costs 0; requests none of which could be priced cost an unknown amount
    CASE WHEN coalesce(r.requests_priced, 0) > 0 OR coalesce(r.requests_unpriced, 0) = 0 THEN 0 END AS known,
    CAST(coalesce(r.cost_input_uncached, known) AS DECIMAL(38, 12)) AS cost_input_uncached,
    CAST(coalesce(r.cost_cache_read, known) AS DECIMAL(38, 12)) AS cost_cache_read,
    CAST(coalesce(r.cost_cache_write, known) AS DECIMAL(38, 12)) AS cost_cache_write,
    CAST(coalesce(r.cost_output, known) AS DECIMAL(38, 12)) AS cost_output,
    CAST(cost_input_uncached + cost_cache_read + cost_cache_write + cost_output AS DECIMAL(38, 12)) AS cost_api
FROM day_api_prices AS a
LEFT JOIN requests AS r USING (deployment_id)
)
ORDER BY deployment_id
