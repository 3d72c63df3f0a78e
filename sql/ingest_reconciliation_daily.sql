-- quality.ingest_reconciliation_daily: per day and source, rows read = accepted + quarantined + duplicates merged.
SELECT
    day,
    source,
    rows_read,
    rows_accepted,
    rows_quarantined,
    duplicates_merged,
    rows_read = rows_accepted + rows_quarantined + duplicates_merged AS balanced
FROM read_parquet($files, union_by_name = true)
ORDER BY source
