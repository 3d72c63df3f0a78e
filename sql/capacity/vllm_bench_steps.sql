-- The steps of a vllm-bench load-test run, one per result file (vllm_bench_files): ranked by request_rate from 0,
-- the first starting at the run's start and each next one where the previous ended, lasting its file's duration
-- (to the microsecond). cfg_loadtest_step's columns, and the file each step comes from.
WITH files AS (
    SELECT
        file_index,
        source_file,
        request_rate,
        round(duration * 1e6)::BIGINT AS duration_us,
        requests,
        has_start_times
    FROM vllm_bench_files
),
ranked AS (
    SELECT
        *,
        row_number() OVER by_rate - 1 AS step_index,
        coalesce(sum(duration_us) OVER (by_rate ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::BIGINT
            AS offset_us
    FROM files
    WINDOW by_rate AS (ORDER BY request_rate, file_index)
)
SELECT
    r.run_id,
    f.step_index::INTEGER AS step_index,
    f.request_rate AS arrival_rate,
    r.start + to_microseconds(f.offset_us) AS step_start,
    r.start + to_microseconds(f.offset_us + f.duration_us) AS step_end,
    f.file_index,
    f.source_file,
    f.duration_us / 1e6 AS duration,
    f.requests,
    f.has_start_times
FROM ranked AS f
CROSS JOIN cfg_loadtest_run AS r
ORDER BY f.step_index
