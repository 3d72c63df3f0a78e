"""Publishing: a day's tables reach exports/ and the warehouse only after everything upstream of them passed.

Each table's day is one Parquet file (finance tables also CSV). All of a day's files are staged under temporary
names, then renamed over the previous versions together, then a manifest is written (tokenledger/publishing.py),
so a reader sees the old day or the new day, never half a file or nothing (spec/published.md).
"""


import dagster as dg
import duckdb

from assets.accounting import goodput_hourly, slo_daily, slo_hourly, token_split_daily, token_split_hourly
from assets.capacity import capacity_daily, capacity_plan_daily, load_hourly
from assets.cost import cost_per_mtok_daily, cost_reconciliation_daily, tenant_showback_daily
from assets.daily import for_each_day
from assets.quality import ingest_reconciliation_daily, quarantine
from pipelines.partitions import daily_partitions, single_run
from pipelines.resources import LedgerResource
from tokenledger.catalog import PUBLISHED_TABLES
from tokenledger.ingest import DayWindow
from tokenledger.publishing import publish_day
from tokenledger.warehouse import refresh_views

PUBLISHED_ASSETS = [quarantine, ingest_reconciliation_daily, token_split_daily, token_split_hourly, slo_daily,
                    capacity_daily, goodput_hourly, cost_per_mtok_daily, tenant_showback_daily,
                    cost_reconciliation_daily, load_hourly, capacity_plan_daily, slo_hourly]


@dg.asset(key=["publish", "exports"], deps=PUBLISHED_ASSETS, partitions_def=daily_partitions,
          backfill_policy=single_run, group_name="publish", kinds={"parquet", "csv", "duckdb"})
def published_exports(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The day's published tables in $TOKENLEDGER_HOME/exports/<schema>/<table>/day=YYYY-MM-DD/ and the
    warehouse views over them. Grain: day x published table. Definition: spec/published.md."""
    layout = ledger.layout

    def publish(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch) -> dict[str, int]:
        files = publish_day(con, layout, window.day, PUBLISHED_TABLES, context.run_id)
        return {"files_published": len(files), "rows_published": sum(f.rows for f in files)}

    result = for_each_day(context, ledger, publish)
    try:
        with ledger.warehouse().get_connection() as con:
            views = refresh_views(con, layout)
        context.log.info(f"warehouse {layout.warehouse}: views {', '.join(views)}")
    except duckdb.Error as exc:
        # The exports are already published; views read them by glob, so new days show up without a refresh.
        context.log.warning(f"could not refresh the views in {layout.warehouse} ({exc}); is it open for writing "
                            "in another process? The exports are published; views refresh on the next run.")
    return result
