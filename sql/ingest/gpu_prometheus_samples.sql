-- Every sample of one Prometheus range-query result (GET /api/v1/query_range, resultType matrix) as text: one row
-- per [timestamp, "value"] pair of each series, with the series' labels by the names of the gpu_prometheus contract.
-- source_line numbers the samples in the file's order (series by series, value by value); `json_path` says where
-- the sample is in the document (result[i].values[j], from 0). Each value comes with its JSON kind (`<name>__kind`,
-- as contracts.JSON_KIND), so a label Prometheus writes as a string that the file holds as an object or an array
-- is never read as its JSON text: the contract quarantines it naming the label and its kind. Filled in: the file
-- (duck.sql_path), its size once decompressed and its compression ('gzip' or 'none').
WITH doc AS (
    SELECT data
    FROM read_json({path}, format = 'unstructured', records = true, compression = {compression},
                   maximum_object_size = {max_bytes},
                   columns = {'data': 'STRUCT(resultType VARCHAR, result STRUCT(metric MAP(VARCHAR, JSON), "values" JSON[])[])'})
),
series AS (
    SELECT s.series, s.series_no
    FROM doc, unnest(doc.data.result) WITH ORDINALITY AS s(series, series_no)
),
samples AS (
    SELECT series.metric AS labels, series_no, v.pair, v.value_no
    FROM series, unnest(series."values") WITH ORDINALITY AS v(pair, value_no)
),
sample_values AS (
    SELECT
        series_no,
        value_no,
        labels['__name__'] AS "metric",
        labels['UUID'] AS "UUID",
        labels['Hostname'] AS "Hostname",
        labels['gpu'] AS "gpu",
        labels['modelName'] AS "modelName",
        labels['namespace'] AS "namespace",
        labels['pod'] AS "pod",
        pair -> 0 AS "timestamp",
        pair -> 1 AS "value"
    FROM samples
)
SELECT
    row_number() OVER (ORDER BY series_no, value_no) AS source_line,
    format('result[{}].values[{}]', series_no - 1, value_no - 1) AS json_path,
    CASE WHEN json_type("metric") NOT IN ('OBJECT', 'ARRAY') THEN "metric" ->> '$' END AS metric__text,
    CASE json_type("metric") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("metric"), 'NULL')) END AS metric__kind,
    CASE WHEN json_type("UUID") NOT IN ('OBJECT', 'ARRAY') THEN "UUID" ->> '$' END AS UUID__text,
    CASE json_type("UUID") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("UUID"), 'NULL')) END AS UUID__kind,
    CASE WHEN json_type("Hostname") NOT IN ('OBJECT', 'ARRAY') THEN "Hostname" ->> '$' END AS Hostname__text,
    CASE json_type("Hostname") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("Hostname"), 'NULL')) END AS Hostname__kind,
    CASE WHEN json_type("gpu") NOT IN ('OBJECT', 'ARRAY') THEN "gpu" ->> '$' END AS gpu__text,
    CASE json_type("gpu") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("gpu"), 'NULL')) END AS gpu__kind,
    CASE WHEN json_type("modelName") NOT IN ('OBJECT', 'ARRAY') THEN "modelName" ->> '$' END AS modelName__text,
    CASE json_type("modelName") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("modelName"), 'NULL')) END AS modelName__kind,
    CASE WHEN json_type("namespace") NOT IN ('OBJECT', 'ARRAY') THEN "namespace" ->> '$' END AS namespace__text,
    CASE json_type("namespace") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("namespace"), 'NULL')) END AS namespace__kind,
    CASE WHEN json_type("pod") NOT IN ('OBJECT', 'ARRAY') THEN "pod" ->> '$' END AS pod__text,
    CASE json_type("pod") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("pod"), 'NULL')) END AS pod__kind,
    CASE WHEN json_type("timestamp") NOT IN ('OBJECT', 'ARRAY') THEN "timestamp" ->> '$' END AS timestamp__text,
    CASE json_type("timestamp") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("timestamp"), 'NULL')) END AS timestamp__kind,
    CASE WHEN json_type("value") NOT IN ('OBJECT', 'ARRAY') THEN "value" ->> '$' END AS value__text,
    CASE json_type("value") WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
        WHEN 'DOUBLE' THEN 'float' ELSE lower(nullif(json_type("value"), 'NULL')) END AS value__kind
FROM sample_values
