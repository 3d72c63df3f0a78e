-- Every row of one FOCUS Parquet export as text, with its 1-based row number and a fingerprint of the whole row.
SELECT
    source_line,
    md5(list_value(*COLUMNS(* EXCLUDE (source_line)))::VARCHAR) AS row_fingerprint,
    COLUMNS(* EXCLUDE (source_line))
FROM (
    SELECT file_row_number + 1 AS source_line, COLUMNS(* EXCLUDE (file_row_number))::VARCHAR
    FROM read_parquet($file, file_row_number = true)
)
