-- Every sample of one Prometheus range-query result (GET /api/v1/query_range, resultType matrix) as text: one row
-- per [timestamp, "value"] pair of each series, with the series' labels by the names of the gpu_prometheus contract.
-- source_line numbers the samples in the file's order (series by series, value by value); `json_path` says where
-- the sample is in the document (result[i].values[j], from 0). Filled in: the file (duck.sql_path), its size once
-- decompressed and its compression ('gzip' or 'none').
WITH doc AS (
    SELECT data
    FROM read_json({path}, format = 'unstructured', records = true, compression = {compression},
                   maximum_object_size = {max_bytes},
                   columns = {'data': 'STRUCT(resultType VARCHAR, result STRUCT(metric MAP(VARCHAR, VARCHAR), "values" JSON[])[])'})
),
series AS (
    SELECT s.series, s.series_no
    FROM doc, unnest(doc.data.result) WITH ORDINALITY AS s(series, series_no)
),
samples AS (
    SELECT series.metric AS labels, series_no, v.pair, v.value_no
    FROM series, unnest(series."values") WITH ORDINALITY AS v(pair, value_no)
)
SELECT
    row_number() OVER (ORDER BY series_no, value_no) AS source_line,
    format('result[{}].values[{}]', series_no - 1, value_no - 1) AS json_path,
    labels['__name__'] AS metric__text,
    labels['UUID'] AS UUID__text,
    labels['Hostname'] AS Hostname__text,
    labels['gpu'] AS gpu__text,
    labels['modelName'] AS modelName__text,
    labels['namespace'] AS namespace__text,
    labels['pod'] AS pod__text,
    pair ->> 0 AS timestamp__text,
    pair ->> 1 AS value__text
FROM samples
