-- Each deployment in force on the day with its value of the policy's shared_cost_key, the weight by which shared
-- costs are spread: GPU-hours from the inventory (gpu_hours), or from the usage cube every request of the
-- deployment (requests) or the output tokens of the requests that reached it (output_tokens: the tokens its GPUs
-- generated, whatever the outcome).
WITH deployments AS (
    SELECT deployment_id, arg_max(model, in_force_to) AS model, sum(gpu_hours) AS gpu_hours
    FROM day_deployments
    GROUP BY deployment_id
),
usage AS (
    SELECT deployment_id, sum(requests) AS requests, sum(output_tokens) AS output_tokens
    FROM day_usage
    GROUP BY deployment_id
)
SELECT
    d.deployment_id,
    d.model,
    p.shared_cost_key,
    CASE p.shared_cost_key
        WHEN 'gpu_hours' THEN d.gpu_hours
        WHEN 'requests' THEN coalesce(u.requests, 0)
        WHEN 'output_tokens' THEN coalesce(u.output_tokens, 0)
    END::DOUBLE AS key_value
FROM deployments AS d
CROSS JOIN day_cost_policy AS p
LEFT JOIN usage AS u USING (deployment_id)
ORDER BY d.deployment_id
