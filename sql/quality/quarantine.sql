-- quality.quarantine: every row of the day that broke a rule, from every source, with file, line and reason.
SELECT day, source, file, line, reason, raw
FROM read_parquet($files, union_by_name = true)
ORDER BY source, file, line
