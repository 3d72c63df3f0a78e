-- The SLO version in force on $day (the greatest valid_from on or before it), with what the caller needs to
-- refuse an ambiguous or missing policy: every version starting on that date, the earliest valid_from of all,
-- and any version name that slo.yaml gives two different valid_from dates.
WITH versions AS (
    SELECT DISTINCT slo_version, valid_from FROM cfg_slo_policy
),
in_force AS (
    SELECT max(valid_from) AS valid_from FROM versions WHERE valid_from <= $day::DATE
)
SELECT
    (SELECT list(v.slo_version ORDER BY v.slo_version) FROM versions AS v JOIN in_force AS f USING (valid_from))
        AS in_force,
    (SELECT min(valid_from) FROM versions) AS earliest_valid_from,
    (SELECT list(slo_version ORDER BY slo_version) FROM (
        SELECT slo_version FROM versions GROUP BY slo_version HAVING count(*) > 1)) AS names_with_two_dates
