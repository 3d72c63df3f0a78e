"""Trends over every published day: rebuilt whole at the end of every run, daily or backfill."""

import dagster as dg
from tokenledger.assets.daily import user_errors
from tokenledger.assets.publish import published_exports
from tokenledger.pipelines.partitions import single_run
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.capacity.trend import rebuild_trend
from tokenledger.catalog import TREND
from tokenledger.expectations import CRITICAL
from tokenledger.publish.warehouse import refresh_views

_CONTRACT = dg.AssetCheckSpec("contract", asset=dg.AssetKey([TREND.schema, TREND.name]), blocking=True,
                              description=f"Every critical rule of data_contracts/{TREND.contract_id}.odcs.yaml.")


@dg.asset(key=[TREND.schema, TREND.name], deps=[published_exports], backfill_policy=single_run,
          group_name="publish", kinds={"duckdb", "parquet"}, check_specs=[_CONTRACT])
def capacity_trend(context: dg.AssetExecutionContext, ledger: LedgerResource):
    """Rolling 7- and 28-day cost per MTok under SLO, goodput per GPU, daily capacity, utilization and attainment.

    Grain: day x model x currency, for every published day (all days, one file). Source: the published
    finance.cost_per_mtok_daily, infra.capacity_daily and infra.slo_daily. A missing day is not a zero: windows
    are calendar windows over the days that exist. Definition: docs/tables.md; docs/adr/0090-trends.md.
    """
    with user_errors(f"rebuilding {TREND.qualified}"), ledger.compute() as (con, _scratch):
        outcome = rebuild_trend(con, ledger.layout)
    passed = not outcome.validation.failed(CRITICAL)
    # The trend's first publication adds a view: the warehouse shows every table the run says it published.
    views = refresh_views(ledger.layout, ledger.warehouse())
    if views.problem:
        context.log.warning(views.problem)
    yield dg.MaterializeResult(
        metadata={"rows": outcome.rows, "days": outcome.days, "published": passed},
        check_results=[dg.AssetCheckResult(check_name="contract", passed=passed,
                                           description=outcome.validation.describe(CRITICAL))],
    )
    if not passed:
        context.log.error("infra.capacity_trend was not published: " + outcome.validation.describe(CRITICAL))
