-- The requests of one vllm bench serve result file as gateway_request text and value kinds (`<field>__text`,
-- `<field>__kind`), one row per index of its per-request lists, for the gateway contract to type and judge.
-- source_line is the index (from 0); line_problem says why an entry cannot be a request at all (a list entry of
-- the wrong type). sql/capacity/vllm_bench_file.sql has already checked that the lists are there and parallel. Each
-- mapping choice, and the vLLM version it follows, is explained in tokenledger/capacity/loadtest.py.
WITH step AS (
    SELECT s.step_start, s.duration, s.requests, r.run_id, r.model, r.deployment_id
    FROM vllm_bench_steps AS s
    CROSS JOIN cfg_loadtest_run AS r
    WHERE s.file_index = $file_index
),
doc AS (
    SELECT json_transform(content, '{"input_lens": "JSON", "output_lens": "JSON", "ttfts": "JSON", "itls": "JSON",
                                     "errors": "JSON", "start_times": "JSON", "latencies": "JSON",
                                     "queue_times": "JSON"}') AS j
    FROM read_text($file)
),
-- The parallel lists unnested side by side: row i holds entry i of each (a list the file lacks gives NULLs).
entries AS (
    SELECT
        generate_subscripts(json_extract(j.input_lens, '$[*]'), 1) - 1 AS i,
        unnest(json_extract(j.input_lens, '$[*]')) AS input_len,
        unnest(json_extract(j.output_lens, '$[*]')) AS output_len,
        unnest(json_extract(j.ttfts, '$[*]')) AS ttft,
        unnest(json_extract(j.itls, '$[*]')) AS itl,
        unnest(json_extract(j.errors, '$[*]')) AS error,
        unnest(json_extract(j.start_times, '$[*]')) AS start_time,
        unnest(json_extract(j.latencies, '$[*]')) AS latency,
        unnest(json_extract(j.queue_times, '$[*]')) AS queue_time,
        j.latencies IS NOT NULL AS has_latencies,
        j.queue_times IS NOT NULL AS has_queue_times,
        j.start_times IS NOT NULL AS has_start_times
    FROM doc
),
-- Seconds as DOUBLE where an entry is a JSON number, NULL otherwise; the kind of each entry, for messages.
seconds AS (
    SELECT
        *,
        CASE WHEN json_type(ttft) IN ('DOUBLE', 'BIGINT', 'UBIGINT') THEN try_cast(ttft AS DOUBLE) END AS ttft_s,
        CASE WHEN json_type(start_time) IN ('DOUBLE', 'BIGINT', 'UBIGINT')
             THEN try_cast(start_time AS DOUBLE) END AS start_s,
        CASE WHEN json_type(latency) IN ('DOUBLE', 'BIGINT', 'UBIGINT') THEN try_cast(latency AS DOUBLE) END AS latency_s,
        CASE WHEN json_type(queue_time) IN ('DOUBLE', 'BIGINT', 'UBIGINT')
             THEN try_cast(queue_time AS DOUBLE) END AS queue_s,
        list_transform(json_extract(itl, '$[*]'),
                       lambda g: CASE WHEN json_type(g) IN ('DOUBLE', 'BIGINT', 'UBIGINT') THEN try_cast(g AS DOUBLE) END)
            AS gaps,
        CASE json_type(error) WHEN 'VARCHAR' THEN error ->> '$' END AS error_text,
        CASE json_type(input_len)
            WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
            WHEN 'DOUBLE' THEN 'float' WHEN 'OBJECT' THEN 'object' WHEN 'ARRAY' THEN 'array' WHEN 'BOOLEAN' THEN 'boolean'
        END AS input_kind,
        CASE json_type(output_len)
            WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' THEN 'integer'
            WHEN 'DOUBLE' THEN 'float' WHEN 'OBJECT' THEN 'object' WHEN 'ARRAY' THEN 'array' WHEN 'BOOLEAN' THEN 'boolean'
        END AS output_kind
    FROM entries
),
judged AS (
    SELECT
        *,
        CASE
            WHEN coalesce(json_type(itl), 'NULL') <> 'ARRAY'
            THEN format('itls: entry {} is a JSON {}, not a list of gaps in seconds', i, lower(coalesce(json_type(itl), 'null')))
            WHEN list_count(gaps) < len(gaps) OR list_min(gaps) < 0
            THEN format('itls: entry {} holds a value that is not a gap in seconds (a number >= 0)', i)
            WHEN error_text IS NULL
            THEN format('errors: entry {} is a JSON {}, not text ("" for a request that succeeded)', i,
                        lower(coalesce(json_type(error), 'null')))
            WHEN ttft_s IS NULL
            THEN format('ttfts: entry {} is a JSON {}, not a number of seconds', i, lower(coalesce(json_type(ttft), 'null')))
            WHEN ttft_s < 0 THEN format('ttfts: {} is below the minimum 0', ttft_s)
            WHEN has_start_times AND start_s IS NULL
            THEN format('start_times: entry {} is not a number of seconds', i)
            WHEN has_latencies AND (latency_s IS NULL OR latency_s < 0)
            THEN format('latencies: entry {} is not a number of seconds >= 0', i)
            WHEN has_queue_times AND (queue_s IS NULL OR queue_s < 0)
            THEN format('queue_times: entry {} is not a number of seconds >= 0', i)
        END AS line_problem,
        -- vLLM's success rule: a request succeeded when its first chunk arrived (ttft is then above 0) and it
        -- recorded no error; a failure has an error text, or ttft 0 when the server answered an HTTP error with
        -- no reason phrase.
        coalesce(error_text = '' AND ttft_s > 0, false) AS succeeded,
        -- The time the request waited in vLLM's client before it was sent (only with --max-concurrency).
        coalesce(queue_s, 0) AS wait_s,
        start_s - coalesce(queue_s, 0) AS arrival_s,
        coalesce(list_sum(gaps), 0) AS gaps_s
    FROM seconds
),
placed AS (
    SELECT
        j.*,
        st.*,
        CASE
            WHEN j.has_start_times THEN j.arrival_s - min(j.arrival_s) OVER ()
            ELSE j.i * st.duration / st.requests
        END AS offset_s,
        CASE
            WHEN j.succeeded THEN j.wait_s + coalesce(j.latency_s, j.ttft_s + j.gaps_s)
            ELSE j.wait_s + j.ttft_s + j.gaps_s
        END AS e2e_s,
        CASE
            WHEN NOT j.succeeded AND j.error_text = '' THEN 'no response'
            WHEN NOT j.succeeded AND starts_with(j.error_text, 'Traceback')
            THEN coalesce(nullif(regexp_extract(
                     list_last(list_filter(string_split(trim(j.error_text), chr(10)), lambda l: trim(l) <> '')),
                     '^\s*(?:[A-Za-z_][A-Za-z0-9_]*\.)*([A-Za-z_][A-Za-z0-9_]*)\s*(?::|$)', 1), ''), 'exception')
            WHEN NOT j.succeeded AND starts_with(j.error_text, 'Never received a valid chunk') THEN 'no first chunk'
            WHEN NOT j.succeeded AND length(j.error_text) <= 64 AND NOT contains(j.error_text, chr(10))
            THEN j.error_text
            WHEN NOT j.succeeded THEN 'error'
        END AS error_class
    FROM judged AS j
    CROSS JOIN step AS st
)
SELECT
    i AS source_line,
    coalesce(line_problem, CASE
        WHEN offset_s >= duration
        THEN format('start_times: entry {} was sent {} s after the first request, beyond the file''s duration {} s',
                    i, round(offset_s, 6), duration)
    END) AS line_problem,
    format('{}/{}/{}', run_id, parse_filename($source_file), i) AS request_id__text,
    'string' AS request_id__kind,
    (step_start + to_microseconds(round(offset_s * 1e6)::BIGINT))::VARCHAR AS received_at__text,
    NULL::VARCHAR AS received_at__kind,
    model AS model__text,
    'string' AS model__kind,
    deployment_id AS deployment_id__text,
    'string' AS deployment_id__kind,
    'loadtest' AS tenant_id__text,
    'string' AS tenant_id__kind,
    NULL::VARCHAR AS session_id__text,
    NULL::VARCHAR AS session_id__kind,
    CASE WHEN succeeded THEN 'ok' ELSE 'error' END AS status__text,
    'string' AS status__kind,
    input_len ->> '$' AS input_tokens__text,
    input_kind AS input_tokens__kind,
    '0' AS cached_input_tokens__text,
    'integer' AS cached_input_tokens__kind,
    NULL::VARCHAR AS cache_write_tokens__text,
    NULL::VARCHAR AS cache_write_tokens__kind,
    NULL::VARCHAR AS cache_write_1h_tokens__text,
    NULL::VARCHAR AS cache_write_1h_tokens__kind,
    output_len ->> '$' AS output_tokens__text,
    output_kind AS output_tokens__kind,
    -- milliseconds to the microsecond, so that 0.57 s is 570 ms and not 569.9999999999999
    CASE WHEN succeeded OR ttft_s > 0 THEN round(1000 * (wait_s + ttft_s), 3)::VARCHAR END AS ttft_ms__text,
    'float' AS ttft_ms__kind,
    round(1000 * e2e_s, 3)::VARCHAR AS e2e_ms__text,
    'float' AS e2e_ms__kind,
    CASE WHEN has_queue_times THEN round(1000 * queue_s, 3)::VARCHAR END AS queue_ms__text,
    'float' AS queue_ms__kind,
    round(1000 * list_max(gaps), 3)::VARCHAR AS itl_max_ms__text,
    'float' AS itl_max_ms__kind,
    NULL::VARCHAR AS reasoning_tokens__text,
    NULL::VARCHAR AS reasoning_tokens__kind,
    NULL::VARCHAR AS source_cost__text,
    NULL::VARCHAR AS source_cost__kind,
    'true' AS latency_measured__text,
    'boolean' AS latency_measured__kind,
    NULL::VARCHAR AS http_status__text,
    NULL::VARCHAR AS http_status__kind,
    error_class AS error_type__text,
    'string' AS error_type__kind,
    -- a bench result file lists no prompt blocks
    NULL::VARCHAR AS prefix_block_hashes__text,
    NULL::VARCHAR AS prefix_block_hashes__kind,
    NULL::VARCHAR AS service_tier__text, NULL::VARCHAR AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM placed
ORDER BY i
