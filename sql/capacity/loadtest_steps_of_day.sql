-- core.loadtest_steps of one UTC day: the steps of the load-test runs whose start falls on the day, from the temp
-- table loadtest_steps that tokenledger.capacity.loadtest fills with every run under raw/loadtest/.
SELECT * FROM loadtest_steps WHERE day = $day::DATE ORDER BY run_id, step_index
