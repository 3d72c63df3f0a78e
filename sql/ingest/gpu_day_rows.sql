-- The staged GPU telemetry rows of one day (staged_gpu: a Prometheus sample or an nvidia-smi line each, typed and
-- judged by its form's contract) with what becomes of each: quarantined (reason), skipped (a NaN sample, a series
-- of a metric not read, a repeated header line, or a sample outside the folder's UTC day: skip_reason) or merged into
-- an earlier copy (duplicate: the same GPU, time and measures, the first in the day's file order kept).
WITH judged AS (
    SELECT
        * REPLACE (
            skipped OR (reason IS NULL AND (sampled_at < $day_start::TIMESTAMPTZ
                                            OR sampled_at >= $day_end::TIMESTAMPTZ)) AS skipped,
            CASE WHEN skipped THEN skip_reason
                 WHEN reason IS NULL AND (sampled_at < $day_start::TIMESTAMPTZ OR sampled_at >= $day_end::TIMESTAMPTZ)
                 THEN 'outside the folder''s UTC day' END AS skip_reason)
    FROM staged_gpu
)
SELECT
    *,
    reason IS NULL AND NOT skipped AND row_number() OVER (
        PARTITION BY reason IS NULL AND NOT skipped, gpu_uuid, sampled_at, power_w IS NULL, gpu_util_pct IS NULL,
                     sm_active IS NULL, fb_used_mib IS NULL
        ORDER BY file_index, source_line) > 1 AS duplicate
FROM judged
