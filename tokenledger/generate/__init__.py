"""Synthetic landing zone: gateway logs, a FOCUS billing export and configs for a made-up serving fleet.

The scenario (models, deployments, workloads, load shape, latency model) is data in ``scenario.py``. Every day
is drawn from random streams keyed by (seed, day), so the same arguments give byte-identical files and day D
does not depend on how many days were generated. On request the first day also holds hosted-API models and their
request logs in the formats the adapters read (``adapter_logs.py``), and a load test can be written as a
``vllm bench serve`` sweep (``loadtest.generate_vllm_bench_run``).
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from multiprocessing import get_context
from pathlib import Path

from .adapter_logs import FormatLog, write_adapter_logs
from .billing import write_focus
from .configs import write_configs
from .fleet import initial_replicas
from .gateway import MAX_PARTS, BadRow, DaySummary, generate_day
from .loadtest import (
    capacity_rps,
    default_steps,
    generate_loadtest_run,
    generate_vllm_bench_run,
    knee_index,
    rho_knee,
)
from .telemetry import write_telemetry

#: The deployment the demo load-tests (`tokenledger generate --with-loadtest`): the one whose peaks cross capacity.
DEMO_LOADTEST_MODEL, DEMO_LOADTEST_DEPLOYMENT = "llama-3.1-70b-instruct", "llama70b-h100nvl-tp2"
#: The demo's `vllm bench serve` sweep (also `--with-loadtest`): the 8B on its L40S at three round request rates, 5
#: minutes each. The 8B's policy asks a TPOT P99 within 30 ms, which breaks at 2.5 req/s (~0.81 of one replica),
#: so lambda_slo_max is 2 req/s; 5-minute steps are too short to verify it (30 stable minutes needed).
DEMO_BENCH_MODEL, DEMO_BENCH_DEPLOYMENT = "llama-3.1-8b-instruct", "llama8b-l40s-onprem"
DEMO_BENCH_RATES, DEMO_BENCH_STEP_MINUTES = (1.0, 2.0, 2.5), 5

__all__ = [
    "DEMO_BENCH_DEPLOYMENT",
    "DEMO_BENCH_MODEL",
    "DEMO_BENCH_RATES",
    "DEMO_BENCH_STEP_MINUTES",
    "DEMO_LOADTEST_DEPLOYMENT",
    "DEMO_LOADTEST_MODEL",
    "BadRow",
    "DaySummary",
    "FormatLog",
    "GenerateSummary",
    "MAX_PARTS",
    "capacity_rps",
    "default_steps",
    "generate_landing_zone",
    "generate_loadtest_run",
    "generate_vllm_bench_run",
    "initial_replicas",
    "knee_index",
    "rho_knee",
]


@dataclass(frozen=True)
class GenerateSummary:
    """What was written: counts per day, every bad row with its file and line, and all paths."""

    home: Path
    start: date
    days: int
    requests: int  # distinct valid requests over all days
    rows_written: int  # gateway rows including duplicate copies and bad rows
    duplicate_rows: int
    bad_rows: tuple[BadRow, ...]
    per_day: tuple[DaySummary, ...]
    gateway_files: tuple[Path, ...]
    billing_file: Path
    billing_rows: int
    config_files: tuple[Path, ...]
    other_format_logs: tuple[FormatLog, ...] = ()  # the first day's logs in the adapters' formats, if asked
    gpu_files: tuple[Path, ...] = ()  # raw/gpu/: the fleet's telemetry, consistent with its load


def generate_landing_zone(
    home: Path, start: date, days: int, requests_per_day: int, seed: int, bad_rows_per_day: int = 8,
    other_formats: bool = False, parts: int = 1, workers: int = 1,
) -> GenerateSummary:
    """Write ``raw/gateway``, ``raw/gpu``, ``raw/billing`` and ``config`` under ``home`` for ``days`` days from
    ``start``.

    ``requests_per_day`` is the weekday volume; Saturdays and Sundays carry 60% and 55% of it (plus or minus
    Poisson noise and bursts). The fleet in ``config/deployments.yaml`` and the bill is sized to it
    (:mod:`tokenledger.generate.fleet`): per-GPU speeds are the scenario's, whatever the volume.
    ``bad_rows_per_day`` invalid rows are added to each day, one of each kind in ``scenario.BAD_ROW_KINDS`` order.

    With ``other_formats`` (what `tokenledger generate` does), the inventory also holds the hosted-API models of
    ``scenario.API_DEPLOYMENTS``, priced in costs.yaml and a LiteLLM price map in ``config/``, and the first day
    their request logs in ``raw/litellm``, ``raw/openai`` and ``raw/anthropic`` (a few hundred requests each,
    whatever the volume). Without it the landing zone is the canonical one the pipeline tests are calibrated on.

    ``parts`` > 1 writes each day as that many slices of ``requests_per_day / parts`` requests, each served by a
    fleet sized to it and written to files of its own (``gw-a-p03-...``), so that a day too large to hold in memory
    (the generator holds a part's rows, ~2.3 GB per million requests) can be written; a part's requests, sessions
    and prefix blocks are its own, and the inventory and the bill are sized to the whole day. Part 0 is what a
    one-part day of ``requests_per_day / parts`` would hold, and it alone carries the bad rows. ``workers`` > 1
    writes that many parts at once in child processes (writing one uses about one core).
    """
    if days < 1 or requests_per_day < 0 or bad_rows_per_day < 0 or not 1 <= parts <= MAX_PARTS or workers < 1:
        raise ValueError(f"days must be >= 1, requests_per_day and bad_rows_per_day >= 0, parts within "
                         f"1..{MAX_PARTS} and workers >= 1")
    home = Path(home)
    jobs = [(home, start, start + timedelta(days=i), requests_per_day // parts, seed,
             bad_rows_per_day if part == 0 else 0, part) for i in range(days) for part in range(parts)]
    if workers > 1 and len(jobs) > 1:
        # spawn, not fork: a forked child would inherit whatever the parent holds (threads, DuckDB connections).
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=get_context("spawn")) as pool:
            written = list(pool.map(generate_day, *zip(*jobs, strict=True)))
    else:
        written = [generate_day(*job) for job in jobs]
    per_day = tuple(DaySummary.merge(written[i * parts:(i + 1) * parts]) for i in range(days))
    telemetry = tuple(path for i in range(days)
                      for path in write_telemetry(home, start, start + timedelta(days=i), requests_per_day, seed))
    focus = write_focus(home, start, days, seed, requests_per_day)
    configs = write_configs(home, start, seed, requests_per_day, hosted_api=other_formats)
    other = write_adapter_logs(home, start, seed) if other_formats else ()
    return GenerateSummary(
        home=home,
        start=start,
        days=days,
        requests=sum(d.requests for d in per_day),
        rows_written=sum(d.rows_written for d in per_day),
        duplicate_rows=sum(d.duplicate_rows for d in per_day),
        bad_rows=tuple(b for d in per_day for b in d.bad_rows),
        per_day=per_day,
        gateway_files=tuple(p for d in per_day for p in d.files),
        billing_file=focus.path,
        billing_rows=focus.rows,
        config_files=tuple(configs),
        other_format_logs=other,
        gpu_files=telemetry,
    )
