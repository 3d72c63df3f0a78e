"""Synthetic load-test runs: arrival-rate steps against one deployment at a fixed number of replicas.

A load test's arrival rates are absolute (requests/s), so utilization comes from the physical capacity: a request
costs ``recomputed / prefill_capacity_tps + output / decode_capacity_tps`` replica-seconds
(:func:`tokenledger.generate.fleet.expected_work_s`), and the deployment's capacity is ``replicas / E[cost]``
requests/s (:func:`capacity_rps`), the same machine the production logs of any volume describe. Each step then
runs at ``rho = rate / capacity_rps`` through the same fluid queue and latency model as production.

The knee follows from the latency model: the stochastic queue wait is exponential with mean
``queue_scale_ms * rho**4 / (1 - rho)``, so its P99 (ln 100 times the mean) reaches the policy's
``queue_p99_ms`` (300 ms) at ``rho_knee`` ~= 0.87 (:func:`rho_knee`). Below it every commitment holds (TTFT
per bucket, ITL, TPOT, success rate); the queue, TTFT and ITL (stalls) break together above it. The default
steps sit at rho = 0.30, 0.50, 0.65, 0.80, 0.95, 1.10, so the knee is step index 3 (:func:`knee_index`).
"""

from __future__ import annotations

import math
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from .fleet import expected_work_s, initial_replicas, requests_of, streams_of
from .gateway import NODE_INDEX, Traffic, connect, mix64, serve, to_arrow, write_files
from .latency import mean_queue_ms
from .scenario import (
    DEPLOYMENT_BY_ID,
    DEPLOYMENTS,
    LOADTEST_OUTCOMES,
    QUEUE_P99_MS,
    TENANTS,
    Deployment,
    rng_for,
)
from .workload import Batch, poisson_times

#: Default steps as utilization of the deployment's capacity at its initial replica count.
LOADTEST_RHO = (0.30, 0.50, 0.65, 0.80, 0.95, 1.10)
_LOADTEST_KEY_OFFSET = np.uint64(1 << 62)  # keeps load-test request ids apart from production ones


def capacity_rps(deployment_id: str, replicas: int | None = None, requests_per_day: int | None = None) -> float:
    """Requests/s the deployment completes at full utilization: its replicas over the expected work of a request.

    The replicas are ``replicas`` or, by default, the fleet sized to ``requests_per_day``
    (:func:`tokenledger.generate.fleet.initial_replicas`, one replica without a volume): the replicas a landing
    zone of that volume starts with, so a run scheduled before any scale-up measures the inventory in force.
    """
    reps = replicas or initial_replicas(deployment_id, requests_per_day)
    return reps / expected_work_s(deployment_id)


def rho_knee(deployment_id: str) -> float:
    """Utilization at which the P99 of the queue wait reaches the SLO policy's ``queue_p99_ms``."""
    lat = DEPLOYMENT_BY_ID[deployment_id].latency
    lo, hi = 0.01, lat.rho_cap
    for _ in range(60):
        mid = (lo + hi) / 2
        if math.log(100) * float(mean_queue_ms(lat, mid)) <= QUEUE_P99_MS:
            lo = mid
        else:
            hi = mid
    return lo


def default_steps(deployment_id: str, requests_per_day: int | None = None) -> list[float]:
    """Arrival rates (req/s, 2 decimals) at LOADTEST_RHO of the deployment's capacity."""
    cap = capacity_rps(deployment_id, requests_per_day=requests_per_day)
    return [round(r * cap, 2) for r in LOADTEST_RHO]


def knee_index(deployment_id: str, steps: list[float], requests_per_day: int | None = None) -> int:
    """Index of the last step whose utilization is within ``rho_knee`` (-1 if none): lambda_slo_max's step.

    Steps within a few percent of the knee are ambiguous (sampling noise decides); the defaults avoid them.
    """
    cap, knee = capacity_rps(deployment_id, requests_per_day=requests_per_day), rho_knee(deployment_id)
    ok = [i for i, rate in enumerate(steps) if rate / cap <= knee]
    return ok[-1] if ok else -1


def _iso(d: datetime) -> str:
    return d.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scenario_deployment(model: str, deployment_id: str) -> Deployment:
    dep = DEPLOYMENT_BY_ID.get(deployment_id)
    if dep is None or dep.model != model:
        raise ValueError(f"no deployment {deployment_id!r} serving model {model!r} in the scenario")
    return dep


def _run_traffic(deployment_id: str, rates: list[float], step_minutes: int, seed: int, run_key: int,
                 replicas: int) -> Traffic:
    """A run's requests, in arrival order (t_ms from the run's start): each rate held ``step_minutes`` with Poisson
    arrivals of the deployment's production mix, served by ``replicas`` through the production latency model."""
    minutes = len(rates) * step_minutes
    rate_per_minute = np.repeat(np.asarray(rates, dtype=float), step_minutes)
    streams = streams_of(deployment_id)
    total_share = sum(s.share for s in streams)

    batches = []
    for s in streams:
        rng = rng_for(seed, "loadtest", run_key, s.name)
        t = poisson_times(rng, rate_per_minute * 60.0 * s.share / total_share)
        batches.append(requests_of(rng, s, t))
    batch = Batch.concat(batches)
    batch.tenant = np.full(len(batch), TENANTS.index("loadtest"), dtype=np.int16)
    batch = batch.take(np.argsort(batch.t_ms, kind="stable"))

    # replicas' worth of work arriving each minute: each request costs expected_work_s replica-seconds
    demand = rate_per_minute * expected_work_s(deployment_id)
    capacity = np.full(minutes, float(replicas))
    rng = rng_for(seed, "loadtest", run_key, "serve")
    n = len(batch)
    dep_index = DEPLOYMENTS.index(DEPLOYMENT_BY_ID[deployment_id])
    return serve(rng, dep_index, batch, np.zeros(n, dtype=np.uint64), demand, capacity, LOADTEST_OUTCOMES)


def generate_loadtest_run(
    home: Path,
    run_id: str,
    model: str,
    deployment_id: str,
    start: datetime,
    steps: list[float] | None,
    step_minutes: int,
    seed: int,
    requests_per_day: int | None = None,
) -> Path:
    """Write ``raw/loadtest/<run_id>/requests.jsonl.gz`` and ``run.yaml``; return the run folder.

    ``steps`` are arrival rates in requests/s (default :func:`default_steps`), each held ``step_minutes``
    with Poisson arrivals, against the deployment's initial replica count at ``requests_per_day`` (its first
    inventory version in a landing zone of that volume, so schedule the run before the scale-up; one replica
    without a volume). ``warmup_min`` in run.yaml is the number of minutes at the start of *each* step excluded
    from that step's measurement.

    The knee is not written anywhere: a step's utilization is ``rate / capacity_rps(deployment_id)``, every
    commitment holds while it is at most ``rho_knee`` (~0.87, where the queue P99 reaches 300 ms) and the
    queue, TTFT and ITL commitments break above it. :func:`knee_index` gives the last compliant step (index 3
    for the default steps at rho 0.30, 0.50, 0.65, 0.80, 0.95, 1.10).
    """
    dep = _scenario_deployment(model, deployment_id)
    replicas = initial_replicas(deployment_id, requests_per_day)
    home = Path(home)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    rates = default_steps(deployment_id, requests_per_day) if steps is None else [float(r) for r in steps]
    run_key = zlib.crc32(run_id.encode())
    tr = _run_traffic(deployment_id, rates, step_minutes, seed, run_key, replicas)
    n = len(tr)
    keys = _LOADTEST_KEY_OFFSET + (np.uint64(run_key) << np.uint64(30)) + np.arange(n, dtype=np.uint64)
    start_ms = int(start.timestamp() * 1000)
    node = np.full(n, NODE_INDEX["gw-a"], dtype=np.int64)
    table = to_arrow(
        tr,
        start_ms,
        mix64(keys),
        np.zeros(n, dtype=bool),
        node,
        np.zeros(n, dtype=np.int8),
        np.full(n, -1, dtype=np.int8),
    )
    folder = home / "raw" / "loadtest" / run_id
    con = connect()
    write_files(con, table, folder, ["requests.jsonl.gz"])
    con.close()

    step_lines = []
    for i, rate in enumerate(rates):
        s0 = start + timedelta(minutes=i * step_minutes)
        s1 = s0 + timedelta(minutes=step_minutes)
        step_lines.append(f"  - {{arrival_rate: {rate:g}, start: {_iso(s0)}, end: {_iso(s1)}}}")
    (folder / "run.yaml").write_text(
        f"# Generated by tokenledger.generate.generate_loadtest_run (seed {seed}): Poisson arrivals,\n"
        f"# {replicas} replica(s) ({replicas * dep.gpus_per_replica} x {dep.gpu_type}), "
        f"{step_minutes} minutes per step.\n"
        f"run_id: {run_id}\n"
        f"model: {model}\n"
        f"deployment_id: {deployment_id}\n"
        f"start: {_iso(start)}\n"
        f"warmup_min: {min(5, step_minutes // 5)}\n"
        "steps:\n" + "\n".join(step_lines) + "\n"
    )
    return folder
