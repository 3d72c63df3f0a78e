-- Every physical line of one JSON Lines file (plain or gzip) with its 1-based line number.
-- Read as one text column, so a malformed line becomes a quarantined row instead of failing the file;
-- NUL never occurs in JSON text, so it is a safe "no delimiter"; '\r\n' accepts both CRLF and LF endings.
-- A line longer than 16 MiB (max_line_size) makes the file unreadable: far beyond any real request record.
SELECT ordinality AS source_line, line
FROM read_csv(
    $file,
    columns = {'line': 'VARCHAR'},
    auto_detect = false,
    header = false,
    delim = chr(0),
    quote = '',
    escape = '',
    comment = '',
    new_line = '\r\n',
    strict_mode = false,
    max_line_size = 16777216
) WITH ORDINALITY
