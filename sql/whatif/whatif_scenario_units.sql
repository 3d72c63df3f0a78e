-- Every scenario of config/whatif.yaml (cfg_whatif_scenario) for every unit of the replay (whatif_units), with
-- its cache size resolved in blocks: size_blocks as written, or size_gb of KV over the bytes of one block
-- (kv_bytes_per_token * kv_block_tokens), rounded down. caches is how many caches the scenario has: one per
-- replica, or one shared. A scenario that cannot be replayed on a unit says why in note, and is not replayed.
SELECT
    u.unit,
    s.scenario,
    s.cache,
    s.scope,
    s.routing,
    CASE WHEN s.cache = 'lru' THEN coalesce(
        s.size_blocks,
        -- in decimals: 0.002 GB of 1e6-byte blocks is 2 blocks, not 1.999... rounded down to 1
        floor(s.size_gb::DECIMAL(38, 9) * 1000000000 / (u.kv_bytes_per_token * u.kv_block_tokens))::BIGINT)
    END AS cache_blocks,
    s.size_gb AS cache_gb,
    CASE WHEN s.scope = 'per_replica' THEN u.replicas ELSE 1 END AS caches,
    CASE
        WHEN u.kv_block_tokens IS NULL
        THEN 'the deployment declares no kv_block_tokens in config/deployments.yaml, so its block hashes cannot be '
             || 'read as tokens'
        WHEN s.cache = 'lru' AND s.size_blocks IS NULL AND u.kv_bytes_per_token IS NULL
        THEN format('{} has no kv_bytes_per_token in config/whatif.yaml, so a cache of {} GB has no size in blocks',
                    CASE WHEN u.model IS NULL THEN 'trace ' || u.unit ELSE 'model ' || u.model END, s.size_gb)
        WHEN s.cache = 'lru' AND s.size_blocks IS NULL AND cache_blocks < 1
        THEN format('{} GB holds less than one block of {} tokens', s.size_gb, u.kv_block_tokens)
    END AS note
FROM whatif_units AS u
CROSS JOIN cfg_whatif_scenario AS s
