"""Publishing: a day's tables reach exports/ and the warehouse only after every other step of the day passed.

Publication is the run's last step of the day: every published table, its checks, the capacity review and the
what-if's traces table are upstream of it, so a step that fails anywhere leaves what readers see as it was. The
run's days are staged (each table's day file, finance also as a formula-safe CSV, the core tables, the review and
a manifest) with the traces table, then published together in one switch of `.published/current`
(tokenledger/publish/versions.py), so a reader sees the old days or the new ones, never a mix or nothing
(docs/tables.md). The warehouse views read through that switch and are rewritten only when the set of tables
changes (tokenledger/publish/warehouse.py). The trend (assets/trend.py) is rebuilt after it, from every published day.
"""


import dagster as dg
import duckdb
from tokenledger.assets.daily import for_each_day, user_errors
from tokenledger.pipelines.partitions import daily_partitions, days_of, single_run
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.capacity.day import REVIEW, staged_report_paths
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, TRACES
from tokenledger.faults import failpoint
from tokenledger.publish.versions import EXPORTS, Staging, publish_files, stage_day, verify_day
from tokenledger.publish.warehouse import refresh_views
from tokenledger.storage import lake
from tokenledger.storage.housekeeping import verify_hold
from tokenledger.storage.lake import DayWindow
from tokenledger.whatif.replay import traces_file

# Every published table of the registry, so a table marked published there is published here, and every other step
# of the day: the review, and the traces table published beside the day tables.
PUBLISHED_KEYS = [dg.AssetKey(ref.key_path) for ref in PUBLISHED_TABLES]
UPSTREAM_KEYS = [*PUBLISHED_KEYS, dg.AssetKey(list(REVIEW)), dg.AssetKey(TRACES.key_path)]
_VIEWS = dg.AssetCheckSpec("warehouse_views", asset=dg.AssetKey(["publish", "exports"]), blocking=False,
                           description="The warehouse views could be refreshed (another process holding "
                                       "warehouse.duckdb for writing prevents it).")


@dg.asset(key=["publish", "exports"], deps=UPSTREAM_KEYS, partitions_def=daily_partitions,
          backfill_policy=single_run, group_name="publish", kinds={"parquet", "csv", "duckdb"},
          check_specs=[_VIEWS])
def published_exports(context: dg.AssetExecutionContext, ledger: LedgerResource):
    """The run's days of every published table in $TOKENLEDGER_HOME/exports/<schema>/<table>/day=YYYY-MM-DD/ (one
    Parquet dataset per table, the day in the folder name; finance also as CSV under exports/csv/), the core
    tables behind the warehouse's core views, and a manifest per day, switched in together.
    Grain: day x published table. Definition: docs/tables.md; the layout:
    docs/adr/0037-each-published-table-is-one-parquet-dataset.md."""
    layout = ledger.layout
    staging = Staging(layout)

    def stage(con: duckdb.DuckDBPyConnection, window: DayWindow, _scratch) -> dict[str, int]:
        files = stage_day(con, layout, staging, window.day, PUBLISHED_TABLES, CORE_TABLES, context.run_id,
                          reports=staged_report_paths(layout, window.day))
        return {"files_published": len(files), "rows_published": sum(f.rows for f in files if f.path.endswith(
            ".parquet"))}

    try:
        result = for_each_day(context, ledger, stage)
        if (traces := traces_file(layout)).is_file():  # this run's, its contract checked upstream
            staging.add_link(traces, f"{EXPORTS}/{TRACES.schema}/{TRACES.name}/{lake.DATA_FILE}")
        fence = ledger.fence(context)
        with user_errors(f"publishing to {layout.published}"):
            failpoint("publish:staged")
            if fence:
                # Still the run holding its days (a run whose lock was lost, or whose orchestrator is gone, stops
                # here); the commit checks the generations again as it switches (tokenledger/publish/versions.py).
                verify_hold(layout, fence)
            version = publish_files(layout, staging, fence=fence)
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
