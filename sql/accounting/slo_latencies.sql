-- What infra.slo_daily takes percentiles of (sql/accounting/slo_percentiles.sql): every successful request of the day
-- (sql/accounting/requests_judged.sql) with its model, ISL bucket and the five measures. tokenledger/accounting/day.py writes it
-- to a scratch file so that each percentile is its own statement over it: DuckDB holds every value of an exact
-- percentile in memory and does not spill it, so the day's ten percentile columns in one statement held about
-- ten times a measure's values at once (the 100M-request day failed at DuckDB's 4 GB limit).
SELECT model, isl_bucket, ttft_ms, queue_ms, itl_max_ms, tpot_ms, e2e_ms
FROM requests_judged
WHERE is_success
