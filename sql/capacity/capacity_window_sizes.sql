-- How many latency values a batch of core.capacity_windows' percentiles would hold: per window_index (all
-- deployments together), the successful requests in it (sql/capacity/capacity_in_window.sql). tokenledger/capacity/day.py cuts
-- the day's windows into batches by these counts (sql/capacity/capacity_window_stats.sql).
SELECT window_index, count(*) AS successful_requests
FROM capacity_in_window(0, 2147483647)
WHERE is_success
GROUP BY window_index
ORDER BY window_index
