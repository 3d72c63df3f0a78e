-- Codex CLI session log lines, typed by data_contracts/inputs/source_codex.odcs.yaml (the relation "checked" below), mapped
-- onto the gateway_request contract as text and kinds: one request per turn, a token_count event with info and its
-- last_token_usage. Each choice is explained in tokenledger/ingest/adapters/codex.py. $file: the file's path. A turn is
-- numbered by the first line of its cumulative total (total_token_usage.total_tokens), so the copies Codex may write
-- of one event share its number, map to its first copy's values, and the day's de-duplication merges them.
WITH u AS (
    SELECT
        *,
        line_problem IS NULL AND type = 'event_msg'
            AND (reason IS NOT NULL
                 OR coalesce(input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens, total_tokens,
                             session_input_tokens, session_total_tokens) IS NOT NULL) AS has_usage
    FROM ({checked})
), r AS (
    -- An event_msg that carries token usage but no payload.type (missing, null, or not a string) cannot be told a
    -- token count or not: quarantined naming payload_type, never counted nor skipped (a lost turn would be silent).
    SELECT
        *,
        coalesce(has_usage AND payload_type = 'token_count', false) AS is_token_count,
        coalesce(has_usage AND payload_type IS NULL, false) AS untyped_usage
    FROM u
), c AS (
    SELECT
        *,
        line_problem IS NULL AND type IS NOT NULL AND NOT is_token_count AND NOT untyped_usage AS not_request,
        is_token_count AND reason IS NULL AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL AS counted,
        coalesce(
            min_by(session_id, source_line) FILTER (WHERE type = 'session_meta' AND line_problem IS NULL) OVER (),
            nullif(regexp_extract($file, '([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})'
                                         '\.jsonl(\.gz)?$', 1), '')
        ) AS session,
        last_value(CASE WHEN type = 'turn_context' AND line_problem IS NULL THEN model END IGNORE NULLS)
            OVER (ORDER BY source_line ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS turn_model
    FROM r
), t AS (
    SELECT
        *,
        min(source_line) OVER (PARTITION BY counted, coalesce(session_total_tokens, -source_line)) AS turn_line
    FROM c
), turns AS (
    SELECT
        *,
        dense_rank() OVER (PARTITION BY counted ORDER BY turn_line) AS turn,
        first_value({
            'received_at': timestamp, 'model': turn_model, 'input': input_tokens,
            'cached': coalesce(cached_input_tokens, 0), 'output': output_tokens,
            'reasoning': reasoning_output_tokens
        }) OVER (PARTITION BY counted, turn_line ORDER BY source_line) AS f
    FROM t
), checked_totals AS (
    -- The file's turns (the first copy of each) against its last cumulative total (the largest: it only grows).
    SELECT
        *,
        count(*) FILTER (WHERE source_line = turn_line) OVER file AS turns_in_file,
        sum(CASE WHEN source_line = turn_line THEN input_tokens END) OVER file AS sum_input,
        sum(CASE WHEN source_line = turn_line THEN coalesce(cached_input_tokens, 0) END) OVER file AS sum_cached,
        sum(CASE WHEN source_line = turn_line THEN output_tokens END) OVER file AS sum_output,
        sum(CASE WHEN source_line = turn_line THEN coalesce(reasoning_output_tokens, 0) END) OVER file
            AS sum_reasoning,
        sum(CASE WHEN source_line = turn_line THEN coalesce(total_tokens, input_tokens + output_tokens) END)
            OVER file AS sum_total,
        max(session_input_tokens) OVER file AS last_input,
        max(session_cached_input_tokens) OVER file AS last_cached,
        max(session_output_tokens) OVER file AS last_output,
        max(session_reasoning_output_tokens) OVER file AS last_reasoning,
        max(session_total_tokens) OVER file AS last_total
    FROM turns
    WINDOW file AS (PARTITION BY counted)
)
SELECT
    source_line,
    line_problem,
    not_request,
    CASE WHEN counted AND source_line = turn_line AND turn = turns_in_file AND last_total IS NOT NULL
              AND (sum_input, sum_cached, sum_output, sum_reasoning, sum_total)
                  IS DISTINCT FROM (last_input, coalesce(last_cached, 0), last_output, coalesce(last_reasoning, 0),
                                    last_total)
         THEN format('{}: its {} turn(s) add up to input {}, cached {}, output {}, reasoning {}, total {} tokens, but '
                     'its last total_token_usage says input {}, cached {}, output {}, reasoning {}, total {}: a turn '
                     'is not in the file (a session resumed from another file, or a file cut short); its turns are '
                     'accepted as they are', $file, turns_in_file, sum_input, sum_cached, sum_output, sum_reasoning,
                     sum_total, last_input, coalesce(last_cached, 0), last_output, coalesce(last_reasoning, 0),
                     last_total)
    END AS source_note,
    CASE
        WHEN line_problem IS NOT NULL THEN NULL
        WHEN not_request
            THEN format('not a request record: {} is a record Codex writes beside the token counts (only event_msg '
                        'token_count records with info are requests); counted here, never accounted',
                        CASE WHEN type = 'event_msg' AND payload_type = 'token_count'
                             THEN 'a token_count whose info is null (a rate-limit update)'
                             WHEN type IN ('event_msg', 'response_item')
                             THEN format('{} {}', type, coalesce(left(payload_type, 64), 'without payload.type'))
                             ELSE format('type {}', left(type, 64)) END)
        WHEN reason IS NOT NULL THEN reason
        WHEN untyped_usage
            THEN 'payload_type: required but missing (payload.type): an event_msg that carries token usage '
                 '(payload.info) must say whether it is a token_count, or it can be neither counted nor skipped'
        WHEN NOT counted
            THEN 'last_token_usage: missing: a token_count with info must give the turn''s input_tokens and '
                 'output_tokens, or there is nothing to account it by'
        WHEN timestamp IS NULL THEN 'timestamp: required but missing'
        WHEN session IS NULL
            THEN 'session_meta: missing, and the file''s name does not end in a session id (rollout-...-<uuid>.jsonl), '
                 'so the turn has no request id; land the whole rollout file'
        WHEN turn_model IS NULL
            THEN 'turn_context: no turn_context record before this token count names the model'
    END AS source_reason,
    raw AS source_raw,
    CASE WHEN counted THEN session || ':' || turn END AS request_id__text, 'string' AS request_id__kind,
    (CASE WHEN counted THEN f.received_at WHEN NOT not_request THEN timestamp END)::VARCHAR AS received_at__text,
    NULL::VARCHAR AS received_at__kind,
    CASE WHEN counted THEN f.model END AS model__text, 'string' AS model__kind,
    NULL::VARCHAR AS deployment_id__text, NULL::VARCHAR AS deployment_id__kind,
    'unattributed' AS tenant_id__text, 'string' AS tenant_id__kind,
    CASE WHEN counted THEN session END AS session_id__text, 'string' AS session_id__kind,
    'ok' AS status__text, 'string' AS status__kind,
    f.input::VARCHAR AS input_tokens__text, 'integer' AS input_tokens__kind,
    f.cached::VARCHAR AS cached_input_tokens__text, 'integer' AS cached_input_tokens__kind,
    NULL::VARCHAR AS cache_write_tokens__text, NULL::VARCHAR AS cache_write_tokens__kind,
    NULL::VARCHAR AS cache_write_1h_tokens__text, NULL::VARCHAR AS cache_write_1h_tokens__kind,
    f.output::VARCHAR AS output_tokens__text, 'integer' AS output_tokens__kind,
    f.reasoning::VARCHAR AS reasoning_tokens__text, 'integer' AS reasoning_tokens__kind,
    NULL::VARCHAR AS ttft_ms__text, NULL::VARCHAR AS ttft_ms__kind,
    NULL::VARCHAR AS e2e_ms__text, NULL::VARCHAR AS e2e_ms__kind,
    NULL::VARCHAR AS queue_ms__text, NULL::VARCHAR AS queue_ms__kind,
    NULL::VARCHAR AS itl_max_ms__text, NULL::VARCHAR AS itl_max_ms__kind,
    NULL::VARCHAR AS http_status__text, NULL::VARCHAR AS http_status__kind,
    NULL::VARCHAR AS error_type__text, NULL::VARCHAR AS error_type__kind,
    NULL::VARCHAR AS source_cost__text, NULL::VARCHAR AS source_cost__kind,
    'false' AS latency_measured__text, 'boolean' AS latency_measured__kind,
    -- the logs carry no prompt blocks: these requests stay out of the prefix-cache what-if
    NULL::VARCHAR AS prefix_block_hashes__text, NULL::VARCHAR AS prefix_block_hashes__kind,
    NULL::VARCHAR AS service_tier__text, NULL::VARCHAR AS service_tier__kind,
    NULL::VARCHAR AS inference_region__text, NULL::VARCHAR AS inference_region__kind
FROM checked_totals
