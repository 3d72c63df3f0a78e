-- infra.load_hourly: per model in force and UTC hour (all 24), the load against capacity (spec/metrics.md,
-- section 6). Rates are per second over the hour's 3,600 s; the busiest minute's rate over its 60 s. The demand is
-- the output of requests received in the hour that reached the model; capacity_token_rate is the model's daily
-- capacity / 86,400 (tokens/s). over_capacity and the backlog come from the temp table load_backlog
-- (tokenledger.capacity: queueing.fluid_backlog over the 24 hours, starting from the previous day's backlog at the
-- end of its hour 23, in tokens at the start and at the end of each hour); NULL when the model has no capacity
-- figure.
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
    b.backlog_carried_from_day
FROM load_hourly_demand AS d
JOIN load_backlog AS b ON b.model = d.model AND b.hour = d.hour
ORDER BY d.model, d.hour
