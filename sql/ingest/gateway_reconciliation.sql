-- Per request source of the day: rows read, accepted, quarantined, duplicates merged, records skipped as not
-- requests and failed calls that name no model (failures_no_model, with their kinds in the notes), each counted on
-- its own; and, per file, the records whose times were written without a zone and read as UTC (read, quarantined and skipped from the checked rows, accepted from the
-- core.gateway_requests file just written, merged as the valid copies of a request id that were not kept), so that
-- a source that does not balance shows; and the notes its files' own totals gave (source_note), one per file.
-- $sources: the sources to report (the canonical gateway always, an adapter when its folder exists).
WITH sources AS (
    SELECT unnest($sources::VARCHAR[]) AS source
), checked AS (
    SELECT
        c.source,
        count(*) AS rows_read,
        count(*) FILTER (WHERE c.reason IS NOT NULL AND NOT c.skipped) AS rows_quarantined,
        count(*) FILTER (WHERE c.skipped AND NOT c.failure_no_model) AS skipped_not_request,
        count(*) FILTER (WHERE c.failure_no_model) AS failures_no_model,
        string_agg(DISTINCT c.source_note, '; ' ORDER BY c.source_note) AS notes,
        count(*) FILTER (WHERE c.reason IS NULL AND d.request_id IS NOT NULL
                           AND NOT (c.file_index = d.kept.file_index AND c.source_line = d.kept.source_line))
            AS duplicates_merged
    FROM checked_gateway AS c
    LEFT JOIN gateway_duplicates AS d ON d.request_id = c.request_id AND c.reason IS NULL
    GROUP BY c.source
), kinds AS (
    -- the failed calls of no known model by kind and the provider's error: "rejected 2 (HTTP 429 rate_limit_error)"
    SELECT source, format('failures that name no model: {}', string_agg(kind, ', ' ORDER BY kind)) AS note
    FROM (
        SELECT c.source, format('{} {} ({})', c.status, count(*),
                                coalesce(nullif(concat_ws(' ', 'HTTP ' || c.http_status, c.error_type), ''),
                                         'no status or error type')) AS kind
        FROM checked_gateway AS c
        WHERE c.failure_no_model
        GROUP BY c.source, c.status, c.http_status, c.error_type
    )
    GROUP BY source
), zones AS (
    -- per file: the records that held a time without a zone (zoneless_fields: the source's fields), read as UTC
    SELECT source, string_agg(note, '; ' ORDER BY note) AS note
    FROM (
        SELECT
            source,
            format('{}: {} record(s) with a time written without a zone ({}), read as UTC; if the source writes local '
                   'time, its figures are shifted: write times with their offset (e.g. 2026-11-16T10:00:00Z)',
                   source_file, count(DISTINCT source_line), string_agg(DISTINCT field, ', ' ORDER BY field)) AS note
        FROM (
            SELECT source, source_file, source_line, unnest(string_split(zoneless_fields, ', ')) AS field
            FROM checked_gateway
            WHERE zoneless_fields IS NOT NULL AND is_record
        )
        GROUP BY source, source_file
    )
    GROUP BY source
), accepted AS (
    SELECT source, count(*) AS rows_accepted FROM read_parquet({accepted_file}) GROUP BY source
)
SELECT
    s.source,
    coalesce(c.rows_read, 0) AS rows_read,
    coalesce(a.rows_accepted, 0) AS rows_accepted,
    coalesce(c.rows_quarantined, 0) AS rows_quarantined,
    coalesce(c.duplicates_merged, 0) AS duplicates_merged,
    coalesce(c.skipped_not_request, 0) AS skipped_not_request,
    coalesce(c.failures_no_model, 0) AS failures_no_model,
    nullif(concat_ws('; ', c.notes, k.note, z.note), '') AS notes
FROM sources AS s
LEFT JOIN checked AS c USING (source)
LEFT JOIN kinds AS k USING (source)
LEFT JOIN zones AS z USING (source)
LEFT JOIN accepted AS a USING (source)
ORDER BY s.source
