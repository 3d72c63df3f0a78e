-- capacity_in_window(from_window, to_window): the day's judged requests (capacity_requests, a view over the file
-- sql/capacity/capacity_requests.sql wrote) placed in every stable_window_min window that contains them, among windows
-- from_window to to_window: one row per request and window (sql/capacity/capacity_windows.sql says what a window is). Each
-- request is placed by arithmetic on its offset from midnight (window k is [k * step, k * step + window)), not by
-- a range join, so the requests are read once and expanded stable_window_min / step_min times (6 by default). Only
-- the requests that can fall in the windows asked are expanded: tokenledger/capacity/day.py takes the windows' latency
-- percentiles a batch of windows at a time (sql/capacity/capacity_window_stats.sql).
CREATE OR REPLACE TEMP MACRO capacity_in_window(from_window, to_window) AS TABLE
WITH requests AS (
    SELECT * REPLACE (least(last_window, to_window) AS last_window)
    FROM capacity_requests
    WHERE offset_us >= from_window * step_us
      AND offset_us < least(last_window, to_window) * step_us + window_us  -- least first: no overflow
)
-- Window k holds offset t when k * step <= t < k * step + window: k from floor((t - window) / step) + 1 (at least
-- from_window) to floor(t / step) (at most the last window, and to_window). Offsets are non-negative, so // is a
-- floor there.
SELECT
    * EXCLUDE (offset_us, window_us, step_us, last_window),
    unnest(range(greatest(CASE WHEN offset_us < window_us THEN 0 ELSE (offset_us - window_us) // step_us + 1 END,
                          from_window),
                 least(offset_us // step_us, last_window) + 1)) AS window_index
FROM requests
