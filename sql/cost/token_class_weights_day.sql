-- The weight of each token class of every model costed on the UTC day (one row per model of
-- finance.cost_per_mtok_daily): what its cost is split by, over tenants (finance.tenant_showback_daily) and over a
-- tenant's token classes (focus.cost_and_usage_daily), so both splits price a class alike. A hosted-API model's
-- classes are weighted by its price sheet (per 1M tokens; the sheet of its first deployment by id when it has
-- several); a self-hosted model's by the cost policy's token_class_weights, cache writes as recomputed input.
SELECT
    m.model,
    coalesce(a.cache_read_per_mtok::DOUBLE, p.weight_cached) AS w_cached,
    coalesce(a.input_per_mtok::DOUBLE, p.weight_recomputed) AS w_uncached,
    coalesce(a.cache_write_per_mtok::DOUBLE, p.weight_recomputed) AS w_cache_write,
    coalesce(a.cache_write_1h_per_mtok::DOUBLE, p.weight_recomputed) AS w_cache_write_1h,
    coalesce(a.output_per_mtok::DOUBLE, p.weight_output) AS w_output
FROM (SELECT DISTINCT model FROM day_cost_per_mtok) AS m
CROSS JOIN day_cost_policy AS p
LEFT JOIN (SELECT model,
                  arg_min(cache_read_per_mtok, deployment_id) AS cache_read_per_mtok,
                  arg_min(input_per_mtok, deployment_id) AS input_per_mtok,
                  arg_min(cache_write_per_mtok, deployment_id) AS cache_write_per_mtok,
                  arg_min(cache_write_1h_per_mtok, deployment_id) AS cache_write_1h_per_mtok,
                  arg_min(output_per_mtok, deployment_id) AS output_per_mtok
           FROM day_api_prices GROUP BY model) AS a USING (model)
