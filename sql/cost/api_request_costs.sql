-- core.api_request_costs: every request of the UTC day that reached a hosted-API deployment (kind api; a rejected
-- request reached no model and is not billed), priced from its deployment's price sheet under the cost policy in
-- force (cfg_api_price), or marked unpriced with the reason: never costed at 0 for want of a price.
-- Its rate is chosen by three dimensions: service_tier (the tier the source says served it, else the deployment's,
-- else standard), inference_region (the source's, else the deployment's) and context_tier (long when its input
-- exceeds the sheet's long_context threshold). Under the sheet's rule whole_request a long request is priced whole
-- at the long rate; under tokens_above only its input tokens above the threshold are, taken from the end of the
-- prompt (uncached input, then five-minute and one-hour cache writes, then cache reads: a prompt is the cached
-- prefix, then what it writes to the cache, then the rest), its output at the standard-context rate.
-- Token classes as sql/cost/api_usage_costs.sql sums them; reasoning tokens are a part of output, priced at the rate's
-- reasoning_per_mtok (its output price unless the sheet gives its own) and never added to output. Money is
-- DECIMAL(38,12); the per-class costs are NULL with the cost when the request is unpriced.
WITH deployments AS (
    SELECT
        deployment_id,
        arg_max(price_sheet, in_force_to) AS price_sheet,
        arg_max(service_tier, in_force_to) AS service_tier,
        arg_max(inference_region, in_force_to) AS inference_region
    FROM day_deployments
    WHERE kind = 'api'
    GROUP BY deployment_id
),
rates AS (
    SELECT s.*
    FROM cfg_api_price AS s
    JOIN day_cost_policy AS p USING (price_version)
),
sheets AS (
    SELECT price_sheet, any_value(context_threshold_tokens) AS threshold, any_value(context_rule) AS rule,
           any_value(base_regions) AS base_regions
    FROM rates
    GROUP BY price_sheet
),
requests AS (
    SELECT
        r.request_id,
        r.received_at,
        r.model,
        r.deployment_id,
        r.tenant_id,
        r.source_cost,
        d.price_sheet,
        s.price_sheet IS NOT NULL AS has_sheet,
        coalesce(r.service_tier, d.service_tier, 'standard') AS service_tier,
        coalesce(r.inference_region, d.inference_region) AS inference_region,
        CASE WHEN r.input_tokens > s.threshold THEN 'long' ELSE 'standard' END AS context_tier,
        s.threshold,
        s.rule,
        s.base_regions,
        r.input_tokens,
        (r.input_tokens - r.cached_input_tokens - coalesce(r.cache_write_tokens, 0))::BIGINT AS uncached,
        r.cached_input_tokens AS cache_read,
        (coalesce(r.cache_write_tokens, 0) - coalesce(r.cache_write_1h_tokens, 0))::BIGINT AS write_5m,
        coalesce(r.cache_write_1h_tokens, 0)::BIGINT AS write_1h,
        r.output_tokens,
        least(coalesce(r.reasoning_tokens, 0), r.output_tokens)::BIGINT AS reasoning,
        -- the input tokens priced at the long rate: all of them under whole_request, those above the threshold
        -- under tokens_above
        CASE WHEN context_tier = 'standard' THEN 0
             WHEN s.rule = 'tokens_above' THEN r.input_tokens - s.threshold
             ELSE r.input_tokens END::BIGINT AS above
    FROM day_requests AS r
    JOIN deployments AS d USING (deployment_id)
    LEFT JOIN sheets AS s USING (price_sheet)
    WHERE r.status <> 'rejected'
),
-- The rate of each request's tier and region at standard context (lo) and at its own context tier (hi): a rate of
-- its region, else the sheet's rate for no region when the sheet's regions include it (or name none).
candidates AS (
    SELECT q.request_id, t.context_tier AS tier_of, t.*
    FROM requests AS q
    JOIN rates AS t
      ON t.price_sheet = q.price_sheet AND t.service_tier = q.service_tier
     AND t.context_tier IN ('standard', q.context_tier)
     AND (t.inference_region = q.inference_region
          OR (t.inference_region IS NULL
              AND (q.inference_region IS NULL OR q.base_regions IS NULL
                   OR list_contains(string_split(q.base_regions, ','), q.inference_region))))
    QUALIFY row_number() OVER (PARTITION BY q.request_id, t.context_tier
                               ORDER BY t.inference_region IS NULL) = 1
),
priced AS (
    SELECT
        q.*,
        lo.input_per_mtok IS NOT NULL AS has_lo,
        hi.input_per_mtok IS NOT NULL AS has_hi,
        -- the tokens of each class above the threshold, from the end of the prompt
        least(q.above, q.uncached) AS uncached_hi,
        least(q.above - uncached_hi, q.write_5m) AS write_5m_hi,
        least(q.above - uncached_hi - write_5m_hi, q.write_1h) AS write_1h_hi,
        q.above - uncached_hi - write_5m_hi - write_1h_hi AS cache_read_hi,
        -- output follows the input under whole_request; under tokens_above it stays at the standard rate
        CASE WHEN q.context_tier = 'long' AND q.rule = 'whole_request' THEN q.output_tokens ELSE 0 END AS output_hi,
        CASE WHEN q.context_tier = 'long' AND q.rule = 'whole_request' THEN q.reasoning ELSE 0 END AS reasoning_hi,
        lo.input_per_mtok AS lo_input, lo.cache_read_per_mtok AS lo_read, lo.cache_write_per_mtok AS lo_w5,
        lo.cache_write_1h_per_mtok AS lo_w1, lo.output_per_mtok AS lo_output, lo.reasoning_per_mtok AS lo_reasoning,
        hi.input_per_mtok AS hi_input, hi.cache_read_per_mtok AS hi_read, hi.cache_write_per_mtok AS hi_w5,
        hi.cache_write_1h_per_mtok AS hi_w1, hi.output_per_mtok AS hi_output, hi.reasoning_per_mtok AS hi_reasoning,
        -- which rates the request needs: the standard-context one for what is not above the threshold, the long
        -- one for what is
        (q.context_tier = 'standard' OR q.rule = 'tokens_above') AS needs_lo,
        q.context_tier = 'long' AS needs_hi,
        CASE
            WHEN NOT q.has_sheet
                THEN format('no price sheet {} in cost policy {}', q.price_sheet,
                            (SELECT price_version FROM day_cost_policy))
            WHEN needs_lo AND NOT has_lo
                THEN format('no price for service tier {}{} in price sheet {}', q.service_tier,
                            coalesce(' in region ' || q.inference_region, ''), q.price_sheet)
            WHEN needs_hi AND NOT has_hi
                THEN format('no long-context price (input {} > {} tokens) for service tier {}{} in price sheet {}',
                            q.input_tokens, q.threshold, q.service_tier,
                            coalesce(' in region ' || q.inference_region, ''), q.price_sheet)
        END AS unpriced_reason
    FROM requests AS q
    LEFT JOIN candidates AS lo ON lo.request_id = q.request_id AND lo.tier_of = 'standard'
    LEFT JOIN candidates AS hi ON hi.request_id = q.request_id AND hi.tier_of = 'long' AND q.context_tier = 'long'
),
costed AS (
    SELECT
        *,
        unpriced_reason IS NULL AS is_priced,
        CASE WHEN is_priced THEN CAST(((uncached - uncached_hi) * coalesce(lo_input, 0)
                                       + uncached_hi * coalesce(hi_input, 0)) * 0.000001::DECIMAL(7, 6)
                                      AS DECIMAL(38, 12)) END AS cost_input_uncached,
        CASE WHEN is_priced THEN CAST(((cache_read - cache_read_hi) * coalesce(lo_read, 0)
                                       + cache_read_hi * coalesce(hi_read, 0)) * 0.000001::DECIMAL(7, 6)
                                      AS DECIMAL(38, 12)) END AS cost_cache_read,
        CASE WHEN is_priced THEN CAST(((write_5m - write_5m_hi) * coalesce(lo_w5, 0)
                                       + write_5m_hi * coalesce(hi_w5, 0)
                                       + (write_1h - write_1h_hi) * coalesce(lo_w1, 0)
                                       + write_1h_hi * coalesce(hi_w1, 0)) * 0.000001::DECIMAL(7, 6)
                                      AS DECIMAL(38, 12)) END AS cost_cache_write,
        CASE WHEN is_priced THEN CAST(((reasoning - reasoning_hi) * coalesce(lo_reasoning, 0)
                                       + reasoning_hi * coalesce(hi_reasoning, 0)) * 0.000001::DECIMAL(7, 6)
                                      AS DECIMAL(38, 12)) END AS cost_reasoning,
        CASE WHEN is_priced THEN CAST(((output_tokens - reasoning - (output_hi - reasoning_hi)) * coalesce(lo_output, 0)
                                       + (output_hi - reasoning_hi) * coalesce(hi_output, 0))
                                      * 0.000001::DECIMAL(7, 6) + cost_reasoning AS DECIMAL(38, 12)) END AS cost_output
    FROM priced
)
SELECT
    $day::DATE AS day,
    request_id,
    received_at,
    model,
    deployment_id,
    tenant_id,
    price_sheet,
    service_tier,
    inference_region,
    context_tier,
    input_tokens,
    uncached AS tokens_input_uncached,
    cache_read AS tokens_cache_read,
    write_5m AS tokens_cache_write_5m,
    write_1h AS tokens_cache_write_1h,
    output_tokens AS tokens_output,
    reasoning AS tokens_reasoning,
    above::BIGINT AS tokens_above_threshold,
    cost_input_uncached,
    cost_cache_read,
    cost_cache_write,
    cost_output,
    cost_reasoning,
    CAST(cost_input_uncached + cost_cache_read + cost_cache_write + cost_output AS DECIMAL(38, 12)) AS cost,
    CASE WHEN is_priced THEN 'priced' ELSE 'unpriced' END AS price_status,
    unpriced_reason,
    (SELECT price_version FROM day_cost_policy) AS price_version,
    (SELECT currency FROM day_cost_policy) AS currency,
    source_cost
FROM costed
ORDER BY deployment_id, request_id
