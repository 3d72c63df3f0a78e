-- One `vllm bench serve --save-result --save-detailed` result file of a vllm-bench load-test run: the facts that
-- make it a step (request_rate, duration, its number of requests) and `problems`, every reason it cannot be one
-- (empty when it can). Only the keys named here are read; generated_texts, the model's output, never is. The
-- vLLM version and each rule are explained in tokenledger/capacity/loadtest.py.
WITH doc AS (
    SELECT
        json_valid(content) AS is_json,
        CASE WHEN json_valid(content) THEN json_type(content) END AS doc_type,
        -- json_transform is fed NULL for anything but an object: DuckDB may evaluate both branches of a CASE.
        json_transform(CASE WHEN json_valid(content) AND json_type(content) = 'OBJECT' THEN content END,
                       '{"request_rate": "JSON", "duration": "JSON", "completed": "JSON", "max_concurrency": "JSON",
                         "ramp_up_strategy": "JSON", "input_lens": "JSON", "output_lens": "JSON", "ttfts": "JSON",
                         "itls": "JSON", "errors": "JSON", "start_times": "JSON", "latencies": "JSON",
                         "queue_times": "JSON"}') AS j
    FROM read_text($file)
),
scalars AS (
    SELECT
        is_json,
        doc_type,
        j,
        CASE WHEN json_type(j.request_rate) IN ('DOUBLE', 'BIGINT', 'UBIGINT')
             THEN try_cast(j.request_rate AS DOUBLE) END AS request_rate,
        CASE WHEN json_type(j.duration) IN ('DOUBLE', 'BIGINT', 'UBIGINT')
             THEN try_cast(j.duration AS DOUBLE) END AS duration,
        CASE WHEN json_type(j.completed) IN ('BIGINT', 'UBIGINT') THEN try_cast(j.completed AS BIGINT) END AS completed,
        CASE WHEN json_type(j.input_lens) = 'ARRAY' THEN json_array_length(j.input_lens) END AS requests
    FROM doc
),
-- The per-request lists, parallel by request index: required ones first, then those only some versions write.
lists AS (
    SELECT
        l.name,
        l.required,
        l.position,
        CASE json_type(l.value)
            WHEN 'VARCHAR' THEN 'string' WHEN 'OBJECT' THEN 'object' WHEN 'BOOLEAN' THEN 'boolean'
            WHEN 'ARRAY' THEN 'list' WHEN 'BIGINT' THEN 'number' WHEN 'UBIGINT' THEN 'number' WHEN 'DOUBLE' THEN 'number'
        END AS kind,
        CASE WHEN json_type(l.value) = 'ARRAY' THEN json_array_length(l.value) END AS entries
    FROM (
        SELECT unnest([
            {'name': 'input_lens', 'required': true, 'position': 1, 'value': j.input_lens},
            {'name': 'output_lens', 'required': true, 'position': 2, 'value': j.output_lens},
            {'name': 'ttfts', 'required': true, 'position': 3, 'value': j.ttfts},
            {'name': 'itls', 'required': true, 'position': 4, 'value': j.itls},
            {'name': 'errors', 'required': true, 'position': 5, 'value': j.errors},
            {'name': 'start_times', 'required': false, 'position': 6, 'value': j.start_times},
            {'name': 'latencies', 'required': false, 'position': 7, 'value': j.latencies},
            {'name': 'queue_times', 'required': false, 'position': 8, 'value': j.queue_times}
        ]) AS l
        FROM scalars
        WHERE doc_type = 'OBJECT'
    )
),
list_problems AS (
    SELECT
        list(problem ORDER BY position) FILTER (WHERE problem IS NOT NULL) AS problems,
        bool_or(name = 'start_times' AND entries IS NOT NULL) AS has_start_times,
        bool_or(name = 'latencies' AND entries IS NOT NULL) AS has_latencies,
        bool_or(name = 'queue_times' AND entries IS NOT NULL) AS has_queue_times
    FROM (
        SELECT
            l.name,
            l.position,
            l.entries,
            CASE
                WHEN l.kind IS NULL AND l.required
                THEN format('{}: required but missing (vllm bench serve writes the per-request lists only with '
                            '--save-detailed)', l.name)
                WHEN l.kind IS NULL THEN NULL
                WHEN l.entries IS NULL
                THEN format('{}: a JSON {} is not a list with one entry per request', l.name, l.kind)
                WHEN l.entries <> s.requests
                THEN format('{}: {} entries, but input_lens has {}: the per-request lists must be parallel, one '
                            'entry per request', l.name, l.entries, s.requests)
            END AS problem
        FROM lists AS l
        CROSS JOIN scalars AS s
    )
)
SELECT
    $file_index::INTEGER AS file_index,
    $source_file AS source_file,
    s.request_rate,
    s.duration,
    s.requests,
    s.completed,
    coalesce(p.has_start_times, false) AS has_start_times,
    coalesce(p.has_latencies, false) AS has_latencies,
    coalesce(p.has_queue_times, false) AS has_queue_times,
    CASE
        WHEN NOT s.is_json
        THEN ['the file is not one JSON document (vllm bench serve --append-result writes one result per line: '
              || 'split such a file into one file per request rate)']
        WHEN s.doc_type <> 'OBJECT'
        THEN [format('the file holds a JSON {}, not the object vllm bench serve writes (a *.pytorch.json sidecar '
                     'is not a result)', lower(s.doc_type))]
        ELSE list_filter([
            CASE
                WHEN s.j.request_rate IS NULL THEN 'request_rate: required but missing'
                WHEN s.j.request_rate ->> '$' = 'inf'
                THEN 'request_rate: inf (every request sent at once) is not an arrival rate: run vllm bench serve '
                     || 'with a finite --request-rate'
                WHEN s.request_rate IS NULL THEN format('request_rate: {} is not a number', s.j.request_rate ->> '$')
                WHEN NOT isfinite(s.request_rate) OR s.request_rate <= 0
                THEN format('request_rate: {} is not above 0', s.request_rate)
            END,
            CASE
                WHEN s.j.ramp_up_strategy IS NOT NULL
                THEN format('ramp_up_strategy: {} changes the rate during the run, so the file is not one '
                            'arrival-rate step: run one file per --request-rate, without ramp-up',
                            s.j.ramp_up_strategy ->> '$')
            END,
            CASE
                WHEN s.j.duration IS NULL THEN 'duration: required but missing'
                WHEN s.duration IS NULL THEN format('duration: {} is not a number of seconds', s.j.duration ->> '$')
                WHEN NOT isfinite(s.duration) OR s.duration <= 0 THEN format('duration: {} is not above 0', s.duration)
            END,
            CASE
                WHEN s.j.completed IS NOT NULL AND s.completed IS NULL
                THEN format('completed: {} is not a count of requests', s.j.completed ->> '$')
            END,
            CASE
                WHEN s.j.max_concurrency IS NOT NULL AND NOT coalesce(p.has_queue_times, false)
                THEN format('max_concurrency: {} held requests back in the client, and the file has no queue_times '
                            '(written from vLLM 0.31) to say for how long, so TTFT from arrival is unknown: run '
                            'without --max-concurrency, or with vLLM 0.31 or later', s.j.max_concurrency ->> '$')
            END,
            CASE WHEN s.requests = 0 THEN 'input_lens: the file has no requests' END
        ] || coalesce(p.problems, []), lambda x: x IS NOT NULL)
    END AS problems
FROM scalars AS s
LEFT JOIN list_problems AS p ON true
