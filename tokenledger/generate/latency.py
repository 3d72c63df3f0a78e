"""Load -> latency: a fluid queue minute by minute, then per-request queue, TTFT, TPOT, ITL and E2E.

Demand and capacity are in replica-minutes of work per minute. Demand is the *expected* work of the
minute's arrival intensity (diurnal shape, weekday factor, bursts), not the realized sample, so the latency
shape is the same at 20,000 and at 1,000,000 requests a day; at small volumes a realized-sample demand would
be dominated by Poisson noise. The fluid backlog carries over from minute to minute and is capped by
admission control: whatever would wait longer than ``max_wait_s`` is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scenario import LatencyModel


@dataclass(frozen=True)
class MinuteLoad:
    """Per-minute state of one deployment's queue."""

    rho: np.ndarray  # demand / capacity
    wait_start_s: np.ndarray  # fluid wait at the start of the minute (backlog / capacity)
    wait_end_s: np.ndarray
    reject_frac: np.ndarray  # share of the minute's arrivals rejected by admission control


def fluid_queue(demand: np.ndarray, capacity: np.ndarray, max_wait_s: float) -> MinuteLoad:
    """Lindley recursion ``B = clip(B + demand - capacity, 0, cap)``, looping over minutes only."""
    n = len(demand)
    backlog = np.zeros(n + 1)
    reject = np.zeros(n)
    cap = capacity * max_wait_s / 60.0
    b = 0.0
    for m in range(n):
        x = b + demand[m] - capacity[m]
        over = x - cap[m]
        if over > 0:
            reject[m] = over / demand[m]
        b = min(max(x, 0.0), cap[m])
        backlog[m + 1] = b
    return MinuteLoad(
        rho=demand / capacity,
        wait_start_s=backlog[:-1] / capacity * 60.0,
        wait_end_s=backlog[1:] / capacity * 60.0,
        reject_frac=reject,
    )


@dataclass
class Latencies:
    """Latencies (ms) of every request as if it completed; outcomes.py cuts them short where it fails."""

    queue: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    itl: np.ndarray  # NaN when output_tokens <= 1 (no gap between tokens)
    e2e: np.ndarray
    rejected: np.ndarray  # bool: admission control refused it


def mean_queue_ms(lat: LatencyModel, rho: np.ndarray | float) -> np.ndarray:
    """Mean of the stochastic (M/M/c-like) part of the queue wait at utilization ``rho``."""
    r = np.minimum(rho, lat.rho_cap)
    return lat.queue_scale_ms * r**4 / (1.0 - r)


def request_latencies(
    rng: np.random.Generator,
    lat: LatencyModel,
    load: MinuteLoad,
    t_ms: np.ndarray,
    input_tokens: np.ndarray,
    cached: np.ndarray,
    output: np.ndarray,
) -> Latencies:
    """Latency of each request from the load of the minute it arrived in (``t_ms`` from the window start)."""
    n = len(t_ms)
    m = t_ms // 60_000
    frac = (t_ms % 60_000) / 60_000.0
    rho = load.rho[m]
    r = np.minimum(rho, lat.rho_cap)

    fluid = (load.wait_start_s[m] + frac * (load.wait_end_s[m] - load.wait_start_s[m])) * 1000.0
    queue = fluid + rng.exponential(1.0, n) * mean_queue_ms(lat, rho)

    recomputed = input_tokens - cached
    prefill = recomputed / lat.prefill_tps * 1000.0 * (1.0 + lat.prefill_load_gain * r)
    prefill += cached / 1000.0 * lat.cached_ms_per_ktok
    tpot = (lat.tpot_ms + lat.tpot_ms_per_100k_ctx * input_tokens / 1e5) * (1.0 + lat.tpot_load_gain * r**2)
    tpot *= rng.lognormal(0.0, lat.tpot_sigma, n)
    overhead = lat.overhead_ms * rng.uniform(0.8, 1.2, n)
    ttft = queue + overhead + prefill + tpot

    # ITL: the longest of (output - 1) gaps, heavy-tailed in the number of gaps, plus an occasional stall
    # (a long prefill or a preemption) that becomes frequent near saturation.
    factor = 1.1 + lat.itl_tail * np.log1p(output) * rng.exponential(1.0, n)
    ramp = np.clip((rho - lat.stall_rho_start) / (lat.stall_rho_full - lat.stall_rho_start), 0.0, 1.0)
    stalled = rng.random(n) < lat.stall_base + lat.stall_peak * ramp**2
    stall = np.where(stalled, rng.uniform(lat.stall_min_ms, lat.stall_max_ms, n), 0.0)
    itl = tpot * factor + stall
    has_gap = output >= 2
    e2e = ttft + np.where(has_gap, (output - 1) * tpot + (itl - tpot), 0.0) + rng.uniform(1.0, 5.0, n)
    return Latencies(
        queue=queue,
        ttft=ttft,
        tpot=tpot,
        itl=np.where(has_gap, itl, np.nan),
        e2e=e2e,
        rejected=rng.random(n) < load.reject_frac[m],
    )
