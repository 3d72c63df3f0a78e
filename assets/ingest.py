"""Ingest: the three sources, typed by their contracts, one UTC day at a time (docs/inputs.md)."""


from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from tokenledger.assets.daily import for_each_day
from tokenledger.assets.tables import table_asset
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.ingest.gpu import ingest_gpu_day
from tokenledger.ingest.sources import (
    LINE_BY_LINE,
    READ_JSON,
    IngestCounts,
    ingest_billing_day,
    ingest_deployments_day,
    ingest_gateway_day,
    stage_billing,
)
from tokenledger.storage.lake import DayWindow


def _counts(counts: IngestCounts | list[IngestCounts]) -> dict[str, int]:
    """The day's figures for the UI: totals over its sources, and each source's rows read."""
    counts = counts if isinstance(counts, list) else [counts]
    totals = {k: sum(getattr(c, k) for c in counts)
              for k in ("rows_read", "rows_accepted", "rows_quarantined", "duplicates_merged", "skipped_not_request",
                        "failures_no_model")}
    if len(counts) > 1:
        totals.update({f"rows_read_{c.source}": c.rows_read for c in counts})
    return totals


@table_asset("core.deployments_daily")
def deployments_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Deployment versions in force each UTC day, with the hours each was in force and its GPU-hours.

    Grain: day x deployment version (a mid-day scale-up gives two rows). Source: config/deployments.yaml,
    checked against data_contracts/config/deployments.odcs.yaml. Definition: docs/inputs.md, Deployments.
    """
    return for_each_day(
        context, ledger, lambda con, window, _: _counts(ingest_deployments_day(con, ledger.layout, window)),
        needs_config=True)


@table_asset("core.gateway_requests")
def gateway_requests(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every request of the UTC day, typed by the gateway_request contract, duplicates merged.

    Grain: day x request_id. Source: raw/gateway/dt=YYYY-MM-DD/ (*.jsonl, *.jsonl.gz, *.parquet). Rows that break
    the contract go to quality.quarantine. Definition: docs/inputs.md, Gateway request log.
    """
    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, scratch: Path) -> dict[str, Any]:
        reading: dict[Path, str] = {}
        counts = ingest_gateway_day(con, ledger.layout, window, scratch, idle=ledger.is_idle(window.day),
                                    reading=reading)
        line_by_line = sorted(path.name for path, how in reading.items() if how == LINE_BY_LINE)
        # Which way each JSON Lines log was read: through DuckDB's JSON reader, or line by line
        # (docs/adr/0028-json-lines-through-duckdbs-json-reader.md).
        return {**_counts(counts), "jsonl_files_read_json": sum(how == READ_JSON for how in reading.values()),
                "jsonl_files_line_by_line": len(line_by_line), "jsonl_read_line_by_line": ", ".join(line_by_line)}

    return for_each_day(context, ledger, day_fn)


@table_asset("core.billing_charges")
def billing_charges(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """FOCUS charge rows overlapping each UTC day, with the day's prorated share of their cost.

    Grain: day x FOCUS row. Source: every export in raw/billing/ (FOCUS 1.0-1.2, CSV or Parquet). A charge
    period spanning days is split by overlap; credits keep their negative sign. Definition: docs/metrics.md, 4.
    """
    staged: dict[str, list[Path]] = {}

    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, scratch: Path) -> dict[str, int]:
        # The exports are staged once for the run's days (in the step's scratch), each day taking its rows from
        # them: a month's backfill reads a month of exports once, not once a day.
        if "exports" not in staged:
            staged["exports"] = stage_billing(con, ledger.layout, scratch.parent / "billing")
        return _counts(ingest_billing_day(con, ledger.layout, window, scratch, staged["exports"]))

    return for_each_day(context, ledger, day_fn)


@table_asset("core.gpu_samples")
def gpu_samples(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every GPU telemetry sample of the UTC day, one measure a row, with the deployment its GPU was mapped to.

    Grain: day x GPU x measure x sampled_at. Source: raw/gpu/dt=YYYY-MM-DD/ (Prometheus range-query results of the
    DCGM exporter, *.json; nvidia-smi CSV logs, *.csv), typed by data_contracts/inputs/gpu_prometheus.odcs.yaml and
    gpu_nvidia_smi.odcs.yaml; GPUs mapped by config/deployments.yaml. Definition: docs/inputs.md, GPU telemetry.
    """
    return for_each_day(context, ledger,
                        lambda con, window, scratch: _counts(ingest_gpu_day(con, ledger.layout, window, scratch)))
