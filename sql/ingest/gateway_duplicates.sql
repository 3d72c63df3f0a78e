-- request_ids seen more than once among valid rows: the copy kept is the one that finished last
-- (received_at + e2e_ms), ties to the last one read (file order, then line); the others are merged into it.
-- The repeated ids are first found by their 64-bit hash (a collision only brings a few more rows to the second,
-- exact grouping, which drops them): grouping the whole day by the id's text held every id and its arg_max state,
-- 450 MB of peak RSS for the 1M-request day (0.55 s), 265 MB this way (0.24 s).
WITH repeated AS (
    SELECT hash(request_id) AS key
    FROM checked_gateway
    WHERE reason IS NULL
    GROUP BY key
    HAVING count(*) > 1
)
SELECT
    request_id,
    count(*) - 1 AS merged,
    arg_max({'file_index': file_index, 'source_line': source_line},
            (finished_at_ms, file_index, source_line)) AS kept
FROM checked_gateway
WHERE reason IS NULL
  AND hash(request_id) IN (SELECT key FROM repeated)
GROUP BY request_id
HAVING count(*) > 1
