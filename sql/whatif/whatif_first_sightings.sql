-- The infinite cache, one run of whatif_requests at a time (whatif_run: a run of hours' file, read in order, or all
-- of whatif_requests as one run): every block hash sighted in the run for the first time in its cache (the unit's
-- one shared cache, or its replica's under $routing when $scope is per_replica), with its first sighting there,
-- and not sighted in any earlier run (whatif_seen: the hashes these statements found in the runs before). Runs
-- are consecutive hours, so a hash's first sighting of the day is its first in the first run that holds it, and a
-- request's first miss is the earliest position among the sightings it made first (sql/whatif/whatif_infinite.sql).
-- Each statement aggregates one run's accesses, never the day's: the 10M-request day's largest deployment (86M
-- accesses, 31M distinct blocks) took 2.1 GB of RSS aggregated whole, a run ~0.6 GB, and its earlier runs' hashes
-- are only probed (DuckDB builds the anti join on the run's side).
-- The sighting (seq, pos) is packed as seq * 2^32 + pos, one BIGINT, which DuckDB's min aggregates ~1.5x faster
-- than a struct (a block position is below 2^32; a seq of 2^31 or more would fail with an overflow error, not
-- wrap); unit_id rather than the unit's name, a fixed-width key.
WITH accesses AS (
    SELECT
        unit_id,
        CASE WHEN $scope = 'shared' THEN 0 WHEN $routing = 'random' THEN replica_random ELSE replica_affine END
            AS cache_part,
        seq,
        unnest(hashes) AS hash,
        generate_subscripts(hashes, 1) - 1 AS pos
    FROM whatif_run
),
firsts AS (
    SELECT unit_id, cache_part, hash, min(seq * 4294967296 + pos) AS first
    FROM accesses
    GROUP BY unit_id, cache_part, hash
)
SELECT f.unit_id, f.cache_part, f.hash, f.first
FROM firsts AS f
ANTI JOIN whatif_seen AS s USING (unit_id, cache_part, hash)
