-- The day's cost of each hosted-API deployment by token class (docs/metrics.md, section 4, for a model priced per
-- token): tokens of the requests that reached it (core.usage_hourly; a rejected request is not billed) times its
-- sheet's price per 1M tokens. Classes: uncached input (input - cache reads - cache writes), cache reads, cache
-- writes of the five-minute and of the one-hour lifetime, output (reasoning included). Money is DECIMAL(38,12).
WITH usage AS (
    SELECT
        deployment_id,
        sum(input_total) AS input_total,
        sum(input_cached) AS input_cached,
        sum(input_cache_write) AS input_cache_write,
        sum(input_cache_write_1h) AS input_cache_write_1h,
        sum(output_tokens) AS output_tokens
    FROM day_usage
    GROUP BY deployment_id
),
tokens AS (
    SELECT
        a.*,
        coalesce(u.input_total - u.input_cached - u.input_cache_write, 0)::BIGINT AS tokens_input_uncached,
        coalesce(u.input_cached, 0)::BIGINT AS tokens_cache_read,
        coalesce(u.input_cache_write - u.input_cache_write_1h, 0)::BIGINT AS tokens_cache_write_5m,
        coalesce(u.input_cache_write_1h, 0)::BIGINT AS tokens_cache_write_1h,
        coalesce(u.output_tokens, 0)::BIGINT AS tokens_output
    FROM day_api_prices AS a
    LEFT JOIN usage AS u USING (deployment_id)
)
SELECT
    *,
    CAST(tokens_input_uncached * input_per_mtok * 0.000001::DECIMAL(7, 6) AS DECIMAL(38, 12)) AS cost_input_uncached,
    CAST(tokens_cache_read * cache_read_per_mtok * 0.000001::DECIMAL(7, 6) AS DECIMAL(38, 12)) AS cost_cache_read,
    CAST((tokens_cache_write_5m * cache_write_per_mtok + tokens_cache_write_1h * cache_write_1h_per_mtok)
         * 0.000001::DECIMAL(7, 6) AS DECIMAL(38, 12)) AS cost_cache_write,
    CAST(tokens_output * output_per_mtok * 0.000001::DECIMAL(7, 6) AS DECIMAL(38, 12)) AS cost_output,
    CAST(cost_input_uncached + cost_cache_read + cost_cache_write + cost_output AS DECIMAL(38, 12)) AS cost_api
FROM tokens
ORDER BY deployment_id
