-- infra.gpu_memory_daily: per model, GPU deployment in force and UTC day, the GPU memory budget of docs/metrics.md
-- section 6, per GPU: gpu_memory = weights + KV cache + runtime + margin, from the inventory version in force at the
-- end of the day (the same deployments as infra.capacity_plan_daily, day_capacity_plan). Weights and KV are split
-- over tp x pp GPUs; with fewer KV heads than tp each GPU keeps one whole head (engines replicate them), so its KV
-- bytes per token take ceil(kv_heads / tp) heads and ceil(layers / pp) layers. The KV cache is what the engine's
-- share (gpu_memory * gpu_memory_utilization) leaves after weights and runtime (0 when they do not fit), the
-- margin what it leaves unused. The contexts are input + output tokens of the day's effective requests that
-- reached the model (status neither cancelled nor rejected); the P99 is the nearest rank (the smallest context
-- at least 99% of them fit within), counted per distinct context so no request list is held in memory. The
-- observed concurrency per replica is the plan's Little's law at the planning peak / the replicas in force at the
-- end of the day. A figure whose inventory facts are missing is NULL, and memory_note names the facts.
WITH configuration AS (
    SELECT
        deployment_id, model, gpu_type, tp, pp, gpus_per_replica, quantization, params_billion,
        weight_bytes_per_param, num_layers, num_kv_heads, head_dim, kv_bytes_per_element, gpu_memory_gib,
        gpu_memory_utilization, runtime_memory_gib, max_model_len, max_num_seqs
    FROM day_deployments
    WHERE kind = 'gpu'
    QUALIFY row_number() OVER (PARTITION BY deployment_id ORDER BY in_force_to DESC, in_force_from DESC) = 1
),
context_counts AS (
    SELECT deployment_id, input_tokens + output_tokens AS context, count(*) AS requests
    FROM day_requests
    WHERE status NOT IN ('cancelled', 'rejected')
    GROUP BY ALL
),
context_ranks AS (
    SELECT
        deployment_id,
        context,
        requests,
        sum(requests) OVER (PARTITION BY deployment_id ORDER BY context) AS at_most,
        sum(requests) OVER (PARTITION BY deployment_id) AS total
    FROM context_counts
),
contexts AS (
    SELECT
        deployment_id,
        sum(requests) AS context_requests,
        sum(context * requests) / sum(requests) AS context_mean_tokens,
        min(context) FILTER (WHERE at_most * 100 >= total * 99) AS context_p99_tokens
    FROM context_ranks
    GROUP BY deployment_id
),
budget AS (
    SELECT
        c.*,
        p.littles_law_concurrency,
        floor(p.gpus_deployed / c.gpus_per_replica)::BIGINT AS replicas_in_force,
        x.context_requests,
        x.context_mean_tokens,
        x.context_p99_tokens,
        c.tp * c.pp AS weight_gpus,
        c.params_billion * 1e9 * c.weight_bytes_per_param / weight_gpus / 1073741824.0 AS weights_gib,
        c.gpu_memory_gib * c.gpu_memory_utilization AS engine_memory_gib,
        engine_memory_gib - weights_gib - c.runtime_memory_gib AS kv_room_gib,
        CASE WHEN kv_room_gib < 0 THEN 0 ELSE kv_room_gib END AS kv_cache_gib,
        c.gpu_memory_gib - weights_gib - kv_cache_gib - c.runtime_memory_gib AS margin_gib,
        ceil(c.num_kv_heads / c.tp)::BIGINT AS kv_heads_per_gpu,
        ceil(c.num_layers / c.pp)::BIGINT AS layers_per_gpu,
        2 * layers_per_gpu * kv_heads_per_gpu * c.head_dim * c.kv_bytes_per_element AS kv_bytes_per_token,
        floor(kv_cache_gib * 1073741824.0 / kv_bytes_per_token)::BIGINT AS kv_capacity_tokens,
        kv_capacity_tokens / x.context_mean_tokens AS kv_sequences_at_mean,
        kv_capacity_tokens / x.context_p99_tokens AS kv_sequences_at_p99,
        kv_capacity_tokens / c.max_model_len AS kv_sequences_at_max_model_len,
        p.littles_law_concurrency / nullif(replicas_in_force, 0) AS observed_concurrency_per_replica,
        margin_gib <= 1e-9 * c.gpu_memory_gib AS kv_takes_all_memory,
        observed_concurrency_per_replica >= 0.9 * kv_sequences_at_mean AS concurrency_near_kv_limit,
        concat_ws(', ',
            CASE WHEN c.params_billion IS NULL THEN 'params_billion' END,
            CASE WHEN c.weight_bytes_per_param IS NULL THEN 'weight_bytes_per_param (or a known quantization)' END,
            CASE WHEN c.num_layers IS NULL THEN 'num_layers' END,
            CASE WHEN c.num_kv_heads IS NULL THEN 'num_kv_heads' END,
            CASE WHEN c.head_dim IS NULL THEN 'head_dim' END,
            CASE WHEN c.kv_bytes_per_element IS NULL THEN 'kv_bytes_per_element' END,
            CASE WHEN c.gpu_memory_gib IS NULL THEN 'gpu_memory_gib' END,
            CASE WHEN c.runtime_memory_gib IS NULL THEN 'runtime_memory_gib' END) AS missing_facts
    FROM configuration AS c
    LEFT JOIN day_capacity_plan AS p ON p.deployment_id = c.deployment_id
    LEFT JOIN contexts AS x ON x.deployment_id = c.deployment_id
)
SELECT
    $day::DATE AS day,
    model,
    deployment_id,
    gpu_type,
    tp,
    pp,
    gpus_per_replica,
    quantization,
    params_billion,
    weight_bytes_per_param,
    num_layers,
    num_kv_heads,
    head_dim,
    kv_bytes_per_element,
    gpu_memory_gib,
    gpu_memory_utilization,
    runtime_memory_gib,
    max_model_len,
    max_num_seqs,
    weights_gib,
    kv_cache_gib,
    margin_gib,
    kv_heads_per_gpu,
    layers_per_gpu,
    kv_bytes_per_token,
    kv_capacity_tokens,
    coalesce(context_requests, 0)::BIGINT AS context_requests,
    context_mean_tokens,
    context_p99_tokens,
    kv_sequences_at_mean,
    kv_sequences_at_p99,
    kv_sequences_at_max_model_len,
    littles_law_concurrency,
    replicas_in_force,
    observed_concurrency_per_replica,
    kv_takes_all_memory,
    concurrency_near_kv_limit,
    coalesce(nullif(concat_ws('; ',
        CASE WHEN NOT kv_takes_all_memory AND NOT concurrency_near_kv_limit AND kv_cache_gib > 0
             THEN 'within budget: a margin is left and the peak''s concurrency per replica is under 90% of the '
             || 'sequences the KV cache holds at the mean context' END,
        CASE WHEN missing_facts <> '' THEN 'the inventory lacks ' || missing_facts
             || ': the figures that need them are not computed' END,
        CASE WHEN kv_cache_gib = 0 THEN 'weights and runtime take all of the engine''s share of GPU memory: '
             || 'no room for a KV cache' END,
        CASE WHEN kv_takes_all_memory AND kv_cache_gib > 0 THEN 'no margin: the KV cache takes all memory left '
             || 'after weights and runtime (gpu_memory_utilization 1)' END,
        CASE WHEN concurrency_near_kv_limit THEN 'the peak''s concurrency per replica is at least 90% of the '
             || 'sequences the KV cache holds at the mean context' END,
        CASE WHEN kv_sequences_at_max_model_len < 1 THEN 'the KV cache holds less than one sequence of '
             || 'max_model_len' END,
        CASE WHEN max_num_seqs < kv_sequences_at_mean THEN 'max_num_seqs caps concurrent sequences below what the '
             || 'KV cache holds at the mean context' END,
        CASE WHEN num_kv_heads < tp THEN 'fewer KV heads than tp: each GPU keeps a copy of one head' END,
        CASE WHEN context_requests IS NULL THEN 'no effective request reached the model: no context to count '
             || 'sequences by' END,
        CASE WHEN context_requests IS NOT NULL AND littles_law_concurrency IS NULL THEN 'no successful request '
             || 'to time: no observed concurrency' END,
        CASE WHEN replicas_in_force = 0 THEN 'no replica in force at the end of the day: no concurrency per '
             || 'replica' END), ''),
        'no figure to judge') AS memory_note
FROM budget
ORDER BY model, deployment_id
