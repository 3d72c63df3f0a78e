-- On-premises deployments in force on the day whose rate card the policy in force does not define: they cannot
-- be costed, so the day stops (an on-premises deployment costed at nothing would publish a wrong $/MTok).
SELECT DISTINCT d.deployment_id, d.rate_card, d.config_line
FROM day_deployments AS d
CROSS JOIN day_cost_policy AS p
ANTI JOIN cfg_rate_card AS r ON r.price_version = p.price_version AND r.rate_card = d.rate_card
WHERE d.hosting = 'on_prem'
ORDER BY d.deployment_id
