-- The spans of an OTLP JSON file as records: one line of the OpenTelemetry Collector's file exporter is one
-- ExportTraceServiceRequest ({"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}]}), which
-- holds many spans; each span becomes one record {spanId, traceId, name, startTimeUnixNano, endTimeUnixNano,
-- status, attributes, resource}, its attribute list (key / value.stringValue | intValue | doubleValue |
-- boolValue) turned into one object by key, and the resource's attributes beside it. The line's number stays the
-- record's source_line, so a span is found by its file, line and spanId. A line that is not JSON keeps its
-- line_problem; a line with no span is one record of its own (`spans: none`), skipped as not a request: every
-- line is counted. The lines placeholder below: the file's lines as (source_line, line_problem, j).
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
    -- a key/value list as one object; an attribute written twice keeps its last value
    SELECT
        source_line,
        span,
        (SELECT json_group_object(a ->> 'key', coalesce(a -> '$.value.stringValue', a -> '$.value.intValue',
                                                        a -> '$.value.doubleValue', a -> '$.value.boolValue'))
         FROM (SELECT unnest(json_extract(span, '$.attributes[*]')) AS a)) AS attributes,
        (SELECT json_group_object(a ->> 'key', coalesce(a -> '$.value.stringValue', a -> '$.value.intValue',
                                                        a -> '$.value.doubleValue', a -> '$.value.boolValue'))
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
SELECT l.source_line, l.line_problem, CASE WHEN l.line_problem IS NULL THEN '{"spans": "none"}'::JSON END AS j
FROM lines AS l
WHERE l.line_problem IS NOT NULL OR l.source_line NOT IN (SELECT source_line FROM spans)
