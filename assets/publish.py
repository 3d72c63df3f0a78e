"""Publishing: a day's tables reach exports/ and the warehouse only after everything upstream of them passed.

The run's days are staged (each table's day file, finance also as a formula-safe CSV, the core tables and a
manifest), then published together in one switch of `.published/current` (tokenledger/publishing.py), so a
reader sees the old days or the new ones, never a mix or nothing (spec/published.md). The warehouse views read
through that switch and are rewritten only when the set of tables changes (tokenledger/warehouse.py).
"""


import dagster as dg
import duckdb

from assets.daily import for_each_day, user_errors
from pipelines.partitions import daily_partitions, days_of, single_run
from pipelines.resources import LedgerResource
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES
from tokenledger.faults import failpoint
from tokenledger.ingest import DayWindow
from tokenledger.publishing import Staging, publish_files, stage_day, verify_day
from tokenledger.warehouse import refresh_views

# Every published table of the registry, so a table marked published there is published here.
PUBLISHED_KEYS = [dg.AssetKey(ref.key_path) for ref in PUBLISHED_TABLES]
_VIEWS = dg.AssetCheckSpec("warehouse_views", asset=dg.AssetKey(["publish", "exports"]), blocking=False,
                           description="The warehouse views could be refreshed (another process holding "
                                       "warehouse.duckdb for writing prevents it).")


@dg.asset(key=["publish", "exports"], deps=PUBLISHED_KEYS, partitions_def=daily_partitions,
          backfill_policy=single_run, group_name="publish", kinds={"parquet", "csv", "duckdb"},
          check_specs=[_VIEWS])
def published_exports(context: dg.AssetExecutionContext, ledger: LedgerResource):
    """The run's days of every published table in $TOKENLEDGER_HOME/exports/<schema>/<table>/day=YYYY-MM-DD/ (one
    Parquet dataset per table, the day in the folder name; finance also as CSV under exports/csv/), the core
    tables behind the warehouse's core views, and a manifest per day, switched in together.
    Grain: day x published table. Definition: spec/published.md; the layout: docs/decisions.md."""
    layout = ledger.layout
    staging = Staging(layout)

    def stage(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch) -> dict[str, int]:
        files = stage_day(con, layout, staging, window.day, PUBLISHED_TABLES, CORE_TABLES, context.run_id)
        return {"files_published": len(files), "rows_published": sum(f.rows for f in files if f.path.endswith(
            ".parquet"))}

    try:
        result = for_each_day(context, ledger, stage)
        with user_errors(f"publishing to {layout.published}"):
            failpoint("publish:staged")
            version = publish_files(layout, staging)
    finally:
        staging.discard()
    # The manifest is checked against what readers now see: it catches a disk that does not hold what was written.
    damaged = {str(day): problems for day in days_of(context) if (problems := verify_day(layout, day))}
    if damaged:
        raise dg.Failure(f"published files differ from their manifests right after publishing: {damaged}. Check "
                         f"the disk holding {layout.published}, then re-run these days.", allow_retries=False)
    context.log.info(f"published version {version.name}: {layout.exports}")
    views = refresh_views(layout, ledger.warehouse())
    if views.problem:
        context.log.warning(views.problem)
    yield dg.MaterializeResult(metadata={**result.metadata, "version": version.name})
    yield dg.AssetCheckResult(check_name="warehouse_views", passed=views.problem is None,
                              severity=dg.AssetCheckSeverity.WARN,
                              description=views.problem or (f"{len(views.views)} views " + (
                                  "refreshed" if views.refreshed else "already current")))
