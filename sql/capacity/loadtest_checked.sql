-- Staged request rows of one load-test run with the run's own rules added to the row's other reasons: a request
-- must be of the run's model and deployment (a missing deployment_id is the run's) and be received within the
-- run, from its first step's start to its last step's end. finished_at_ms is the duplicate rule's tie-breaker
-- (sql/ingest/gateway_duplicates.sql), as for gateway logs.
WITH run AS (
    SELECT
        r.model,
        r.deployment_id,
        (SELECT min(step_start) FROM cfg_loadtest_step) AS run_start,
        (SELECT max(step_end) FROM cfg_loadtest_step) AS run_end
    FROM cfg_loadtest_run AS r
)
SELECT
    s.* REPLACE (
        nullif(concat_ws('; ',
            s.reason,
            CASE
                WHEN s.model <> run.model
                THEN format('model: {} is not the run''s model {}', s.model, run.model)
                WHEN s.deployment_id <> run.deployment_id
                THEN format('deployment_id: {} is not the run''s deployment {}', s.deployment_id, run.deployment_id)
                WHEN s.received_at < run.run_start OR s.received_at >= run.run_end
                THEN format('received_at: {} is outside the run ({} to {})',
                            strftime(s.received_at, '%Y-%m-%dT%H:%M:%S.%gZ'),
                            strftime(run.run_start, '%Y-%m-%dT%H:%M:%SZ'), strftime(run.run_end, '%Y-%m-%dT%H:%M:%SZ'))
            END
        ), '') AS reason,
        coalesce(s.deployment_id, run.deployment_id) AS deployment_id
    ),
    epoch(s.received_at) * 1000.0 + coalesce(s.e2e_ms, 0) AS finished_at_ms
FROM staged_loadtest AS s
CROSS JOIN run
