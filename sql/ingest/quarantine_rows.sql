-- Rows of one stage and day that broke a rule, with their source, file, line, reason and the row's kept fields.
-- A record skipped as not a request (a Claude Code prompt, a Codex session's context) broke none: it is counted in
-- the reconciliation's skipped_not_request, not here.
SELECT $day::DATE AS day, source, source_file AS file, source_line AS line, reason, raw
FROM {relation}
WHERE reason IS NOT NULL AND NOT skipped
ORDER BY file_index, source_line
