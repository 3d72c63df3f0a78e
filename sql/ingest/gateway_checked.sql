-- Staged gateway rows with the landing-zone rules the contract cannot know, added to the row's other reasons:
-- the request must fall on the folder's UTC day, and a request without deployment_id must belong to a model
-- with exactly one deployment in force (which then fills it in).
-- A view (tokenledger/ingest/sources.py), not a file: its few expressions are cheaper to evaluate again in each of its
-- readers than a day of rows, hash lists included, is to write once more (the 1M-request day's write: 3.3 s).
-- The day comes from gateway_day (day, day_start, day_end), since a view takes no parameters.
WITH models AS (
    SELECT model, count(DISTINCT deployment_id) AS deployments, min(deployment_id) AS only_deployment
    FROM deployments_day
    GROUP BY model
)
SELECT
    s.* REPLACE (
        nullif(concat_ws('; ',
            s.reason,
            CASE
                WHEN s.received_at < p.day_start OR s.received_at >= p.day_end
                THEN format('received_at: {} falls on {}, not on the folder''s day {}',
                            strftime(s.received_at, '%Y-%m-%dT%H:%M:%SZ'), s.received_at::DATE, p.day)
                WHEN s.deployment_id IS NULL AND m.deployments > 1
                THEN format('deployment_id: missing, and model {} has {} deployments in force on {}',
                            s.model, m.deployments, p.day)
            END
        ), '') AS reason,
        coalesce(s.deployment_id, CASE WHEN m.deployments = 1 THEN m.only_deployment END) AS deployment_id
    ),
    epoch(s.received_at) * 1000.0 + coalesce(s.e2e_ms, 0) AS finished_at_ms
FROM staged_gateway AS s
CROSS JOIN gateway_day AS p
LEFT JOIN models AS m ON m.model = s.model
