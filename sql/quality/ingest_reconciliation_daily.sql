-- quality.ingest_reconciliation_daily: per day and source, rows read = accepted + quarantined + duplicates merged +
-- records skipped as not requests + failed calls that name no model; notes: what a source's own totals say that its
-- rows do not, and the kinds of those failures.
SELECT
    day,
    source,
    rows_read,
    rows_accepted,
    rows_quarantined,
    duplicates_merged,
    -- a part written before the column existed skipped nothing
    coalesce(skipped_not_request, 0) AS skipped_not_request,
    coalesce(failures_no_model, 0) AS failures_no_model,
    rows_read = rows_accepted + rows_quarantined + duplicates_merged + coalesce(skipped_not_request, 0)
        + coalesce(failures_no_model, 0) AS balanced,
    notes
FROM read_parquet($files, union_by_name = true)
ORDER BY source
