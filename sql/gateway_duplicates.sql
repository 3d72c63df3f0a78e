-- request_ids seen more than once among valid rows: the copy kept is the one that finished last
-- (received_at + e2e_ms), ties to the last one read (file order, then line); the others are merged into it.
SELECT
    request_id,
    count(*) - 1 AS merged,
    arg_max({'file_index': file_index, 'source_line': source_line},
            (finished_at_ms, file_index, source_line)) AS kept
FROM checked_gateway
WHERE reason IS NULL
GROUP BY request_id
HAVING count(*) > 1
