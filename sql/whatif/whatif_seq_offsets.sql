-- Where each hour's numbering starts, per unit: the unit's requests with block hashes of the day's earlier hours
-- (whatif_day_rows, the rows of sql/whatif/whatif_day_rows.sql), and the hour's block accesses, which size the runs of
-- hours tokenledger/whatif/replay.py sorts together. seq numbers a unit's requests of the whole day in arrival order; a
-- run of hours is numbered from its first hour's offset (sql/whatif/whatif_day_requests.sql).
SELECT
    unit_id,
    hour,
    (sum(count(*)) OVER (PARTITION BY unit_id ORDER BY hour) - count(*))::BIGINT AS seq_offset,
    sum(blocks)::BIGINT AS accesses
FROM whatif_day_rows
WHERE hashes IS NOT NULL
GROUP BY unit_id, hour
