-- The spans of an OTLP JSON file as records: one line of the OpenTelemetry Collector's file exporter is one
-- ExportTraceServiceRequest ({"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}]}), which
-- holds many spans; each span becomes one record {spanId, traceId, name, startTimeUnixNano, endTimeUnixNano,
-- status, attributes, resource}, its attribute list (key / value.stringValue | intValue | doubleValue |
-- boolValue) turned into one object by key, and the resource's attributes beside it. The line's number stays the
-- record's source_line, so a span is found by its file, line and spanId. An attribute whose value is of another
-- OTLP type (kvlistValue, bytesValue, arrayValue) is kept as a JSON object (an array for arrayValue), never read as
-- absent: the contract's type rule then quarantines a model call that has one (sql/ingest/adapt_otel.sql names the
-- OTLP types). A line that is not JSON keeps its line_problem, and so does a JSON object that is no export: one
-- without resourceSpans (nor resourceMetrics, resourceLogs or resourceProfiles, another signal's export), or whose
-- resourceSpans is not a list. An export with no span (resourceSpans empty or null, or another signal's) is one
-- record of its own (`spans: none`), skipped as not a request: every line is counted. The lines placeholder below:
-- the file's lines as (source_line, line_problem, j).
WITH lines AS MATERIALIZED (  -- the lines are a stream, read once
    SELECT source_line, line_problem, j FROM ({lines})
), resources AS (
    SELECT source_line, unnest(json_extract(j, '$.resourceSpans[*]')) AS r
    FROM lines
    WHERE line_problem IS NULL
), scopes AS (
    SELECT source_line, json_extract(r, '$.resource.attributes[*]') AS resource,
           unnest(json_extract(r, '$.scopeSpans[*]')) AS s
    FROM resources
), spans AS (
    SELECT source_line, resource, unnest(json_extract(s, '$.spans[*]')) AS span
    FROM scopes
), attributes AS (
    -- a key/value list as one object; an attribute written twice keeps its last value. A value of another OTLP type
    -- is kept as its value object ({"kvlistValue": ...}, {"bytesValue": ...}), in an array for an arrayValue
    SELECT
        source_line,
        span,
        (SELECT json_group_object(a ->> 'key', coalesce(
                     a -> '$.value.stringValue', a -> '$.value.intValue', a -> '$.value.doubleValue',
                     a -> '$.value.boolValue',
                     CASE WHEN (a -> '$.value.arrayValue') IS NOT NULL THEN json_array(a -> '$.value')
                          WHEN json_type(a -> '$.value') = 'OBJECT' AND len(json_keys(a -> '$.value')) > 0
                          THEN a -> '$.value' END))
         FROM (SELECT unnest(json_extract(span, '$.attributes[*]')) AS a)) AS attributes,
        (SELECT json_group_object(a ->> 'key', coalesce(
                     a -> '$.value.stringValue', a -> '$.value.intValue', a -> '$.value.doubleValue',
                     a -> '$.value.boolValue',
                     CASE WHEN (a -> '$.value.arrayValue') IS NOT NULL THEN json_array(a -> '$.value')
                          WHEN json_type(a -> '$.value') = 'OBJECT' AND len(json_keys(a -> '$.value')) > 0
                          THEN a -> '$.value' END))
         FROM (SELECT unnest(resource) AS a)) AS resource
    FROM spans
)
SELECT
    source_line,
    NULL::VARCHAR AS line_problem,
    json_object('spanId', span -> 'spanId', 'traceId', span -> 'traceId', 'name', span -> 'name',
                'startTimeUnixNano', span -> 'startTimeUnixNano', 'endTimeUnixNano', span -> 'endTimeUnixNano',
                'status', span -> 'status', 'attributes', coalesce(attributes, '{}'::JSON),
                'resource', coalesce(resource, '{}'::JSON)) AS j
FROM attributes
UNION ALL
SELECT source_line, line_problem, CASE WHEN line_problem IS NULL THEN '{"spans": "none"}'::JSON END AS j
FROM (
    SELECT
        l.source_line,
        coalesce(l.line_problem, CASE
            WHEN NOT list_has_any(json_keys(l.j),
                                  ['resourceSpans', 'resourceMetrics', 'resourceLogs', 'resourceProfiles'])
                THEN 'resourceSpans: required but missing: the line is a JSON object but not an OTLP export '
                     '(ExportTraceServiceRequest)'
            WHEN json_type(l.j, '$.resourceSpans') NOT IN ('ARRAY', 'NULL')
                THEN format('resourceSpans: {}, not a list: the line is not an OTLP trace export',
                            CASE json_type(l.j, '$.resourceSpans') WHEN 'OBJECT' THEN 'an object'
                                 WHEN 'VARCHAR' THEN 'a string' WHEN 'BOOLEAN' THEN 'a boolean' ELSE 'a number' END)
        END) AS line_problem
    FROM lines AS l
    WHERE l.line_problem IS NOT NULL OR l.source_line NOT IN (SELECT source_line FROM spans)
)
