-- Where each hour's numbering starts, per unit: the unit's requests of the day's earlier hours (whatif_day_rows,
-- the rows of sql/whatif_day_rows.sql as written by hour). seq numbers a unit's requests of the whole day in
-- arrival order; an hour's are numbered from here (sql/whatif_day_requests.sql).
SELECT
    unit_id,
    hour,
    (sum(count(*)) OVER (PARTITION BY unit_id ORDER BY hour) - count(*))::BIGINT AS seq_offset
FROM whatif_day_rows
GROUP BY unit_id, hour
