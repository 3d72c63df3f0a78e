"""Accounting: tokens, SLO attainment and goodput per model and UTC day (docs/metrics.md, sections 1-3).

core.usage_hourly is the cube later stages read; the infra tables are published (docs/tables.md). Every table
here is computed by its SQL file alone, over the day's requests judged against the SLO policy or over the cube:
each asset is built from its line in tokenledger/catalog.py (assets/tables.py), its description from its contract.
"""

import dagster as dg
from tokenledger.assets.daily import for_each_day
from tokenledger.assets.tables import sql_table_assets, table_asset
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.ingest.gpu import build_gpu_usage

accounting_assets = sql_table_assets("accounting")


@table_asset("infra.gpu_usage_hourly")
def gpu_usage_hourly(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """What each GPU deployment's GPUs drew and how busy they were, hour by hour, beside the GPUs allocated and the
    hour's goodput: mean and P95 power, energy, utilization, SM activity, active GPU-hours and goodput per watt,
    measured or nominal (power_basis). GPUs sampled but mapped to no deployment are a row of their own.

    Grain: day x hour x model x deployment_id (and the unmapped GPUs). Source: core.gpu_samples,
    core.deployments_daily, infra.goodput_hourly. Definition: docs/metrics.md, 2; sql/accounting/gpu_usage_hourly.sql.
    """
    return for_each_day(context, ledger, lambda con, window, _: {
        "rows": build_gpu_usage(con, ledger.layout, window, "gpu_usage_hourly")})


@table_asset("infra.gpu_usage_daily")
def gpu_usage_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """infra.gpu_usage_hourly over the UTC day: allocated, measured and active GPU-hours, energy, mean and P95
    power, and goodput per watt (compliant output tokens per joule) on the power basis named.

    Grain: day x model x deployment_id (and the unmapped GPUs). Source: infra.gpu_usage_hourly, core.gpu_samples.
    Definition: docs/metrics.md, 2; sql/accounting/gpu_usage_daily.sql.
    """
    return for_each_day(context, ledger, lambda con, window, _: {
        "rows": build_gpu_usage(con, ledger.layout, window, "gpu_usage_daily")})
