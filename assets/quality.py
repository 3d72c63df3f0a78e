"""Quality tables: what was quarantined and how every day and source reconciles (docs/tables.md, quality)."""


import dagster as dg
from tokenledger.assets.daily import for_each_day
from tokenledger.assets.tables import table_asset
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.ingest.sources import STAGES
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path, statement
from tokenledger.storage.lake import DayWindow


def _gather(ledger: LedgerResource, table: str, part: str):
    def day_fn(con, window: DayWindow, _scratch) -> dict[str, int]:
        parts = {s: lake.day_file(ledger.layout.lake, "quality_parts", f"{part}_{s}", window.day) for s in STAGES}
        # A run that selects the quality tables without the GPU telemetry's ingest has no part of it yet.
        files = [literal_path(path) for s, path in parts.items() if s != "gpu" or path.is_file()]
        rows = lake.write_query(con, statement(table), lake.day_file(ledger.layout.lake, "quality", table,
                                                                    window.day), {"files": files})
        return {"rows": rows}
    return day_fn


@table_asset("quality.quarantine")
def quarantine(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every input row of the day that broke a rule, with source, file, line, reason and its contract fields.

    Grain: day x rejected row. Prompt or response text is never kept: `raw` holds contract fields only.
    """
    return for_each_day(context, ledger, _gather(ledger, "quarantine", "quarantine"))


@table_asset("quality.ingest_reconciliation_daily")
def ingest_reconciliation_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Per day and source: rows read = rows accepted + rows quarantined + duplicates merged + records skipped as
    not requests (skipped_not_request), with notes where a source's own totals disagree with its rows.

    Grain: day x source (gateway, the adapters' folders, billing, deployments).
    """
    return for_each_day(context, ledger, _gather(ledger, "ingest_reconciliation_daily", "ingest_reconciliation"))
