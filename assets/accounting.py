"""Accounting: tokens, SLO attainment and goodput per model and UTC day (spec/metrics.md, sections 1-3).

core.usage_hourly is the cube later stages read; the infra tables are published (spec/published.md). Request
rows are judged and aggregated in DuckDB by the SQL file named after each table.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from assets.daily import DayFn, for_each_day
from assets.ingest import deployments_daily, gateway_requests
from pipelines.partitions import daily_partitions, single_run
from pipelines.resources import LedgerResource
from tokenledger.accounting import attach_inputs, attach_usage, judge_requests, slo_version_in_force, write_table
from tokenledger.ingest import DayWindow

_DAILY = {"partitions_def": daily_partitions, "backfill_policy": single_run, "group_name": "accounting",
          "kinds": {"duckdb", "parquet"}}


def _judged(ledger: LedgerResource, schema: str, table: str) -> DayFn:
    """A day function writing a table computed from the day's requests judged against the SLO policy."""
    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch: Path) -> dict[str, Any]:
        version = judge_requests(con, ledger.layout, window)
        return {"rows": write_table(con, ledger.layout, window, schema, table), "slo_version": version}
    return day_fn


def _from_usage(ledger: LedgerResource, table: str, with_slo_version: bool, with_requests: bool = False) -> DayFn:
    """A day function writing an infra table from core.usage_hourly and the day's deployments (and, for a table
    that needs a distribution the cube cannot give, the day's requests)."""
    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch: Path) -> dict[str, Any]:
        if with_requests:
            attach_inputs(con, ledger.layout, window)
        attach_usage(con, ledger.layout, window)
        params: dict[str, Any] = {}
        if with_slo_version:
            params["slo_version"] = slo_version_in_force(con, ledger.layout, window)
        return {"rows": write_table(con, ledger.layout, window, "infra", table, **params), **params}
    return day_fn


@dg.asset(key=["core", "usage_hourly"], deps=[gateway_requests, deployments_daily], **_DAILY)
def usage_hourly(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The usage cube: request counts by outcome, the three input figures, output (reached, produced, compliant).

    Grain: day x UTC hour x model x deployment_id x tenant_id x isl_bucket, rows only where there were requests.
    Source: core.gateway_requests judged against config/slo.yaml. Definition: spec/metrics.md, 1-3;
    contract data_contracts/core_usage_hourly.odcs.yaml.
    """
    return for_each_day(context, ledger, _judged(ledger, "core", "usage_hourly"), needs_config=True)


@dg.asset(key=["infra", "slo_daily"], deps=[gateway_requests, deployments_daily], **_DAILY)
def slo_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """SLO attainment, success rate and P50/P90/P99 latencies, and which commitments were met.

    Grain: day x model x isl_bucket (every bucket of the policy in force), plus one 'all' row per model.
    Source: core.gateway_requests judged against config/slo.yaml. Definition: spec/metrics.md, 1-2.
    """
    return for_each_day(context, ledger, _judged(ledger, "infra", "slo_daily"), needs_config=True)


@dg.asset(key=["infra", "slo_hourly"], deps=[usage_hourly, deployments_daily], **_DAILY)
def slo_hourly(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Attainment per ISL bucket hour by hour against the commitment, beside the model's whole-hour figure.

    Grain: day x hour (0-23) x model x isl_bucket (every bucket of the policy in force, plus 'all').
    Source: core.usage_hourly and config/slo.yaml. Definition: spec/metrics.md, 2; contract
    data_contracts/infra_slo_hourly.odcs.yaml.
    """
    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch: Path) -> dict[str, Any]:
        version = judge_requests(con, ledger.layout, window)  # the day's policy and buckets per model
        attach_usage(con, ledger.layout, window)
        return {"rows": write_table(con, ledger.layout, window, "infra", "slo_hourly"), "slo_version": version}

    return for_each_day(context, ledger, day_fn, needs_config=True)


@dg.asset(key=["infra", "token_split_daily"], deps=[usage_hourly, gateway_requests, deployments_daily], **_DAILY)
def token_split_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Input as three figures (total, cached, recomputed) with cache hit ratio, overstatement and input:output,
    and the workload: ISL and OSL quantiles of successful requests and their correlation.

    Grain: day x model (every model in force). Source: core.usage_hourly, core.gateway_requests.
    Definition: spec/metrics.md, 3; docs/metrics-decisions.md (Workload).
    """
    return for_each_day(context, ledger, _from_usage(ledger, "token_split_daily", with_slo_version=False,
                                                     with_requests=True))


@dg.asset(key=["infra", "token_split_hourly"], deps=[usage_hourly, deployments_daily], **_DAILY)
def token_split_hourly(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """infra.token_split_daily per UTC hour.

    Grain: day x hour (0-23) x model (every model in force, all 24 hours). Source: core.usage_hourly.
    Definition: spec/metrics.md, 3.
    """
    return for_each_day(context, ledger, _from_usage(ledger, "token_split_hourly", with_slo_version=False))


@dg.asset(key=["infra", "goodput_hourly"], deps=[usage_hourly, deployments_daily], **_DAILY)
def goodput_hourly(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Raw throughput against SLO goodput hour by hour: where capacity runs out, the two part.

    Grain: day x hour (0-23) x model x deployment_id (every deployment in force, all 24 hours). Source:
    core.usage_hourly and core.deployments_daily. Definition: spec/metrics.md, 2.
    """
    return for_each_day(context, ledger, _from_usage(ledger, "goodput_hourly", with_slo_version=True),
                        needs_config=True)
