-- replica_of(key, replicas, per_replica): the replica a request meets when its deployment's cache is split per
-- replica, md5_mod(key, replicas) (sql/whatif/md5_mod.sql, which must be created first); 0 when the deployment has one
-- replica or no scenario of config/whatif.yaml is per replica (the figure is then read nowhere). The key is the
-- session (session-affine routing; the request without a session) or the request (random routing).
CREATE OR REPLACE TEMP MACRO replica_of(key, replicas, per_replica) AS
    CASE WHEN replicas = 1 OR NOT per_replica THEN 0 ELSE md5_mod(key, replicas) END::INTEGER
