-- Billing rows identical in every column (not only the contract's) delivered in more than one file, as when an
-- export is dropped twice under two names. Per fingerprint the copies of one file are kept (the file with most
-- copies, then the first read); copies in other files are merged. Copies within one file are all kept: the
-- export itself lists them as separate charges.
WITH per_file AS (
    SELECT row_fingerprint, file_index, count(*) AS copies
    FROM billing_day
    WHERE reason IS NULL
    GROUP BY row_fingerprint, file_index
)
SELECT
    row_fingerprint,
    arg_max(file_index, (copies, -file_index)) AS kept_file_index,
    sum(copies) - max(copies) AS merged
FROM per_file
GROUP BY row_fingerprint
HAVING count(*) > 1
