-- The ISL buckets of each model's SLO policy on the day, [min_input_tokens, max_input_tokens) with a NULL max
-- unbounded, and their TTFT limits; bucket_order sorts them by ISL.
SELECT
    p.model,
    b.isl_bucket,
    b.min_input_tokens,
    b.max_input_tokens,
    b.ttft_limit_ms,
    row_number() OVER (PARTITION BY p.model ORDER BY b.min_input_tokens)::INTEGER AS bucket_order
FROM day_slo_policy AS p
JOIN cfg_slo_isl_bucket AS b
  ON b.slo_version = p.slo_version AND b.model = p.policy_model
