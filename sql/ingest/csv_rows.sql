-- Every line of one CSV file after its header, as text, with its line number (the header is line 1), a
-- fingerprint of the whole row (a FOCUS row delivered twice in two files is merged by it) and, for a line
-- DuckDB's CSV reader rejected, why. `rows` holds the parsed rows with their record number, `rejects`
-- DuckDB's rejects (one row per error), `columns` the header's columns (tokenledger/ingest/readers.py csv_rows).
-- Good rows are numbered around the rejected lines: the k-th good row is the k-th line after the header that was
-- not rejected, found by an ASOF join on the number of good lines before each rejected one.
WITH rejected AS (
    SELECT
        line,
        string_agg(DISTINCT CASE error_type
            WHEN 'MISSING COLUMNS' THEN format('has fewer fields than the header''s {}',
                                               regexp_extract(error_message, 'Expected Number of Columns: (\d+)', 1))
            WHEN 'TOO MANY COLUMNS' THEN format('has more fields than the header''s {}',
                                                regexp_extract(error_message, 'Expected Number of Columns: (\d+)', 1))
            WHEN 'INVALID ENCODING' THEN 'is not UTF-8 text: save the export as UTF-8'
            WHEN 'INVALID UNICODE' THEN 'is not UTF-8 text: save the export as UTF-8'
            WHEN 'UNQUOTED VALUE' THEN 'has a quote inside an unquoted field'
            WHEN 'LINE SIZE OVER MAXIMUM' THEN 'is longer than 16 MiB'
            ELSE 'cannot be parsed: ' || lower(error_type) || ', ' || error_message
        END, '; ') AS problem
    FROM {rejects}
    GROUP BY line
), ranked AS (
    SELECT line::BIGINT AS line, problem, row_number() OVER (ORDER BY line) AS rank, line - 1 - rank AS good_before
    FROM rejected
), steps AS (
    SELECT good_before, max(rank) AS rejected_so_far FROM ranked GROUP BY good_before
)
SELECT
    (r.record + 1 + coalesce(s.rejected_so_far, 0))::BIGINT AS source_line,
    md5(list_value({columns})::VARCHAR) AS row_fingerprint,
    NULL::VARCHAR AS line_problem,
    {columns}
FROM {rows} AS r
ASOF LEFT JOIN steps AS s ON r.record > s.good_before
UNION ALL
SELECT line::BIGINT, NULL::VARCHAR, 'line ' || problem, {nulls}
FROM ranked
