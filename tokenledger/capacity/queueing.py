"""Capacity math of docs/metrics.md, section 6: Erlang C, Little's law, seed 000's rule, fluid backlog, headroom,
failure domains and the units a deployment is bought in.

Small pure functions over plain numbers, so that the planning tables can be checked by hand. Rates are per
second and times in seconds unless a name says otherwise; `load` is the offered load a = arrival rate x mean
service time, in Erlangs (the mean number of busy slots).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Float noise must not add a replica: 12.000000000000002 replicas is 12.
_CEIL_DECIMALS = 9


def _ceil(x: float) -> int:
    return math.ceil(round(x, _CEIL_DECIMALS))


def _check_slots_and_load(c: int, load: float) -> None:
    if c < 1:
        raise ValueError(f"slots c must be at least 1, got {c}")
    if not load >= 0:
        raise ValueError(f"offered load must be a number >= 0, got {load}")


def erlang_b(c: int, load: float) -> float:
    """Blocking probability of M/M/c/c (Erlang B), by the recursion B(0) = 1, B(k) = a B(k-1) / (k + a B(k-1)).

    The recursion only multiplies and divides numbers in [0, 1] and k, so it neither overflows nor loses
    precision for c in the thousands, where the textbook sum a^c/c! / sum_k a^k/k! overflows.
    """
    _check_slots_and_load(c, load)
    b = 1.0
    for k in range(1, c + 1):
        b = load * b / (k + load * b)
    return b


def erlang_c(c: int, load: float) -> float:
    """Probability that an arrival has to wait in M/M/c with offered load a = lambda * s (Erlang C).

    C(c, a) = c B / (c - a (1 - B)) with B = ErlangB(c, a), the same as the textbook
    (a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a)). 1.0 when a >= c: the queue never empties.
    """
    _check_slots_and_load(c, load)
    if load >= c:
        return 1.0
    b = erlang_b(c, load)
    return c * b / (c - load * (1.0 - b))


def p_wait_longer_than(c: int, load: float, t: float, service_time: float) -> float:
    """P(wait > t) in M/M/c: ErlangC(c, a) * exp(-(c - a) * t / s), with t and the mean service time s in seconds.

    1.0 when a >= c (an unstable queue: every arrival eventually waits longer than any t).
    """
    _check_slots_and_load(c, load)
    if service_time <= 0:
        raise ValueError(f"mean service time must be > 0, got {service_time}")
    if t < 0:
        raise ValueError(f"wait limit must be >= 0, got {t}")
    if load >= c:
        return 1.0
    return erlang_c(c, load) * math.exp(-(c - load) * t / service_time)


def least_slots(arrival_rate: float, service_time: float, wait_limit_s: float, target_prob: float) -> int:
    """The least number of slots c (> a, so the queue is stable) with P(wait > wait_limit_s) <= target_prob.

    The capacity plan calls it with the planning peak's arrival rate, the mean E2E of successful requests, the
    policy's queue_p99_ms (in seconds) and 1 - attainment_target. 0 when nothing arrives.
    """
    if arrival_rate < 0:
        raise ValueError(f"arrival rate must be >= 0, got {arrival_rate}")
    if service_time <= 0:
        raise ValueError(f"mean service time must be > 0, got {service_time}")
    if not 0 < target_prob <= 1:
        raise ValueError(f"target probability must be in (0, 1], got {target_prob}")
    if wait_limit_s < 0:
        raise ValueError(f"wait limit must be >= 0, got {wait_limit_s}")
    load = arrival_rate * service_time
    if load == 0:
        return 0
    # Erlang B carried forward one slot at a time: one pass of the recursion for the whole search.
    b = 1.0
    c = 0
    while True:
        c += 1
        b = load * b / (c + load * b)
        if c <= load:
            continue
        p_wait = c * b / (c - load * (1.0 - b))
        if p_wait * math.exp(-(c - load) * wait_limit_s / service_time) <= target_prob:
            return c


def littles_law_concurrency(arrival_rate: float, mean_latency_s: float) -> float:
    """Mean requests in flight, L = lambda * W (arrival rate in req/s times mean E2E latency in s)."""
    if arrival_rate < 0 or mean_latency_s < 0:
        raise ValueError("arrival rate and mean latency must be >= 0")
    return arrival_rate * mean_latency_s


def seed_rule_replicas(peak_qps: float, p99_service_time_s: float, sla_wait_s: float,
                       per_replica_concurrency: float, redundancy: float = 0.8) -> tuple[float, int]:
    """Seed 000's rule: (required_concurrency, replicas).

    required_concurrency = peak_qps * (p99_service_time + sla_wait);
    replicas = ceil(required_concurrency / (per_replica_concurrency * redundancy)), where redundancy (0.8 in
    the seed) is the share of a replica's measured concurrency that is planned for.
    """
    if per_replica_concurrency <= 0:
        raise ValueError(f"per-replica concurrency must be > 0, got {per_replica_concurrency}")
    if not 0 < redundancy <= 1:
        raise ValueError(f"redundancy must be in (0, 1], got {redundancy}")
    required = peak_qps * (p99_service_time_s + sla_wait_s)
    return required, _ceil(required / (per_replica_concurrency * redundancy))


def fluid_backlog(demand: Sequence[float], capacity: float | Sequence[float], initial: float = 0.0) -> list[float]:
    """Backlog at the end of each period: backlog_h = max(0, backlog_{h-1} + demand_h - capacity_h), starting from
    `initial` (the backlog carried in from before the first period, 0 by default).

    `capacity` is one figure for every period or one per period, in the same unit as `demand` (e.g. output
    tokens per hour). Work not done in a period is carried over, never lost.
    """
    if not initial >= 0:
        raise ValueError(f"initial backlog must be a number >= 0, got {initial}")
    capacities = _per_period(capacity, len(demand))
    backlog, out = float(initial), []
    for d, cap in zip(demand, capacities, strict=True):
        backlog = max(0.0, backlog + d - cap)
        out.append(backlog)
    return out


@dataclass(frozen=True)
class Shortfall:
    """Where demand outran capacity: periods (hours) whose demand exceeded capacity, and the carried backlog."""

    hours_over_capacity: int
    max_backlog: float
    backlog: list[float]


def capacity_shortfall(demand: Sequence[float], capacity: float | Sequence[float],
                       initial: float = 0.0) -> Shortfall:
    """Hours whose demand exceeds capacity, the largest fluid backlog and the backlog per hour, from the backlog
    `initial` carried in (the previous day's last backlog).

    Seed 000: capacity 100/h, demand 40/h for 18 h and 160/h for 6 h is 1,680 of 2,400 (70%) a day, yet 6
    hours are over capacity, and a backlog of 360 builds when the six peak hours are consecutive.
    """
    capacities = _per_period(capacity, len(demand))
    backlog = fluid_backlog(demand, capacities, initial)
    over = sum(1 for d, cap in zip(demand, capacities, strict=True) if d > cap)
    return Shortfall(over, max(backlog, default=0.0), backlog)


def _per_period(capacity: float | Sequence[float], periods: int) -> list[float]:
    if isinstance(capacity, int | float):
        return [float(capacity)] * periods
    if len(capacity) != periods:
        raise ValueError(f"capacity has {len(capacity)} periods but demand has {periods}")
    return [float(c) for c in capacity]


@dataclass(frozen=True)
class Headroom:
    """The policy's headroom items (slo.yaml `headroom`): the failure domains that may fail (N-k) and four
    percentages (0.10 = 10%). `gpus_per_failure_domain` is the GPUs of one domain (failure_domain_gpus); None is a
    replica, the default domain."""

    n_minus_k: int = 0
    scaling_lag_pct: float = 0.0
    forecast_error_pct: float = 0.0
    release_pct: float = 0.0
    jitter_pct: float = 0.0
    gpus_per_failure_domain: int | None = None

    def percentages(self) -> dict[str, float]:
        """The percentage items in the order they are applied (and itemized)."""
        return {"scaling_lag": self.scaling_lag_pct, "forecast_error": self.forecast_error_pct,
                "release": self.release_pct, "jitter": self.jitter_pct}

    def failure_replicas(self, gpus_per_replica: int) -> int:
        """The replicas n_minus_k failed domains take down: n_minus_k x replicas_per_failure_domain."""
        domain = gpus_per_replica if self.gpus_per_failure_domain is None else self.gpus_per_failure_domain
        return self.n_minus_k * replicas_per_failure_domain(domain, gpus_per_replica)


# The domains the policy's N-k may count (slo.yaml headroom.failure_domain) and the units a deployment is bought in
# (deployments.yaml bought_in).
FAILURE_DOMAINS = ("replica", "node", "rack")
UNITS_BOUGHT = ("gpu", "node", "rack")


def unit_gpus(unit: str, gpus_per_replica: int, gpus_per_node: int | None, nodes_per_rack: int | None
              ) -> int | None:
    """The GPUs of one `unit` (a failure domain or the unit bought): a gpu 1, a replica gpus_per_replica, a node
    gpus_per_node, a rack gpus_per_node x nodes_per_rack; None when the inventory does not give what it takes."""
    if unit == "gpu":
        return 1
    if unit == "replica":
        return gpus_per_replica
    if unit == "node":
        return gpus_per_node
    if unit == "rack":
        return None if gpus_per_node is None or nodes_per_rack is None else gpus_per_node * nodes_per_rack
    raise ValueError(f"unknown unit {unit!r}: one of {FAILURE_DOMAINS + UNITS_BOUGHT}")


def replicas_per_failure_domain(gpus_per_domain: int, gpus_per_replica: int) -> int:
    """The replicas one failed domain takes down: every replica with a GPU in it. Replicas are placed within one
    domain when they fit (a node of 8 holds 4 replicas of 2) and over whole domains of their own when they do not (a
    replica of 16 over 2 nodes of 8), so that is the domain's GPUs rounded up to whole replicas,
    ceil(gpus_per_domain / gpus_per_replica): 4 for a node of 8 and replicas of 2, 1 for a node of 8 and a replica
    of 16; 3 for a node of 8 and replicas of 3, one more than it holds whole, as a replica may straddle two nodes."""
    if gpus_per_domain < 1 or gpus_per_replica < 1:
        raise ValueError("a failure domain and a replica have at least one GPU")
    return _ceil(gpus_per_domain / gpus_per_replica)


def units_needed(gpus: float, gpus_per_unit: int) -> int:
    """Whole units bought (nodes, racks, GPUs) that hold `gpus`: ceil(gpus / gpus_per_unit)."""
    if gpus < 0 or gpus_per_unit < 1:
        raise ValueError("GPUs must be >= 0 and a unit has at least one GPU")
    return _ceil(gpus / gpus_per_unit)


@dataclass(frozen=True)
class GpuNeed:
    """GPUs needed and where they come from; `base_gpus + sum(pct_gpus) + failure_gpus == gpus_needed`.

    `pct_gpus` gives the GPUs each percentage adds when applied in turn (scaling lag, forecast error, release,
    jitter), each on top of the ones before: the product of (1 + pct) split into additive parts.
    """

    replicas: int
    gpus_per_replica: int
    base_gpus: float
    pct_factor: float
    pct_gpus: dict[str, float]
    failure_replicas: int
    failure_gpus: float
    gpus_needed: float

    @property
    def headroom_gpus(self) -> float:
        return self.gpus_needed - self.base_gpus

    @property
    def replicas_needed(self) -> int:
        """Whole replicas that hold gpus_needed (GPUs come in replicas)."""
        return _ceil(self.gpus_needed / self.gpus_per_replica)

    def surplus(self, gpus_deployed: float) -> float:
        """GPUs deployed minus GPUs needed: negative is a deficit."""
        return gpus_deployed - self.gpus_needed


def gpus_needed(replicas: int, gpus_per_replica: int, headroom: Headroom) -> GpuNeed:
    """replicas * gpus_per_replica * prod(1 + pct) + failure replicas * gpus_per_replica (docs/metrics.md, section 6),
    the failure replicas those of the policy's n_minus_k failure domains (Headroom.failure_replicas)."""
    if replicas < 0 or gpus_per_replica < 1:
        raise ValueError("replicas must be >= 0 and gpus_per_replica >= 1")
    return _with_headroom(replicas, float(replicas * gpus_per_replica), gpus_per_replica, headroom)


def goodput_gpus_needed(peak_token_rate: float, goodput_per_gpu: float, gpus_per_replica: int,
                        headroom: Headroom) -> GpuNeed:
    """Seed 002's first sizing: GPUs needed ~ peak token rate / sustainable goodput per GPU x headroom.

    The base is peak_token_rate / goodput_per_gpu GPUs (not rounded: the estimate the seed writes), the policy's
    percentages multiply it and the failure replicas are added at full size, as in gpus_needed; `replicas` is the
    base rounded up to whole replicas.
    """
    if peak_token_rate < 0 or not goodput_per_gpu > 0 or gpus_per_replica < 1:
        raise ValueError("peak token rate must be >= 0, goodput per GPU > 0 and gpus_per_replica >= 1")
    base = peak_token_rate / goodput_per_gpu
    return _with_headroom(_ceil(base / gpus_per_replica), base, gpus_per_replica, headroom)


def _with_headroom(replicas: int, base: float, gpus_per_replica: int, headroom: Headroom) -> GpuNeed:
    if headroom.n_minus_k < 0 or any(p < 0 for p in headroom.percentages().values()):
        raise ValueError(f"headroom items must be >= 0: {headroom}")
    running, parts = base, {}
    for name, pct in headroom.percentages().items():
        parts[name] = running * pct
        running += parts[name]
    failure_replicas = headroom.failure_replicas(gpus_per_replica)
    failure = float(failure_replicas * gpus_per_replica)
    return GpuNeed(
        replicas=replicas,
        gpus_per_replica=gpus_per_replica,
        base_gpus=base,
        pct_factor=math.prod(1 + p for p in headroom.percentages().values()),
        pct_gpus=parts,
        failure_replicas=failure_replicas,
        failure_gpus=failure,
        gpus_needed=running + failure,
    )
