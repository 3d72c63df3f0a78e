-- infra.load_hourly: per model in force and UTC hour (all 24), the load against capacity (docs/metrics.md,
-- section 6), its peaks beyond the minute (the busiest second, the busiest minute's token rates, bursts above the
-- planning rate) and seed 000's observability (failures by kind, mean queue length by Little's law; see
-- sql/capacity/load_hourly_demand.sql). Rates are per second over the hour's 3,600 s; the busiest minute's over its 60 s,
-- the busiest second's over 1 s. The demand is
-- the output of requests received in the hour that reached the model; capacity_token_rate is the model's daily
-- capacity / 86,400 (tokens/s). over_capacity and the backlog come from the temp table load_backlog
-- (tokenledger.capacity.day: queueing.fluid_backlog over the 24 hours, starting from the previous day's backlog at the
-- end of its hour 23, in tokens at the start and at the end of each hour); NULL when the model has no capacity
-- figure. A hosted-API model's capacity is its rate limits instead: its busiest minute's requests (every request
-- sent, a rejected one included: a 429 is the limit at work) and tokens (input + output of the requests that
-- reached it, as providers count them) against rate_limit_rpm and rate_limit_tpm; over_rate_limit is NULL for a
-- model without limits.
SELECT
    $day::DATE AS day,
    d.hour,
    d.model,
    d.requests,
    d.requests / 3600.0 AS arrival_rate,
    d.busiest_minute_requests / 60.0 AS peak_minute_arrival_rate,
    d.output_tokens / 3600.0 AS output_token_rate,
    d.input_recomputed / 3600.0 AS recomputed_input_token_rate,
    d.daily_capacity_tokens / 86400.0 AS capacity_token_rate,
    b.over_capacity,
    b.backlog_tokens,
    d.output_tokens,
    d.daily_capacity_tokens / 24.0 AS capacity_tokens,
    d.deployments_without_capacity,
    b.backlog_start_tokens,
    b.backlog_carried_from_day,
    d.busiest_second_requests::DOUBLE AS peak_second_arrival_rate,
    d.busiest_minute_output_tokens / 60.0 AS peak_minute_output_token_rate,
    d.busiest_minute_input_tokens / 60.0 AS peak_minute_input_token_rate,
    d.busiest_minute_input_recomputed / 60.0 AS peak_minute_recomputed_input_token_rate,
    d.input_total / 3600.0 AS input_token_rate,
    d.planning_arrival_rate,
    d.minutes_above_planning_rate,
    d.burst_seconds,
    d.error_requests,
    d.timeout_requests,
    d.disconnected_requests,
    d.rejected_requests,
    d.cancelled_requests,
    d.queue_ms_total / 1000.0 / 3600.0 AS mean_queue_length,
    d.queue_ms_total / nullif(d.queued_requests, 0) AS mean_queue_ms,
    d.rate_limit_rpm,
    d.rate_limit_tpm,
    d.busiest_minute_requests AS peak_minute_requests,
    d.busiest_minute_tokens AS peak_minute_tokens,
    d.busiest_minute_requests / d.rate_limit_rpm AS peak_minute_rpm_utilization,
    d.busiest_minute_tokens / d.rate_limit_tpm AS peak_minute_tpm_utilization,
    CASE WHEN d.rate_limit_rpm IS NOT NULL OR d.rate_limit_tpm IS NOT NULL
         THEN coalesce(d.busiest_minute_requests > d.rate_limit_rpm, false)
              OR coalesce(d.busiest_minute_tokens > d.rate_limit_tpm, false) END AS over_rate_limit
FROM load_hourly_demand AS d
JOIN load_backlog AS b ON b.model = d.model AND b.hour = d.hour
ORDER BY d.model, d.hour
