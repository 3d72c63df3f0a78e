-- One measure's percentiles for infra.slo_daily ($measure: ttft_ms, queue_ms, itl_max_ms, tpot_ms or e2e_ms) over
-- slo_latencies (sql/accounting/slo_latencies.sql, the day's successful requests): per model and ISL bucket, or per model as
-- the 'all' row when $all. P50, P90 and P99 in that order, with linear interpolation (quantile_cont); a request
-- that did not record the measure is left out, and a group in which none did has NULLs. One measure and one
-- grouping per statement, so DuckDB holds 8 bytes per successful request at a time (tokenledger/accounting/day.py).
SELECT
    model,
    CASE WHEN $all THEN 'all' ELSE isl_bucket END AS isl_bucket,
    $measure AS measure,
    quantile_cont(CASE $measure
                      WHEN 'ttft_ms' THEN ttft_ms
                      WHEN 'queue_ms' THEN queue_ms
                      WHEN 'itl_max_ms' THEN itl_max_ms
                      WHEN 'tpot_ms' THEN tpot_ms
                      WHEN 'e2e_ms' THEN e2e_ms
                  END, [0.5, 0.9, 0.99]) AS q
FROM slo_latencies
GROUP BY ALL
