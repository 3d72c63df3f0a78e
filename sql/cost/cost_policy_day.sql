-- The cost policy in force on $day: the costs.yaml version with the greatest valid_from on or before the day
-- (versions apply to whole UTC days; valid_from is unique by the config contract). No row when none is in force.
SELECT * EXCLUDE (_line)
FROM cfg_cost_policy
WHERE valid_from <= $day::DATE
ORDER BY valid_from DESC
LIMIT 1
