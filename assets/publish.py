"""Publishing: a day's tables reach exports/ and the warehouse only after everything upstream of them passed.

Each table's day is one Parquet file (finance tables also CSV), copied to a temporary name and renamed over the
previous version, so a reader sees the old day or the new day, never a mix or nothing (spec/published.md).
"""


import dagster as dg
import duckdb

from assets.accounting import goodput_hourly, slo_daily, token_split_daily, token_split_hourly
from assets.capacity import capacity_daily, capacity_plan_daily, load_hourly
from assets.cost import cost_per_mtok_daily, cost_reconciliation_daily, tenant_showback_daily
from assets.daily import for_each_day
from assets.quality import ingest_reconciliation_daily, quarantine
from pipelines.partitions import daily_partitions, single_run
from pipelines.resources import LedgerResource
from tokenledger import lake
from tokenledger.catalog import PUBLISHED_TABLES
from tokenledger.duck import quote_path
from tokenledger.errors import LedgerError
from tokenledger.ingest import DayWindow
from tokenledger.warehouse import refresh_views

PUBLISHED_ASSETS = [quarantine, ingest_reconciliation_daily, token_split_daily, token_split_hourly, slo_daily,
                    capacity_daily, goodput_hourly, cost_per_mtok_daily, tenant_showback_daily,
                    cost_reconciliation_daily, load_hourly, capacity_plan_daily]


@dg.asset(key=["publish", "exports"], deps=PUBLISHED_ASSETS, partitions_def=daily_partitions,
          backfill_policy=single_run, group_name="publish", kinds={"parquet", "csv", "duckdb"})
def published_exports(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The day's published tables in $TOKENLEDGER_HOME/exports/<schema>/<table>/day=YYYY-MM-DD/ and the
    warehouse views over them. Grain: day x published table. Definition: spec/published.md."""
    layout = ledger.layout

    def publish_day(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch) -> dict[str, int]:
        published = 0
        for ref in PUBLISHED_TABLES:
            source = lake.day_file(layout.lake, ref.schema, ref.name, window.day)
            if not source.is_file():
                raise LedgerError(f"{ref.qualified} has no rows for {window.day} in {source.parent}: "
                                  "materialize that day's upstream assets first.")
            lake.copy_file_atomically(source, lake.day_file(layout.exports, ref.schema, ref.name, window.day))
            if ref.csv_export:
                csv = lake.day_dir(layout.exports, ref.schema, ref.name, window.day) / "data.csv"
                lake.write_query(con, f"SELECT * FROM read_parquet({quote_path(source)})", csv, fmt="csv")
            published += 1
        return {"tables_published": published}

    result = for_each_day(context, ledger, publish_day)
    try:
        with ledger.warehouse().get_connection() as con:
            views = refresh_views(con, layout)
        context.log.info(f"warehouse {layout.warehouse}: views {', '.join(views)}")
    except duckdb.Error as exc:
        # The exports are already published; views read them by glob, so new days show up without a refresh.
        context.log.warning(f"could not refresh the views in {layout.warehouse} ({exc}); is it open for writing "
                            "in another process? The exports are published; views refresh on the next run.")
    return result
