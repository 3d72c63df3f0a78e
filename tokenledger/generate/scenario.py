"""The synthetic scenario, as data: deployments, workloads, load shape, latency and outcome parameters.

Everything the generator draws from is declared here so that tests and docs can quote the numbers instead of
reverse-engineering them from code. Numbers are plausible for 2025-2026 serving stacks (vLLM/SGLang-style
prefix caching, chunked prefill) but are a model, not a benchmark.

Calibration choices worth knowing:

* **Per-replica speeds are physical** and sit in the range public serving benchmarks report; the fleet is sized
  to the generated volume (:mod:`tokenledger.generate.fleet`), never the other way round. A replica's saturated
  throughput is ``prefill_capacity_tps`` recomputed-input tokens/s plus ``decode_capacity_tps`` output tokens/s
  (a request costs ``recomputed / prefill + output / decode`` replica-seconds), read at the tightest operating
  point the default SLO allows (TPOT P99 <= 40 ms, ITL P99 <= 100 ms):

  - Llama-3.1-70B-Instruct FP8, TP2 on 2 x H100: NVIDIA NIM's LLM benchmarking tables (docs.nvidia.com/nim/
    benchmarking/llm, "Performance", Llama-3.3-70B-Instruct FP8 TP2 on 2 x H100 80GB) give 623 output tok/s at
    concurrency 25 with 5,000-token prompts and 500-token answers (ITL 38.8 ms, TTFT 0.69 s), i.e. ~6,200 prompt
    tok/s alongside, and ~2,900-3,100 output tok/s for 500-in/2,000-out at concurrency 100-150 (ITL 33-46 ms);
    18.6 ms ITL and a 0.41 s TTFT for 5,000 tokens at concurrency 1. Here: 8,000 prefill and 2,600 decode tok/s per
    2-GPU replica saturated, 18 ms TPOT and 12,000 tok/s prefill for one request at low load. MLPerf Inference
    v4.0/v4.1 (Llama 2 70B, H100 and H200, TensorRT-LLM) reports ~3,000 tok/s per H100 offline, with no latency
    bound: the interactive figure above is the one an SLO can promise.
  - Llama-3.1-8B-Instruct BF16 on 1 x L40S: vLLM serving benchmarks of the 8B on a 48 GB Ada card (the A40, with
    ~80% of the L40S's memory bandwidth, serves ~1,000 output tok/s at 50 concurrent requests, 100 in / 600 out;
    databasemart.com "A40 vLLM Benchmark") and NIM's L40S profiles: 1,100 decode and 9,000 prefill tok/s
    saturated, 17 ms TPOT at low load (864 GB/s over 16 GB of weights).
  - Qwen3-Coder-30B-A3B-Instruct FP8 (a mixture of experts, 3B active) on 1 x H100, the fewest GPUs that hold it
    with room for its KV cache: single-H100 vLLM runs of the Qwen3 30B/35B-A3B MoEs report ~1,200 output tok/s at
    16 concurrent short requests; coding-agent steps carry ~70k tokens of context each, so decode is bound by KV
    reads: 650 decode and 12,000 prefill tok/s saturated, 20,000 tok/s prefill for one request (3B active
    parameters; attention over the cached prefix dominates prefill).

* Production load follows from the volume: a deployment's mean weekday utilization is the expected work of the
  volume it serves divided by its replicas, and its replica count is the volume's work divided by
  ``target_utilization``, rounded, at least one replica (:func:`tokenledger.generate.fleet.initial_replicas`).
  At the demo's 200,000 requests a weekday that is one replica each: the 70B at ~0.63 mean / ~0.96 peak-hour
  utilization, so weekday peaks cross its capacity and breach its SLO until it scales to two replicas on
  Thursday noon; the 8B at ~0.21 and the coding MoE at ~0.45 (~0.68 in its peak hour). A smaller volume runs
  the same fleet lighter, as a real one would: the generator no longer shrinks per-GPU speed to fit a volume.
* Load tests use the same physical capacity (:func:`tokenledger.generate.loadtest.capacity_rps`), so a load test
  and the production logs describe one machine at any volume.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from datetime import date, time

import numpy as np

MINUTES_PER_DAY = 1440
MS_PER_DAY = 86_400_000

#: Seed of the scenario's own Monte-Carlo estimates (expected work per request). Fixed, so that load-test
#: capacity is a property of the scenario and not of the caller's seed.
SCENARIO_SEED = 20261116


# --------------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class ChatProfile:
    """Independent chat requests: short prompts, a system prompt that is sometimes still cached."""

    name: str
    input_median: float
    input_sigma: float
    input_min: int
    input_max: int
    output_median: float
    output_sigma: float
    output_max: int
    warm_prefix_share: float  # share of requests whose system prompt is still cached
    system_tokens: int  # system prompt length (the cacheable prefix)


@dataclass(frozen=True)
class AgentProfile:
    """Coding-agent sessions: every step resends the growing context, so almost all of it is a cache hit.

    Step k's prompt = system prompt + repository context + task + every earlier tool result and model output.
    The cached part is the previous step's prompt (the prefix already seen); a step misses the cache with
    ``miss_rate`` (eviction) and then recomputes all but the shared system prompt. A prompt that would exceed
    ``context_limit`` is truncated from the oldest tool results, which also breaks the prefix.
    """

    name: str
    steps_min: int
    steps_max: int
    system_tokens: int
    repo_median: float
    repo_sigma: float
    repo_min: int
    repo_max: int
    task_median: float
    tool_median: float
    tool_sigma: float
    tool_max: int
    output_median: float
    output_sigma: float
    output_max: int
    context_limit: int
    cold_system_share: float  # share of sessions whose first step finds even the system prompt evicted
    miss_rate: float  # per later step: the prefix was evicted
    tool_seconds_median: float
    tool_seconds_sigma: float
    tool_seconds_max: float

    @property
    def mean_steps(self) -> float:
        return (self.steps_min + self.steps_max) / 2


Profile = ChatProfile | AgentProfile

#: Retrieval-augmented chat on the 70B: a few retrieved documents per question (the NIM 5,000-in / 500-out
#: profile is its shape).
CHAT_70B = ChatProfile(
    name="chat",
    input_median=4_000,
    input_sigma=0.6,
    input_min=200,
    input_max=16_000,  # retrieval caps the documents it adds
    output_median=330,
    output_sigma=0.7,
    output_max=4_096,
    warm_prefix_share=0.35,
    system_tokens=1_024,
)

CHAT_8B = ChatProfile(
    name="chat",
    input_median=800,
    input_sigma=0.8,
    input_min=16,
    input_max=6_000,
    output_median=170,
    output_sigma=0.8,
    output_max=2_048,
    warm_prefix_share=0.30,
    system_tokens=256,
)

CODING_AGENT = AgentProfile(
    name="coding-agent",
    steps_min=10,
    steps_max=60,
    system_tokens=12_288,
    repo_median=14_000,
    repo_sigma=0.5,
    repo_min=2_000,
    repo_max=60_000,
    task_median=300,
    tool_median=1_250,
    tool_sigma=1.0,
    tool_max=30_000,
    output_median=180,
    output_sigma=0.8,
    output_max=8_192,
    context_limit=262_144 - 8_192,
    cold_system_share=0.05,
    miss_rate=0.006,
    tool_seconds_median=6.0,
    tool_seconds_sigma=0.9,
    tool_seconds_max=90.0,
)

#: The 70B model's context is 128k tokens, so its (shorter) agent sessions sometimes truncate; its tasks are
#: general agent work over smaller repositories and a shorter system prompt than the coding agent's.
AGENT_70B = replace(
    CODING_AGENT, name="agent", steps_min=10, steps_max=34, system_tokens=4_096, repo_median=6_000,
    tool_median=1_000, context_limit=131_072 - 8_192
)


@dataclass(frozen=True)
class Stream:
    """One workload on one deployment: a share of ``requests_per_day`` and the tenants that send it."""

    name: str
    deployment_id: str
    profile: Profile
    share: float
    tenants: tuple[tuple[str, float], ...]

    @property
    def is_agent(self) -> bool:
        return isinstance(self.profile, AgentProfile)


# --------------------------------------------------------------------------------------------- latency


@dataclass(frozen=True, kw_only=True)
class LatencyModel:
    """Per-request latency of one deployment as a function of its utilization rho (see ``latency.py``).

    ``prefill_tps`` is the prompt rate one request sees (chunked prefill shares the GPUs, so it slows by
    ``1 + prefill_load_gain * rho``); ``tpot_ms`` the decode step at low load, growing as
    ``1 + tpot_load_gain * rho**2``. The stochastic queue wait is exponential with mean
    ``queue_scale_ms * rho**4 / (1 - rho)`` (rho capped at ``rho_cap``): negligible at night, a few hundred ms
    near saturation. ``*_capacity_tps`` are one replica's saturated throughputs, used only to turn load-test
    arrival rates into utilization.
    """

    # What differs between the models
    prefill_tps: float
    cached_ms_per_ktok: float  # attention over the cached prefix still costs a little
    overhead_ms: float
    tpot_ms: float
    tpot_ms_per_100k_ctx: float
    stall_max_ms: float
    prefill_capacity_tps: float
    decode_capacity_tps: float
    # How a serving engine behaves under load: the same for every model of the scenario
    prefill_load_gain: float = 0.5
    tpot_load_gain: float = 0.6
    tpot_sigma: float = 0.12
    itl_tail: float = 0.05  # scale of the heavy-tailed ITL factor per ln(output tokens)
    stall_base: float = 0.0005  # probability of a decode stall at any load
    stall_peak: float = 0.12  # extra stall probability reached at rho >= stall_rho_full
    stall_rho_start: float = 0.85
    stall_rho_full: float = 1.10
    stall_min_ms: float = 60
    queue_scale_ms: float = 15
    rho_cap: float = 0.97
    max_wait_s: float = 10  # admission control rejects what would wait longer than this


# --------------------------------------------------------------------------------------------- deployments


@dataclass(frozen=True)
class ScaleEvent:
    """``add_replicas`` more replicas from ``day_offset`` days after the start, at ``at`` UTC."""

    day_offset: int
    at: time
    add_replicas: int


@dataclass(frozen=True)
class Instance:
    """A cloud instance type as billed (per hour): on-demand list price and committed (amortized) rate."""

    sku: str
    list_per_hour: float
    committed_per_hour: float
    description: str


@dataclass(frozen=True)
class Deployment:
    deployment_id: str
    model: str
    model_version: str
    engine: str
    engine_version: str
    gpu_type: str
    gpus_per_replica: int
    tp: int
    pp: int
    quantization: str
    cache_policy: str
    gpu_power_w: int
    slots_per_replica: int
    hosting: str
    rate_card: str | None
    resource_ids: tuple[str, ...]
    scale_events: tuple[ScaleEvent, ...]
    target_utilization: float  # the mean weekday utilization the fleet is sized for (fleet.initial_replicas)
    latency: LatencyModel
    instance: Instance | None  # cloud GPU instance (one per replica)
    instance_prefix: str  # hex prefix of instance/volume ids, matched by resource_ids
    list_price_output_per_mtok: float
    scale_out_minutes: float  # node, image and weights until a new replica serves
    warmup_minutes: float  # a new replica's warm-up (CUDA graphs, cache) before full speed
    # The prefix-cache what-if (config/whatif.yaml): the block of the logged prefix hashes, and the KV cache's bytes
    # per token, 2 (K and V) x layers x KV heads x head dimension x bytes per element.
    kv_block_tokens: int
    kv_bytes_per_token: int
    # The GPU memory budget (docs/metrics.md, section 6): the model's facts and the engine's settings, as in the
    # model's config.json and the engine's defaults; gpu_memory_gib is the board's memory in GiB.
    memory: EngineMemory
    # Failure domains and the unit bought: GPUs per node, nodes per rack, and what the fleet is bought in.
    gpus_per_node: int
    nodes_per_rack: int
    bought_in: str


@dataclass(frozen=True)
class EngineMemory:
    params_billion: float
    weight_bytes_per_param: float
    num_layers: int
    num_kv_heads: int
    head_dim: int
    kv_bytes_per_element: float
    gpu_memory_gib: float
    gpu_memory_utilization: float
    runtime_memory_gib: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool


#: Tokens per block of the prefix hashes the gateway logs (kv_block_tokens in the inventory) for the deployments
#: with long prompts: Mooncake's traces' 512, coarser than an engine's page (vLLM's 16) so that a coding-agent
#: step's ~70k-token prompt logs ~140 hashes, not ~4,400. The what-if then counts cached input in whole blocks, an
#: under-count of less than one block per request against the engine's finer blocks.
KV_BLOCK_TOKENS = 512

#: Llama-3.1-70B FP8, TP2 on 2 x H100 (NIM benchmarking tables; see the module docstring).
LAT_70B = LatencyModel(
    prefill_tps=12_000,
    cached_ms_per_ktok=1.0,
    overhead_ms=35,
    tpot_ms=18,
    tpot_ms_per_100k_ctx=3.0,
    stall_max_ms=400,
    prefill_capacity_tps=8_000,
    decode_capacity_tps=2_600,
)

#: Llama-3.1-8B BF16 on 1 x L40S.
LAT_8B = LatencyModel(
    prefill_tps=9_000,
    cached_ms_per_ktok=0.5,
    overhead_ms=20,
    tpot_ms=17,
    tpot_ms_per_100k_ctx=2.0,
    stall_max_ms=300,
    prefill_capacity_tps=9_000,
    decode_capacity_tps=1_100,
)

#: Qwen3-Coder-30B-A3B FP8 on 1 x H100, coding-agent steps with ~70k tokens of context.
LAT_QWEN = LatencyModel(
    prefill_tps=20_000,
    cached_ms_per_ktok=1.5,
    overhead_ms=40,
    tpot_ms=12,
    tpot_ms_per_100k_ctx=4.0,
    stall_max_ms=400,
    prefill_capacity_tps=12_000,
    decode_capacity_tps=650,
)

#: One H100 80GB (the single-GPU P5 size); priced as an eighth of p5.48xlarge, savings plan for committed use.
P5_1 = Instance("p5.4xlarge", 6.88, 4.4725, "1x NVIDIA H100 80GB")
#: Router / tokenizer node in front of each cloud deployment.
ROUTER = Instance("c7i.xlarge", 0.1785, 0.125, "4 vCPU router node")
#: Shared gateway nodes (gw-a, gw-b, gw-c) in front of every deployment.
GATEWAY = Instance("c7i.2xlarge", 0.357, 0.25, "8 vCPU gateway node")

DEPLOYMENTS: tuple[Deployment, ...] = (
    Deployment(
        deployment_id="llama70b-h100nvl-tp2",
        model="llama-3.1-70b-instruct",
        model_version="3.1-fp8-2024-07-23",
        engine="vllm",
        engine_version="0.10.1",
        gpu_type="H100-NVL-94GB",
        gpus_per_replica=2,
        tp=2,
        pp=1,
        quantization="fp8",
        cache_policy="prefix-cache",
        gpu_power_w=400,
        slots_per_replica=32,
        hosting="on_prem",
        rate_card="onprem-h100nvl",
        resource_ids=(),
        scale_events=(ScaleEvent(day_offset=3, at=time(12, 0), add_replicas=1),),
        target_utilization=0.64,
        latency=LAT_70B,
        instance=None,
        instance_prefix="",
        list_price_output_per_mtok=0.88,
        scale_out_minutes=12,
        warmup_minutes=3,
        kv_block_tokens=KV_BLOCK_TOKENS,
        kv_bytes_per_token=2 * 80 * 8 * 128 * 1,  # FP8 KV cache
        memory=EngineMemory(params_billion=70.6, weight_bytes_per_param=1, num_layers=80, num_kv_heads=8,
                            head_dim=128, kv_bytes_per_element=1, gpu_memory_gib=87.5, gpu_memory_utilization=0.9,
                            runtime_memory_gib=4.0, max_model_len=32768, max_num_seqs=256,
                            max_num_batched_tokens=8192, chunked_prefill=True),
        gpus_per_node=4,
        nodes_per_rack=4,
        bought_in="node",
    ),
    Deployment(
        deployment_id="llama8b-l40s-onprem",
        model="llama-3.1-8b-instruct",
        model_version="3.1-2024-07-23",
        engine="vllm",
        engine_version="0.10.1",
        gpu_type="L40S-48GB",
        gpus_per_replica=1,
        tp=1,
        pp=1,
        quantization="bf16",
        cache_policy="prefix-cache",
        gpu_power_w=350,
        slots_per_replica=48,
        hosting="on_prem",
        rate_card="onprem-l40s",
        resource_ids=(),
        scale_events=(),
        target_utilization=0.45,
        latency=LAT_8B,
        instance=None,
        instance_prefix="",
        list_price_output_per_mtok=0.18,
        scale_out_minutes=8,
        warmup_minutes=2,
        kv_block_tokens=128,  # its chat prompts are short, and its system prompt a quarter of 512 tokens
        kv_bytes_per_token=2 * 32 * 8 * 128 * 2,  # BF16 KV cache
        memory=EngineMemory(params_billion=8.03, weight_bytes_per_param=2, num_layers=32, num_kv_heads=8,
                            head_dim=128, kv_bytes_per_element=2, gpu_memory_gib=45.0, gpu_memory_utilization=0.9,
                            runtime_memory_gib=2.0, max_model_len=32768, max_num_seqs=256,
                            max_num_batched_tokens=8192, chunked_prefill=True),
        gpus_per_node=4,
        nodes_per_rack=8,
        bought_in="gpu",
    ),
    Deployment(
        deployment_id="qwen3coder30b-h100",
        model="qwen3-coder-30b-a3b-instruct",
        model_version="2507-fp8",
        engine="sglang",
        engine_version="0.5.2",
        gpu_type="H100-SXM-80GB",
        gpus_per_replica=1,
        tp=1,
        pp=1,
        quantization="fp8",
        cache_policy="prefix-cache",
        gpu_power_w=700,
        slots_per_replica=16,
        hosting="cloud",
        rate_card=None,
        resource_ids=(
            "arn:aws:ec2:*:instance/i-0c0de*",
            "arn:aws:ec2:*:volume/vol-0c0de*",
            "arn:aws:ec2:*:snapshot/snap-0c0de*",
        ),
        scale_events=(),
        target_utilization=0.50,
        latency=LAT_QWEN,
        instance=P5_1,
        instance_prefix="0c0de",
        list_price_output_per_mtok=0.60,
        scale_out_minutes=10,
        warmup_minutes=2,
        kv_block_tokens=KV_BLOCK_TOKENS,
        kv_bytes_per_token=2 * 48 * 4 * 128 * 1,  # FP8 KV cache
        memory=EngineMemory(params_billion=30.5, weight_bytes_per_param=1, num_layers=48, num_kv_heads=4,
                            head_dim=128, kv_bytes_per_element=1, gpu_memory_gib=79.6, gpu_memory_utilization=0.9,
                            runtime_memory_gib=4.0, max_model_len=262144, max_num_seqs=64,
                            max_num_batched_tokens=16384, chunked_prefill=True),
        gpus_per_node=1,
        nodes_per_rack=1,
        bought_in="node",
    ),
)

DEPLOYMENT_BY_ID = {d.deployment_id: d for d in DEPLOYMENTS}


@dataclass(frozen=True)
class RateCard:
    """On-premises cost per GPU-hour (see metrics.md section 4)."""

    name: str
    capex_per_gpu: float
    lifetime_hours: int
    power_kw_per_gpu: float
    pue: float
    price_per_kwh: float
    opex_per_gpu_hour: float


RATE_CARDS = (
    RateCard("onprem-h100nvl", 30_000, 35_040, 0.40, 1.35, 0.11, 0.30),
    RateCard("onprem-l40s", 11_000, 35_040, 0.35, 1.35, 0.11, 0.12),
)

STREAMS: tuple[Stream, ...] = (
    Stream(
        "chat-70b",
        "llama70b-h100nvl-tp2",
        CHAT_70B,
        0.34,
        (("team-search", 0.35), ("team-support", 0.40), ("acme-corp", 0.25)),
    ),
    Stream("agent-70b", "llama70b-h100nvl-tp2", AGENT_70B, 0.08, (("agent-platform", 0.6), ("acme-corp", 0.4))),
    Stream(
        "chat-8b",
        "llama8b-l40s-onprem",
        CHAT_8B,
        0.28,
        (("team-support", 0.5), ("team-search", 0.3), ("globex-labs", 0.2)),
    ),
    Stream(
        "coding-agent",
        "qwen3coder30b-h100",
        CODING_AGENT,
        0.30,
        (("agent-platform", 0.6), ("acme-corp", 0.2), ("globex-labs", 0.1), ("team-search", 0.1)),
    ),
)

TENANTS: tuple[str, ...] = tuple(sorted({t for s in STREAMS for t, _ in s.tenants} | {"loadtest"}))

#: Share of the 8B model's rows logged without deployment_id (an older gateway route); the model has exactly
#: one deployment, so the contract resolves it.
MISSING_DEPLOYMENT_SHARE = {"llama8b-l40s-onprem": 0.04}


# --------------------------------------------------------------------------------------------- hosted APIs


@dataclass(frozen=True)
class ApiDeployment:
    """A hosted-API model the first generated day also calls, logged in the format its callers keep.

    ``model`` is the name that format's records carry (LiteLLM's model_group, the dated name OpenAI and Anthropic
    return), ``source`` the raw/<source>/ folder the log lands in (tokenledger/ingest/adapters/).
    """

    deployment_id: str
    model: str
    provider: str
    price_sheet: str  # the api_prices entry of costs.yaml
    rate_limit_rpm: int
    rate_limit_tpm: int
    source: str


#: Claude Haiku 4.5 behind the teams' LiteLLM proxy (model group claude-haiku-4-5), on an organization limited
#: to 50 requests a minute, so a batch job's burst draws 429s; GPT-5 mini called directly, its chat completions
#: and Responses logged as returned; Claude Sonnet 4.5 used by developers through Claude Code.
API_DEPLOYMENTS: tuple[ApiDeployment, ...] = (
    ApiDeployment("claude-haiku-litellm", "claude-haiku-4-5", "anthropic", "claude-haiku-4-5", 50, 400_000,
                  "litellm"),
    ApiDeployment("gpt5mini-openai", "gpt-5-mini-2025-08-07", "openai", "gpt-5-mini", 5_000, 2_000_000, "openai"),
    ApiDeployment("claude-sonnet-api", "claude-sonnet-4-5-20250929", "anthropic", "claude-sonnet-4-5", 4_000,
                  2_000_000, "anthropic"),
)

#: Price sheets written out in costs.yaml, USD per 1M tokens: Claude Sonnet 4.5's public list prices
#: (anthropic.com/pricing: input 3, five-minute cache writes 3.75, one-hour cache writes 6, cache reads 0.30,
#: output 15).
WRITTEN_PRICE_SHEETS: dict[str, dict[str, float]] = {
    "claude-sonnet-4-5": {
        "input_per_mtok": 3.00,
        "cache_read_per_mtok": 0.30,
        "cache_write_per_mtok": 3.75,
        "cache_write_1h_per_mtok": 6.00,
        "output_per_mtok": 15.00,
    },
}

#: The other sheets come from a LiteLLM model price map written beside the configs: these entries of
#: BerriAI/litellm's model_prices_and_context_window.json (USD per token), which carry the providers' public list
#: prices: Claude Haiku 4.5 at 1 / 1.25 (five-minute writes) / 2 (one-hour writes) / 0.10 (reads) / 5 per 1M
#: tokens (anthropic.com/pricing); GPT-5 mini at 0.25 / 0.025 (cached input) / 2 (openai.com/api/pricing).
LITELLM_PRICE_MAP: dict[str, dict[str, object]] = {
    "claude-haiku-4-5": {
        "cache_creation_input_token_cost": 1.25e-06,
        "cache_creation_input_token_cost_above_1hr": 2e-06,
        "cache_read_input_token_cost": 1e-07,
        "input_cost_per_token": 1e-06,
        "litellm_provider": "anthropic",
        "max_input_tokens": 200000,
        "max_output_tokens": 64000,
        "mode": "chat",
        "output_cost_per_token": 5e-06,
        "supports_prompt_caching": True,
    },
    "gpt-5-mini": {
        "cache_read_input_token_cost": 2.5e-08,
        "input_cost_per_token": 2.5e-07,
        "litellm_provider": "openai",
        "max_input_tokens": 272000,
        "max_output_tokens": 128000,
        "mode": "chat",
        "output_cost_per_token": 2e-06,
        "supports_prompt_caching": True,
        "supports_reasoning": True,
    },
}
LITELLM_PRICE_MAP_FILE = "model_prices_and_context_window.json"

#: How much each hosted-API log holds on the first day (a few hundred requests each: the demo's run time barely
#: changes). LiteLLM: steady calls over business hours plus one batch job's burst in a single minute, whose calls
#: beyond the rate limit get a 429. OpenAI: chat completions and Responses, two Responses failing with a server
#: error. Claude Code: sessions of a fixed number of replies, each reply but the last asking for a tool.
LITELLM_STEADY_REQUESTS = 480
LITELLM_BURST_REQUESTS = 58
LITELLM_BURST_AT = time(14, 7)
OPENAI_CHAT_COMPLETIONS = 240
OPENAI_RESPONSES = 160
OPENAI_FAILED_RESPONSES = 2
CLAUDE_CODE_SESSIONS = 6
CLAUDE_CODE_REPLIES = 20


# --------------------------------------------------------------------------------------------- load shape

#: Relative arrival rate per UTC hour (business-hours peak; peak hour ~2.7x the quietest night hour).
HOURLY_SHAPE = np.array(
    [0.56, 0.53, 0.52, 0.52, 0.55, 0.62, 0.75, 0.93, 1.15, 1.34, 1.44, 1.47,
     1.45, 1.47, 1.49, 1.44, 1.34, 1.19, 1.03, 0.90, 0.79, 0.70, 0.64, 0.59]
)  # fmt: skip

#: Day-of-week volume factor (Monday = 0); ``requests_per_day`` is the weekday volume.
WEEKDAY_FACTOR = (1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 0.55)


@dataclass(frozen=True)
class BurstModel:
    """Minute-scale spikes (batch jobs, retry storms) per deployment and day, placed like the diurnal load."""

    per_day: float = 5.0
    min_minutes: int = 2
    max_minutes: int = 6
    min_factor: float = 1.2
    max_factor: float = 1.5


BURSTS = BurstModel()


def diurnal_per_minute() -> np.ndarray:
    """HOURLY_SHAPE interpolated to minutes (values at half past each hour), normalized to mean 1."""
    hours = np.arange(MINUTES_PER_DAY) / 60.0
    knots = np.arange(-0.5, 25.0, 1.0)
    vals = np.concatenate([[HOURLY_SHAPE[-1]], HOURLY_SHAPE, [HOURLY_SHAPE[0]]])
    curve = np.interp(hours, knots, vals)
    return curve / curve.mean()


# --------------------------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class OutcomeRates:
    """Probabilities of the non-ok statuses and of logging defects.

    Failures total about 0.05% of requests: errors and disconnects at a flat rate, timeouts mostly when the
    queue is long (``timeout_slope`` per second of queue beyond ``timeout_queue_ms``). Rejections come only
    from admission control in the fluid queue (``latency.py``).
    """

    error: float = 0.00030
    disconnected: float = 0.00007
    timeout: float = 0.00003
    timeout_queue_ms: float = 5_000
    timeout_slope: float = 0.003  # extra timeout probability per second of queue beyond timeout_queue_ms
    cancelled: float = 0.010
    duplicate: float = 0.0005
    itl_missing: float = 0.005  # successful requests whose itl_max_ms was not recorded


PRODUCTION_OUTCOMES = OutcomeRates()
#: A load test runs in a controlled environment: no random infrastructure faults, no user cancellations and
#: no logging duplicates, so its commitments break only from load.
LOADTEST_OUTCOMES = OutcomeRates(
    error=0.00002, disconnected=0.0, timeout=0.0, cancelled=0.0, duplicate=0.0, itl_missing=0.005
)

#: Gateway nodes: name, share of traffic, offset written in received_at (None = "Z"), format.
GATEWAY_NODES: tuple[tuple[str, float, int | None, str], ...] = (
    ("gw-a", 0.40, None, "json"),
    ("gw-b", 0.35, 8, "json"),
    ("gw-c", 0.25, None, "parquet"),
)
#: JSON nodes roll their files every CHUNK_HOURS; gw-a's last chunk of the day is left uncompressed.
CHUNK_HOURS = 6

#: Deliberately invalid rows, one of each kind per day in this order, and the file each one is written to.
BAD_ROW_KINDS: tuple[tuple[str, str], ...] = (
    ("negative_input_tokens", "gw-c"),
    ("cached_above_input", "gw-a"),
    ("e2e_below_ttft", "gw-b"),
    ("unknown_status", "gw-c"),
    ("missing_request_id", "gw-b"),
    ("invalid_json", "plain"),
    ("unparseable_received_at", "gw-a"),
    ("non_numeric_output_tokens", "plain"),
)


# --------------------------------------------------------------------------------------------- SLO policy

#: The default SLO policy written to slo.yaml (docs/configuration.md); the generator is calibrated against it.
ISL_BUCKETS: tuple[tuple[str, int, int | None, int], ...] = (
    ("0-4k", 0, 4096, 1000),
    ("4k-32k", 4096, 32768, 2500),
    ("32k-128k", 32768, 131072, 6000),
    ("128k+", 131072, None, 15000),
)
ITL_LIMIT_MS = 100
QUEUE_P99_MS = 300
TPOT_P99_MS = 40
#: The 70B runs on two GPUs, which prefill ~12,000 tokens/s for one request (NIM: 5,000 tokens in 0.41 s): a cold
#: 70k-token agent context takes ~6 s before queueing, so its long-prompt tiers promise what two GPUs can keep
#: (TTFT is tiered by prompt length, seed 003); its short prompts keep the default 1 s.
ISL_BUCKETS_70B: tuple[tuple[str, int, int | None, int], ...] = (
    ("0-4k", 0, 4096, 1000),
    ("4k-32k", 4096, 32768, 4000),
    ("32k-128k", 32768, 131072, 12000),
    ("128k+", 131072, None, 30000),
)
MODEL_SLO_OVERRIDES: dict[str, dict[str, object]] = {
    "llama-3.1-70b-instruct": {"isl_buckets": ISL_BUCKETS_70B},
    "llama-3.1-8b-instruct": {"tpot_p99_ms": 30},
}


# --------------------------------------------------------------------------------------------- randomness


def rng_for(seed: int, *keys: object) -> np.random.Generator:
    """An independent random stream for (seed, keys...): a day's data depends only on its own keys."""
    words = [seed]
    for k in keys:
        if isinstance(k, date):
            words.append(k.toordinal())
        elif isinstance(k, int):
            words.append(k)
        else:
            words.append(zlib.crc32(str(k).encode()))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))
