-- The staged GPU telemetry rows of one day (staged_gpu: a Prometheus sample or an nvidia-smi line each, typed and
-- judged by its form's contract) with what becomes of each: quarantined (reason), skipped (a NaN sample, a series
-- of a metric not read, a repeated header line, or a sample outside the folder's UTC day: skip_reason) or merged into
-- an earlier copy (duplicate: the same GPU, time and measures with the same values, the first in the day's file order
-- kept). Copies of one GPU and time whose values differ (two hosts reporting one GPU, two exporters disagreeing) are
-- all quarantined, each naming the first copy: which one is right cannot be told, so none is kept silently.
WITH judged AS (
    SELECT
        * REPLACE (
            skipped OR (reason IS NULL AND (sampled_at < $day_start::TIMESTAMPTZ
                                            OR sampled_at >= $day_end::TIMESTAMPTZ)) AS skipped,
            CASE WHEN skipped THEN skip_reason
                 WHEN reason IS NULL AND (sampled_at < $day_start::TIMESTAMPTZ OR sampled_at >= $day_end::TIMESTAMPTZ)
                 THEN 'outside the folder''s UTC day' END AS skip_reason)
    FROM staged_gpu
),
copies AS (
    SELECT
        *,
        reason IS NULL AND NOT skipped AND (
            max(power_w) OVER w IS DISTINCT FROM min(power_w) OVER w
            OR max(gpu_util_pct) OVER w IS DISTINCT FROM min(gpu_util_pct) OVER w
            OR max(sm_active) OVER w IS DISTINCT FROM min(sm_active) OVER w
            OR max(fb_used_mib) OVER w IS DISTINCT FROM min(fb_used_mib) OVER w) AS conflicting,
        first_value(source_file) OVER w AS first_file,
        first_value(source_line) OVER w AS first_line,
        row_number() OVER w AS copy_no
    FROM judged
    WINDOW w AS (
        PARTITION BY reason IS NULL AND NOT skipped, gpu_uuid, sampled_at, power_w IS NULL, gpu_util_pct IS NULL,
                     sm_active IS NULL, fb_used_mib IS NULL
        ORDER BY file_index, source_line ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
)
SELECT
    * EXCLUDE (conflicting, first_file, first_line, copy_no) REPLACE (
        CASE WHEN conflicting
             THEN format('gpu_uuid {} at {}: its copies have other values (the first: {} line {}); conflicting '
                         'samples are all quarantined, none is kept', gpu_uuid,
                         strftime(sampled_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), first_file, first_line)
             ELSE reason END AS reason),
    reason IS NULL AND NOT skipped AND NOT conflicting AND copy_no > 1 AS duplicate
FROM copies
