-- Every row of one FOCUS CSV export as text, with its line number (the header is line 1) and a fingerprint
-- of the whole row, used to merge a row delivered twice in two files. NULL and empty strings are missing.
SELECT
    ordinality + 1 AS source_line,
    md5(list_value(*COLUMNS(* EXCLUDE (ordinality)))::VARCHAR) AS row_fingerprint,
    COLUMNS(* EXCLUDE (ordinality))
FROM read_csv($file, header = true, all_varchar = true, nullstr = ['NULL', ''], max_line_size = 16777216)
    WITH ORDINALITY
