-- finance.tenant_showback_daily: each tenant's share of a model's cost on the UTC day, by weighted tokens
-- (docs/metrics.md, section 4): weighted_tokens = input_cached * w_cached + input_recomputed * w_recomputed +
-- output_tokens * w_output (output_tokens: output produced, successful requests; input over reached requests; the
-- weights are day_token_class_weights, sql/cost/token_class_weights_day.sql: for a hosted-API model its price sheet's,
-- as in finance.cost_per_mtok_daily, so a tenant's share is its share of the sheet cost), cost_share =
-- weighted_tokens / the model's weighted tokens, cost = cost_share * the model's cost_total over its deployments
-- (finance.cost_per_mtok_daily), per currency. Each cost is rounded to 1e-12 and the rounding residual goes to the
-- tenant with the largest share (ties: the first by id), so a model's tenant costs add up to its cost exactly. A
-- model whose tenants have no weighted tokens has NULL shares and costs; a model allocated no cost has no rows.
WITH model_cost AS (
    SELECT model, currency, any_value(price_version) AS price_version, sum(cost_total) AS cost_total
    FROM day_cost_per_mtok
    GROUP BY model, currency
),
tenants AS (
    SELECT
        tenant_id,
        model,
        sum(requests)::BIGINT AS requests,
        sum(input_total)::BIGINT AS input_total,
        sum(input_cached)::BIGINT AS input_cached,
        sum(input_recomputed)::BIGINT AS input_recomputed,
        sum(input_cache_write)::BIGINT AS input_cache_write,
        sum(input_cache_write_1h)::BIGINT AS input_cache_write_1h,
        sum(output_produced)::BIGINT AS output_tokens,
        sum(reasoning_produced)::BIGINT AS reasoning_tokens  -- within output_tokens; NULL: none reports it
    FROM day_usage
    GROUP BY tenant_id, model
),
shares AS (
    SELECT
        t.*,
        m.currency,
        m.price_version,
        m.cost_total AS model_cost,
        t.input_cached * w.w_cached + (t.input_recomputed - t.input_cache_write) * w.w_uncached
            + (t.input_cache_write - t.input_cache_write_1h) * w.w_cache_write
            + t.input_cache_write_1h * w.w_cache_write_1h + t.output_tokens * w.w_output AS weighted_tokens,
        weighted_tokens / nullif(sum(weighted_tokens) OVER model_day, 0) AS cost_share,
        CAST(m.cost_total::DOUBLE * cost_share AS DECIMAL(38, 12)) AS rounded_cost,
        row_number() OVER (model_day ORDER BY weighted_tokens DESC, t.tenant_id) AS share_rank
    FROM tenants AS t
    JOIN model_cost AS m USING (model)
    JOIN day_token_class_weights AS w USING (model)
    WINDOW model_day AS (PARTITION BY t.model, m.currency)
)
SELECT
    $day::DATE AS day,
    tenant_id,
    model,
    requests,
    input_total,
    input_cached,
    input_recomputed,
    output_tokens,
    weighted_tokens,
    cost_share,
    CAST(CASE WHEN share_rank = 1
              THEN model_cost - (sum(rounded_cost) OVER (PARTITION BY model, currency) - rounded_cost)
              ELSE rounded_cost END AS DECIMAL(38, 12)) AS cost,
    currency,
    price_version,
    input_cache_write,
    reasoning_tokens
FROM shares
ORDER BY model, currency, tenant_id
