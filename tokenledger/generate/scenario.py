"""The synthetic scenario, as data: deployments, workloads, load shape, latency and outcome parameters.

Everything the generator draws from is declared here so that tests and docs can quote the numbers instead of
reverse-engineering them from code. Numbers are plausible for 2025-2026 serving stacks (vLLM/SGLang-style
prefix caching, chunked prefill) but are a model, not a benchmark.

Calibration choices worth knowing:

* Production load is expressed as utilization: a deployment's capacity is set relative to its own mean weekday
  demand (``mean_utilization`` at the initial replica count), so the latency shape is the same at any
  ``requests_per_day``. The 70B deployment runs at ~0.64 mean / ~0.97 peak-hour utilization on two replicas,
  so weekday peaks breach its SLO; the scale-up to three replicas brings the peak hour to ~0.65.
* Load tests use a physical capacity instead (replica throughput in tokens/s), because their arrival rates are
  absolute: see :func:`tokenledger.generate.loadtest.capacity_rps`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

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

CHAT_70B = ChatProfile(
    name="chat",
    input_median=1_100,
    input_sigma=0.9,
    input_min=24,
    input_max=24_000,
    output_median=180,
    output_sigma=0.8,
    output_max=4_096,
    warm_prefix_share=0.35,
    system_tokens=512,
)

CHAT_8B = ChatProfile(
    name="chat",
    input_median=480,
    input_sigma=0.8,
    input_min=16,
    input_max=6_000,
    output_median=140,
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

#: The 70B model's context is 128k tokens, so its (shorter) agent sessions sometimes truncate.
AGENT_70B = replace(
    CODING_AGENT, name="agent", steps_min=10, steps_max=34, tool_median=1_000, context_limit=131_072 - 8_192
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
    """A change of replica count ``day_offset`` days after the start, at ``at`` UTC."""

    day_offset: int
    at: time
    replicas: int


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
    replicas: int  # initial
    scale_events: tuple[ScaleEvent, ...]
    mean_utilization: float  # weekday mean demand / capacity at the initial replicas
    latency: LatencyModel
    instance: Instance | None  # cloud GPU instance (one per replica)
    instance_prefix: str  # hex prefix of instance/volume ids, matched by resource_ids
    list_price_output_per_mtok: float

    def replica_schedule(self, start: date) -> list[tuple[datetime, int]]:
        """(from, replicas) pairs in time order, the first from midnight of ``start``."""
        out = [(_midnight(start), self.replicas)]
        for ev in self.scale_events:
            at = datetime.combine(start + timedelta(days=ev.day_offset), ev.at, tzinfo=UTC)
            out.append((at, ev.replicas))
        return out

    def replicas_per_minute(self, start: date, day: date) -> np.ndarray:
        """Replicas in force at every minute of ``day`` (the scale-up takes effect at its minute)."""
        reps = np.full(MINUTES_PER_DAY, self.replicas, dtype=np.int64)
        day0 = _midnight(day)
        for at, n in self.replica_schedule(start)[1:]:
            minute = int((at - day0).total_seconds() // 60)
            if minute < MINUTES_PER_DAY:
                reps[max(minute, 0) :] = n
        return reps


def _midnight(d: date) -> datetime:
    return datetime.combine(d, time(0), tzinfo=UTC)


LAT_70B = LatencyModel(
    prefill_tps=25_000,
    cached_ms_per_ktok=1.0,
    overhead_ms=35,
    tpot_ms=18,
    tpot_ms_per_100k_ctx=3.0,
    stall_max_ms=400,
    prefill_capacity_tps=30_000,
    decode_capacity_tps=2_600,
)

LAT_8B = LatencyModel(
    prefill_tps=9_000,
    cached_ms_per_ktok=0.5,
    overhead_ms=20,
    tpot_ms=11,
    tpot_ms_per_100k_ctx=2.0,
    stall_max_ms=300,
    prefill_capacity_tps=10_000,
    decode_capacity_tps=1_800,
)

LAT_QWEN = LatencyModel(
    prefill_tps=30_000,
    cached_ms_per_ktok=1.5,
    overhead_ms=40,
    tpot_ms=16,
    tpot_ms_per_100k_ctx=3.0,
    stall_max_ms=400,
    prefill_capacity_tps=36_000,
    decode_capacity_tps=2_400,
)

P5 = Instance("p5.48xlarge", 55.04, 35.78, "8x NVIDIA H100 80GB")
P5E = Instance("p5e.48xlarge", 63.30, 41.15, "8x NVIDIA H200 141GB")
#: Router / tokenizer node in front of each cloud deployment.
ROUTER = Instance("c7i.4xlarge", 0.714, 0.50, "16 vCPU router node")
#: Shared gateway nodes (gw-a, gw-b, gw-c) in front of every deployment.
GATEWAY = Instance("c7i.2xlarge", 0.357, 0.25, "8 vCPU gateway node")

DEPLOYMENTS: tuple[Deployment, ...] = (
    Deployment(
        deployment_id="llama70b-h100-tp8",
        model="llama-3.1-70b-instruct",
        gpu_type="H100-SXM-80GB",
        gpus_per_replica=8,
        tp=8,
        pp=1,
        quantization="fp8",
        cache_policy="prefix-cache",
        gpu_power_w=700,
        slots_per_replica=48,
        hosting="cloud",
        rate_card=None,
        resource_ids=("arn:aws:ec2:*:instance/i-0a70b*", "arn:aws:ec2:*:volume/vol-0a70b*"),
        replicas=2,
        scale_events=(ScaleEvent(day_offset=3, at=time(12, 0), replicas=3),),
        mean_utilization=0.64,
        latency=LAT_70B,
        instance=P5,
        instance_prefix="0a70b",
        list_price_output_per_mtok=0.88,
    ),
    Deployment(
        deployment_id="llama8b-l40s-onprem",
        model="llama-3.1-8b-instruct",
        gpu_type="L40S-48GB",
        gpus_per_replica=1,
        tp=1,
        pp=1,
        quantization="bf16",
        cache_policy="prefix-cache",
        gpu_power_w=350,
        slots_per_replica=64,
        hosting="on_prem",
        rate_card="onprem-l40s",
        resource_ids=(),
        replicas=6,
        scale_events=(),
        mean_utilization=0.42,
        latency=LAT_8B,
        instance=None,
        instance_prefix="",
        list_price_output_per_mtok=0.18,
    ),
    Deployment(
        deployment_id="qwen3coder-h200-tp8",
        model="qwen3-coder-480b-a35b",
        gpu_type="H200-SXM-141GB",
        gpus_per_replica=8,
        tp=8,
        pp=1,
        quantization="fp8",
        cache_policy="prefix-cache",
        gpu_power_w=700,
        slots_per_replica=32,
        hosting="cloud",
        rate_card=None,
        resource_ids=(
            "arn:aws:ec2:*:instance/i-0c0de*",
            "arn:aws:ec2:*:volume/vol-0c0de*",
            "arn:aws:ec2:*:snapshot/snap-0c0de*",
        ),
        replicas=4,
        scale_events=(),
        mean_utilization=0.42,
        latency=LAT_QWEN,
        instance=P5E,
        instance_prefix="0c0de",
        list_price_output_per_mtok=1.60,
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


RATE_CARDS = (RateCard("onprem-l40s", 11_000, 35_040, 0.35, 1.35, 0.11, 0.12),)

STREAMS: tuple[Stream, ...] = (
    Stream(
        "chat-70b",
        "llama70b-h100-tp8",
        CHAT_70B,
        0.33,
        (("team-search", 0.35), ("team-support", 0.40), ("acme-corp", 0.25)),
    ),
    Stream("agent-70b", "llama70b-h100-tp8", AGENT_70B, 0.09, (("agent-platform", 0.6), ("acme-corp", 0.4))),
    Stream(
        "chat-8b",
        "llama8b-l40s-onprem",
        CHAT_8B,
        0.30,
        (("team-support", 0.5), ("team-search", 0.3), ("globex-labs", 0.2)),
    ),
    Stream(
        "coding-agent",
        "qwen3coder-h200-tp8",
        CODING_AGENT,
        0.28,
        (("agent-platform", 0.6), ("acme-corp", 0.2), ("globex-labs", 0.1), ("team-search", 0.1)),
    ),
)

TENANTS: tuple[str, ...] = tuple(sorted({t for s in STREAMS for t, _ in s.tenants} | {"loadtest"}))

#: Share of the 8B model's rows logged without deployment_id (an older gateway route); the model has exactly
#: one deployment, so the contract resolves it.
MISSING_DEPLOYMENT_SHARE = {"llama8b-l40s-onprem": 0.04}


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
MODEL_SLO_OVERRIDES = {"llama-3.1-8b-instruct": {"tpot_p99_ms": 30}}


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
