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

import json
import math
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from .fleet import expected_work_s, initial_replicas, requests_of, streams_of
from .gateway import NODE_INDEX, Traffic, connect, mix64, serve, to_arrow, write_files
from .latency import mean_queue_ms
from .outcomes import OK
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


#: The checkpoint a `vllm bench serve` client names (its --model), per scenario model; written as model_id.
BENCH_MODEL_IDS = {
    "llama-3.1-70b-instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "qwen3-coder-30b-a3b-instruct": "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8",
}
NOT_LOGGED = "(not logged)"


def _gaps_s(rng: np.random.Generator, output: int, decode_ms: float, itl_max_ms: float) -> list[float]:
    """The gaps between a stream's chunks (one token each), in seconds: ``output - 1`` of them summing to the decode
    time, the longest ``itl_max_ms`` where the request recorded one, the others jittered around their mean."""
    n = output - 1
    if n <= 0:
        return []
    share = rng.gamma(50.0, size=n)
    gaps = decode_ms * share / share.sum()
    if n > 1 and np.isfinite(itl_max_ms) and decode_ms / n <= itl_max_ms <= decode_ms:
        rest = np.delete(share, 0)
        gaps = np.insert((decode_ms - itl_max_ms) * rest / rest.sum(), int(rng.integers(0, n)), itl_max_ms)
    return [round(g / 1000, 5) for g in gaps.tolist()]


def _percentiles(name: str, values_ms: np.ndarray) -> dict[str, float]:
    if len(values_ms) == 0:
        return {f"{k}_{name}_ms": 0.0 for k in ("mean", "median", "std", "p99")}
    return {f"mean_{name}_ms": round(float(np.mean(values_ms)), 3),
            f"median_{name}_ms": round(float(np.median(values_ms)), 3),
            f"std_{name}_ms": round(float(np.std(values_ms)), 3),
            f"p99_{name}_ms": round(float(np.percentile(values_ms, 99)), 3)}


def _bench_result(rng: np.random.Generator, tr: Traffic, model_id: str, rate: float, saved_at: datetime) -> dict:
    """One step's requests as the JSON `vllm bench serve --save-result --save-detailed` (vLLM 0.10) saves."""
    ok = tr.status == OK
    first = float(tr.batch.t_ms[0]) if len(tr) else 0.0
    ends = tr.batch.t_ms + np.where(ok, tr.e2e, 0.0)
    duration_s = float(ends.max() - first) / 1000 if len(tr) else 0.0
    output = np.where(ok, tr.output, 0)
    itls = [_gaps_s(rng, int(o), float(e - f), float(m)) if good else []
            for good, o, e, f, m in zip(ok, tr.output, tr.e2e, tr.ttft, tr.itl, strict=True)]
    gaps_ms = np.array([g * 1000 for gaps in itls for g in gaps])
    tpot_ms = np.array([sum(g) * 1000 / len(g) for g in itls if g])
    completed, total_in, total_out = int(ok.sum()), int(tr.batch.input_tokens[ok].sum()), int(output.sum())
    return {
        "date": saved_at.strftime("%Y%m%d-%H%M%S"), "backend": "vllm", "model_id": model_id,
        "tokenizer_id": model_id, "num_prompts": len(tr), "request_rate": rate, "burstiness": 1.0,
        "max_concurrency": None, "duration": round(duration_s, 6), "completed": completed,
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": round(completed / duration_s, 6), "request_goodput": None,
        "output_throughput": round(total_out / duration_s, 6),
        "total_token_throughput": round((total_in + total_out) / duration_s, 6),
        "input_lens": tr.batch.input_tokens.tolist(), "output_lens": output.tolist(),
        "ttfts": [round(t / 1000, 6) if good else 0.0 for good, t in zip(ok, tr.ttft.tolist(), strict=True)],
        "itls": itls, "generated_texts": [NOT_LOGGED if good else "" for good in ok],
        "errors": ["" if good else "Internal Server Error" for good in ok],
        **_percentiles("ttft", tr.ttft[ok]), **_percentiles("tpot", tpot_ms), **_percentiles("itl", gaps_ms),
        **_percentiles("e2el", tr.e2e[ok]),
    }


def generate_vllm_bench_run(
    home: Path,
    run_id: str,
    model: str,
    deployment_id: str,
    start: datetime,
    rates: list[float],
    step_minutes: int,
    seed: int,
    requests_per_day: int | None = None,
) -> Path:
    """Write ``raw/loadtest/<run_id>/`` as a `vllm bench serve` sweep: ``run.yaml`` with ``format: vllm-bench`` and
    one ``--save-result --save-detailed`` JSON file per rate (docs/configuration.md, "vLLM benchmark results as a
    load-test run"); return the run folder.

    The requests are drawn as :func:`generate_loadtest_run` draws them (Poisson arrivals at each rate for
    ``step_minutes``, the deployment's production mix, its initial replicas at ``requests_per_day``, the production
    latency model), then saved the way vLLM 0.10's client saves them (the scenario's vLLM deployments run 0.10.1):
    without start_times, latencies or queue_times, so the pipeline spaces each step's requests evenly over its
    duration and TTFT includes the server's queue; one gap per streamed token, the longest the request's ITL. A
    failed request is an "Internal Server Error" with no first token. Prompts and generated texts are not written.
    """
    dep = _scenario_deployment(model, deployment_id)
    replicas = initial_replicas(deployment_id, requests_per_day)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    run_key = zlib.crc32(run_id.encode())
    tr = _run_traffic(deployment_id, [float(r) for r in rates], step_minutes, seed, run_key, replicas)
    rng = rng_for(seed, "vllm-bench", run_key, "gaps")
    folder = Path(home) / "raw" / "loadtest" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    model_id = BENCH_MODEL_IDS[model]
    step_ms = step_minutes * 60_000
    for i, rate in enumerate(rates):
        idx = np.flatnonzero((tr.batch.t_ms >= i * step_ms) & (tr.batch.t_ms < (i + 1) * step_ms))
        saved_at = start + timedelta(minutes=(i + 1) * step_minutes)
        result = _bench_result(rng, tr.take(idx), model_id, float(rate), saved_at)
        name = f"vllm-{rate:g}qps-{model_id.split('/')[-1]}-{result['date']}.json"
        (folder / name).write_text(json.dumps(result))
    (folder / "run.yaml").write_text(
        f"# Generated by tokenledger.generate.generate_vllm_bench_run (seed {seed}): `vllm bench serve` at "
        f"{len(rates)} request rates,\n"
        f"# Poisson arrivals, {step_minutes} minutes a rate, against {replicas} replica(s) "
        f"({replicas * dep.gpus_per_replica} x {dep.gpu_type}).\n"
        f"run_id: {run_id}\n"
        "format: vllm-bench\n"
        f"model: {model}\n"
        f"deployment_id: {deployment_id}\n"
        f"start: {_iso(start)}\n"
        f"warmup_min: {min(5, step_minutes // 5)}\n"
    )
    return folder
