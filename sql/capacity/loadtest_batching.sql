-- The batching settings one run ran with, on every row of its steps in the temp table loadtest_steps: what its
-- run.yaml declares (cfg_loadtest_run), each setting left undeclared taken from the inventory version in force at
-- the run's start (run_deployment). They are part of the run's configuration identity
-- (sql/capacity/capacity_loadtest_choice.sql): throughput under an SLO depends on the batching policy, so a run at
-- another max_num_seqs, max_num_batched_tokens or chunked_prefill does not speak for the deployment.
UPDATE loadtest_steps AS s
SET
    max_num_seqs = coalesce(r.max_num_seqs, d.max_num_seqs),
    max_num_batched_tokens = coalesce(r.max_num_batched_tokens, d.max_num_batched_tokens),
    chunked_prefill = coalesce(r.chunked_prefill, d.chunked_prefill)
FROM cfg_loadtest_run AS r, run_deployment AS d
WHERE s.run_id = r.run_id
