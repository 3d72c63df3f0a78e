-- Rows of one source and day that broke a rule, with file, line, reason and the row's contract fields.
SELECT $day::DATE AS day, $source AS source, source_file AS file, source_line AS line, reason, raw
FROM {relation}
WHERE reason IS NOT NULL
ORDER BY file_index, source_line
