"""The fleet sized to the generated volume: the expected work of a request, and the replicas each deployment runs.

A request costs ``recomputed_input / prefill_capacity_tps + output / decode_capacity_tps`` replica-seconds of its
deployment (the physical speeds in ``scenario.py``). A volume of ``requests_per_day`` on a plain weekday keeps
``mean_work_rate`` replicas busy on average, and the deployment runs ``round(mean_work_rate / target_utilization)``
replicas (at least one) until its scale events add more. The work per request is a fixed-seed Monte-Carlo
estimate, so it is a property of the scenario, not of the caller's seed.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from functools import cache

import numpy as np

from .scenario import DEPLOYMENT_BY_ID, MINUTES_PER_DAY, SCENARIO_SEED, STREAMS, Deployment, Stream, rng_for
from .workload import Batch, agent_step_samples, chat_batch


def streams_of(deployment_id: str) -> list[Stream]:
    return [s for s in STREAMS if s.deployment_id == deployment_id]


def requests_of(rng: np.random.Generator, stream: Stream, t_ms: np.ndarray) -> Batch:
    """Requests of ``stream`` at times ``t_ms``; agent steps are drawn as independent requests."""
    if stream.is_agent:
        b = agent_step_samples(rng, stream, len(t_ms))
        b.t_ms = t_ms
        return b
    return chat_batch(rng, stream, t_ms)


@cache
def expected_work_s(deployment_id: str) -> float:
    """Mean replica-seconds of work per request of the deployment's production mix (fixed-seed sample)."""
    lat = DEPLOYMENT_BY_ID[deployment_id].latency
    streams = streams_of(deployment_id)
    total_share = sum(s.share for s in streams)
    work = 0.0
    for s in streams:
        b = requests_of(rng_for(SCENARIO_SEED, s.name, "work"), s, np.zeros(50_000, dtype=np.int64))
        per_request = (b.input_tokens - b.cached) / lat.prefill_capacity_tps + b.output / lat.decode_capacity_tps
        work += s.share / total_share * float(per_request.mean())
    return work


def mean_work_rate(deployment_id: str, requests_per_day: float) -> float:
    """Replicas the deployment's share of ``requests_per_day`` keeps busy on an average minute of a weekday."""
    share = sum(s.share for s in streams_of(deployment_id))
    return requests_per_day * share / 86_400 * expected_work_s(deployment_id)


def initial_replicas(deployment_id: str, requests_per_day: float | None) -> int:
    """Replicas sized to the volume: its mean work over the deployment's target utilization, rounded, at least
    one. Without a volume, the smallest fleet (one replica)."""
    if requests_per_day is None:
        return 1
    dep = DEPLOYMENT_BY_ID[deployment_id]
    return max(1, round(mean_work_rate(deployment_id, requests_per_day) / dep.target_utilization))


def _midnight(d: date) -> datetime:
    return datetime.combine(d, time(0), tzinfo=UTC)


def replica_schedule(dep: Deployment, start: date, requests_per_day: float | None) -> list[tuple[datetime, int]]:
    """(from, replicas) pairs in time order, the first from midnight of ``start``."""
    replicas = initial_replicas(dep.deployment_id, requests_per_day)
    out = [(_midnight(start), replicas)]
    for ev in dep.scale_events:
        replicas += ev.add_replicas
        out.append((datetime.combine(start + timedelta(days=ev.day_offset), ev.at, tzinfo=UTC), replicas))
    return out


def replicas_per_minute(dep: Deployment, start: date, day: date, requests_per_day: float | None) -> np.ndarray:
    """Replicas in force at every minute of ``day`` (a scale event takes effect at its minute)."""
    schedule = replica_schedule(dep, start, requests_per_day)
    reps = np.full(MINUTES_PER_DAY, schedule[0][1], dtype=np.int64)
    day0 = _midnight(day)
    for at, n in schedule[1:]:
        minute = int((at - day0).total_seconds() // 60)
        if minute < MINUTES_PER_DAY:
            reps[max(minute, 0):] = n
    return reps
