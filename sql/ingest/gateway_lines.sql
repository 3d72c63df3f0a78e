-- Every physical line of JSON Lines files (file_index: which of them), as read by tokenledger/ingest/lines.py (`lines`: source_line, the line's
-- bytes, and a problem the reader already found), with its text and, when it cannot be a request record, why.
-- Nothing is filtered: a line that is not UTF-8, holds NUL bytes, is empty or is not a JSON object is a row whose
-- line_problem says so, and is quarantined with its number; so is a line its reader cannot parse (see below).
SELECT
    source_line,
    text,
    CASE
        WHEN problem IS NOT NULL THEN problem
        WHEN text IS NULL THEN 'not UTF-8 text: save the file as UTF-8'
        WHEN contains(text, chr(0)) THEN 'holds NUL bytes, which JSON text never does'
        -- Only a line that starts with whitespace is trimmed: trimming every line cost more than the JSON checks.
        WHEN text = '' OR (left(text, 1) IN (' ', chr(9), chr(13), chr(10))
                           AND ltrim(text, ' ' || chr(9) || chr(13) || chr(10)) = '') THEN 'empty line: no record'
        -- A JSON object starts with '{' after any whitespace. A line that does is parsed once, by its reader
        -- (try(json_transform(...)) or try(text::JSON)), which calls it 'line is not valid JSON' when the parse
        -- fails (READ_LINE_PROBLEM in tokenledger/ingest/readers.py): a json_valid here parsed every line twice. Only a
        -- line that cannot be an object is parsed here, to say what it is.
        WHEN left(text, 1) <> '{' AND left(ltrim(text, ' ' || chr(9) || chr(13) || chr(10)), 1) <> '{'
        THEN CASE WHEN NOT json_valid(text) THEN 'line is not valid JSON'
                  ELSE format('line is a JSON {}, not an object',
                       CASE json_type(text) WHEN 'ARRAY' THEN 'array' WHEN 'VARCHAR' THEN 'string'
                                            WHEN 'BOOLEAN' THEN 'boolean' WHEN 'NULL' THEN 'null' ELSE 'number' END)
             END
    END AS line_problem,
    file_index
FROM (SELECT source_line, problem, try(decode(line)) AS text, file_index FROM {lines})
