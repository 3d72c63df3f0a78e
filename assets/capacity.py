"""Capacity: load tests, demonstrated capacity, daily capacity, load against it, the plan and the review
(docs/metrics.md, sections 5 and 6).

core.loadtest_steps and core.capacity_windows are internal and say where a capacity figure came from;
infra.capacity_daily, infra.load_hourly, infra.capacity_plan_daily and infra.capacity_verdict_daily are published
(docs/tables.md); the capacity review is written after the day is published. The logic is in
tokenledger/capacity/day.py (the rules and the queueing math of tokenledger/capacity/queueing.py),
tokenledger/report/review.py (the review) and the SQL file named after each table.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from tokenledger.assets.daily import for_each_day
from tokenledger.assets.tables import table_asset
from tokenledger.pipelines.partitions import daily_partitions, days_of, single_run
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.capacity.day import (
    REVIEW,
    build_capacity_daily,
    build_capacity_model,
    build_capacity_plan,
    build_capacity_review,
    build_capacity_verdict,
    build_capacity_windows,
    build_load_hourly,
    build_loadtest_steps,
    report_paths,
    staged_report_paths,
)
from tokenledger.capacity.memory import build_gpu_memory
from tokenledger.capacity.sweep import build_loadtest_sweep
from tokenledger.catalog import PUBLISHED_TABLES
from tokenledger.storage.lake import DayWindow


@table_asset("core.loadtest_steps")
def loadtest_steps(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every arrival-rate step of the load-test runs that started on the day, judged against every commitment,
    with the run's lambda_slo_max, goodput per GPU at it and whether it is verified on every row.

    Grain: run_id x step_index, for the runs whose start falls on the UTC day. Source: raw/loadtest/<run_id>/ (every
    run folder is read; tokenledger/capacity/loadtest.py). Definition: docs/metrics.md, 5; contract
    data_contracts/core/core_loadtest_steps.odcs.yaml.
    """
    measured: dict[str, Any] = {}

    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, scratch: Path) -> dict[str, Any]:
        return build_loadtest_steps(con, ledger.layout, window, scratch, measured)

    return for_each_day(context, ledger, day_fn, needs_config=True)


@table_asset("core.capacity_windows")
def capacity_windows(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every stable_window_min window of the day (one every step_min minutes) per deployment, judged against every
    commitment, with its goodput per GPU: the audit trail of the demonstrated capacity.

    Grain: day x model x deployment_id x window_index (every deployment in force). Source: core.gateway_requests
    judged against config/slo.yaml, core.deployments_daily. Definition: docs/metrics.md, 5; contract
    data_contracts/core/core_capacity_windows.odcs.yaml.
    """
    return for_each_day(context, ledger,
                        lambda con, window, scratch: build_capacity_windows(con, ledger.layout, window, scratch),
                        needs_config=True)


@table_asset("infra.capacity_daily")
def capacity_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Throughput and SLO goodput per GPU and per watt, and the day's capacity: goodput per GPU from a verified
    load test or the demonstrated lower bound (with source, verification and a note), daily capacity,
    utilization, daily value, daily cost at capacity, supported agent steps and task attainment.

    Grain: day x model x deployment_id (every deployment in force). Source: core.usage_hourly,
    core.deployments_daily, core.capacity_windows, core.loadtest_steps (every day up to this one),
    finance.cost_per_mtok_daily, config/costs.yaml list prices. Definition: docs/metrics.md, 2 and 5.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_capacity_daily(con, ledger.layout, window),
                        needs_config=True)


@table_asset("infra.loadtest_sweep_daily")
def loadtest_sweep_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Goodput against concurrency along the load test that speaks for each deployment on the day: per step, the
    arrival rate aimed at and measured, Little's-law concurrency (per replica too), goodput per GPU, attainment,
    the P99 latencies, whether every commitment held, and the knee (the run's lambda_slo_max step).

    Grain: day x model x deployment_id x step_index (the steps of the run the capacity choice takes; none without
    one). Source: core.loadtest_steps (every day up to this one), core.deployments_daily. Definition:
    docs/metrics.md, 5; contract data_contracts/infra/infra_loadtest_sweep_daily.odcs.yaml.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_loadtest_sweep(con, ledger.layout, window),
                        needs_config=True)


@table_asset("infra.load_hourly")
def load_hourly(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The load curve against capacity: requests, arrival rate, busiest second and minute, bursts above the
    planning rate, output demand and input rates per hour, the capacity token rate, hours over capacity and the
    fluid backlog carried across midnight, with failures by kind and the mean queue length (Little's law).

    Grain: day x hour (0-23) x model (every model in force, all 24 hours). Source: core.usage_hourly,
    core.gateway_requests, infra.capacity_daily, the previous day's infra.load_hourly, config/slo.yaml (peak_basis).
    Definition: docs/metrics.md, 6.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_load_hourly(con, ledger.layout, window),
                        needs_config=True)


@table_asset("infra.capacity_model_daily")
def capacity_model_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The work model and the load test checked against production: C_prefill and C_decode (GPU-seconds per
    recomputed input and per output token) fitted to the load test's steps below saturation, else to the production
    hours not over capacity (labelled), with their fit quality; production's mix beside the capacity test's, the
    test's age, staleness and likeness verdict with its rule; the work one GPU sustains at the capacity point, the
    peak's work rate and the capacity rescaled to production's mix.

    Grain: day x model x deployment_id (every GPU deployment in force). Source: core.gateway_requests,
    core.usage_hourly, core.loadtest_steps (every day up to this one), core.gpu_samples (the days of the test's
    segments), infra.gpu_usage_hourly, infra.capacity_daily, infra.load_hourly, config/slo.yaml. Definition:
    docs/metrics.md, 6.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_capacity_model(con, ledger.layout, window),
                        needs_config=True)


@table_asset("infra.capacity_plan_daily")
def capacity_plan_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The capacity plan: planning peak, Little's law, the least Erlang C slots for the wait target, replicas by
    Erlang C and by the rule of thumb, the policy's headroom itemized, the goodput sizing (peak token rate / goodput
    per GPU x headroom) beside it, the Lag in GPUs, and GPUs needed against GPUs deployed.

    Grain: day x model x deployment_id (every deployment in force). Source: core.gateway_requests,
    core.deployments_daily, infra.capacity_daily, infra.load_hourly, config/slo.yaml. Definition:
    docs/metrics.md, 6.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_capacity_plan(con, ledger.layout, window),
                        needs_config=True)


@table_asset("infra.gpu_memory_daily")
def gpu_memory_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The GPU memory budget per GPU: weights, KV cache, runtime and margin, the KV cache's capacity in tokens and
    in concurrent sequences at the day's mean and P99 context, and the flags for no margin and for the planning
    peak's concurrency within 10% of what the KV cache holds; NULL figures, with the facts named, where the
    inventory lacks them.

    Grain: day x model x deployment_id (every GPU deployment in force). Source: core.deployments_daily (the version
    in force at the end of the day), core.gateway_requests, infra.capacity_plan_daily. Definition:
    docs/metrics.md, 6.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_gpu_memory(con, ledger.layout, window),
                        needs_config=True)


@table_asset("infra.capacity_verdict_daily")
def capacity_verdict_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The verdict every reader shows, decided here and nowhere else: per deployment (GPU and hosted-API), SLO met
    or the figures missed, GPUs needed (the plan's binding figure and its rule) against GPUs in force with the gap
    split into the peak, the headroom percentages and the redundancy replicas, the verdict ('ok', 'policy', 'short',
    'slo_missed') and its words, $/MTok delivered and under SLO, the capacity basis and the hours over capacity.

    Grain: day x model x deployment_id (every GPU deployment of the plan, every hosted-API deployment in force).
    Source: infra.capacity_plan_daily, infra.capacity_daily, infra.slo_daily, finance.cost_per_mtok_daily,
    core.deployments_daily, config/slo.yaml (the P99 limits). Definition: docs/metrics.md, 6.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_capacity_verdict(con, ledger.layout, window),
                        needs_config=True)


@dg.asset(key=list(REVIEW), deps=[dg.AssetKey(ref.key_path) for ref in PUBLISHED_TABLES],
          kinds={"html", "markdown"}, partitions_def=daily_partitions, backfill_policy=single_run,
          group_name="capacity")
def capacity_review(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The day's capacity review, led by the verdict of every deployment (infra.capacity_verdict_daily), then one
    screen per model with its charts and its details folded, and a glossary:
    $TOKENLEDGER_HOME/reports/capacity-review-YYYY-MM-DD.html (self-contained) and .md.

    Written before the day is published, from the day's finished tables, and published with them in one switch
    (publish/exports): a day whose review fails is not published, and a published day always has its review.
    Grain: one report per UTC day. Source: the day's infra and finance tables and the $/MTok under SLO of every
    day up to it. Definition: docs/tables.md, Reports.
    """
    run_days = frozenset(days_of(context))
    result = for_each_day(context, ledger,
                          lambda con, window, _: build_capacity_review(con, ledger.layout, window, context.run_id,
                                                                       run_days),
                          needs_config=True)
    # The catalog shows the last day's report: where it is published, and the Markdown version as a preview.
    html_path, _ = report_paths(ledger.layout, days_of(context)[-1])
    _, md_path = staged_report_paths(ledger.layout, days_of(context)[-1])
    preview = md_path.read_text(encoding="utf-8") if md_path.is_file() else ""
    return dg.MaterializeResult(metadata={**(result.metadata or {}), "path": dg.MetadataValue.path(str(html_path)),
                                          "preview": dg.MetadataValue.md(preview[:20_000])})
