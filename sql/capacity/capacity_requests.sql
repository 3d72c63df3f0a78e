-- The day's judged requests (requests_judged, day_slo_policy) as the capacity windows read them
-- (sql/capacity/capacity_in_window.sql): the columns the windows' counts, percentiles, output and input take, each request's offset
-- from midnight in microseconds, and its model's window, step and last window of the day. tokenledger/capacity/day.py
-- writes it once to a scratch file, which the windows' sizes, every batch of their percentiles and
-- sql/capacity/capacity_windows.sql then read: each of them had judged the whole day again, so the cost grew with the
-- day's requests times its batches (the 100M-request day's step took 336 s, the 10M-request day's 10.8 s).
WITH policy AS (
    SELECT
        model,
        stable_window_min::BIGINT * 60000000 AS window_us,
        step_min::BIGINT * 60000000 AS step_us,
        (epoch_us($day_end::TIMESTAMPTZ) - epoch_us($day_start::TIMESTAMPTZ) - window_us) // step_us AS last_window
    FROM day_slo_policy
)
SELECT
    j.deployment_id,
    j.isl_bucket,
    j.is_effective,
    j.is_success,
    j.is_failure,
    j.is_compliant,
    j.queue_ms,
    j.itl_max_ms,
    j.tpot_ms,
    j.output_tokens,
    j.input_tokens,
    coalesce(j.cached_input_tokens, 0) AS cached_input_tokens,
    epoch_us(j.received_at) - epoch_us($day_start::TIMESTAMPTZ) AS offset_us,
    p.window_us,
    p.step_us,
    p.last_window
FROM requests_judged AS j
JOIN policy AS p ON p.model = j.model
