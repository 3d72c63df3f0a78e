-- Every row of one Parquet gateway file with its 1-based row number; columns are typed later from the contract.
SELECT file_row_number + 1 AS source_line, *
FROM read_parquet($file, file_row_number = true)
