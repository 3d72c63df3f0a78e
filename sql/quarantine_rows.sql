-- Rows of one stage and day that broke a rule, with their source, file, line, reason and the row's kept fields.
SELECT $day::DATE AS day, source, source_file AS file, source_line AS line, reason, raw
FROM {relation}
WHERE reason IS NOT NULL
ORDER BY file_index, source_line
