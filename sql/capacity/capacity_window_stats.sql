-- The counts, latency percentiles (P99, linear interpolation: quantile_cont, over successful requests), output and input
-- of core.capacity_windows for windows $first_window to $last_window of every deployment (one batch of the day's
-- windows: tokenledger/capacity/day.py). DuckDB keeps every value of an exact percentile in memory and cannot spill
-- it, so the day's windows are taken a batch at a time, each holding at most the values the batch was cut for.
SELECT
    deployment_id,
    window_index,
    count(*) AS requests,
    count(*) FILTER (WHERE is_effective) AS effective_requests,
    count(*) FILTER (WHERE is_success) AS successful_requests,
    count(*) FILTER (WHERE is_failure) AS failed_requests,
    count(*) FILTER (WHERE is_compliant) AS compliant_requests,
    quantile_cont(queue_ms, 0.99) FILTER (WHERE is_success) AS queue_p99_ms,
    quantile_cont(itl_max_ms, 0.99) FILTER (WHERE is_success) AS itl_p99_ms,
    quantile_cont(tpot_ms, 0.99) FILTER (WHERE is_success) AS tpot_p99_ms,
    coalesce(sum(output_tokens) FILTER (WHERE is_success), 0)::BIGINT AS output_tokens,
    coalesce(sum(output_tokens) FILTER (WHERE is_compliant), 0)::BIGINT AS compliant_output_tokens,
    -- the input mix of the window's effective requests (a request that logs no cached input counts 0)
    coalesce(sum(input_tokens) FILTER (WHERE is_effective), 0)::BIGINT AS input_total,
    coalesce(sum(cached_input_tokens) FILTER (WHERE is_effective), 0)::BIGINT AS input_cached
FROM capacity_in_window($first_window, $last_window)
GROUP BY deployment_id, window_index
