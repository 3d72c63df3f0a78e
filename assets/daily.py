"""The loop every daily asset shares: one compute connection, the run's days in order, user errors as Failures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from tokenledger.pipelines.partitions import days_of
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.catalog import TABLES
from tokenledger.config import load_config
from tokenledger.contracts import load_contract
from tokenledger.errors import LedgerError, environment_problem
from tokenledger.storage import lake
from tokenledger.storage.lake import DayWindow

DayFn = Callable[[duckdb.DuckDBPyConnection, DayWindow, Path], dict[str, Any]]


def for_each_day(context: dg.AssetExecutionContext, ledger: LedgerResource, fn: DayFn,
                 needs_config: bool = False) -> dg.MaterializeResult:
    """Run `fn` for every day of the run's partition range and report what each day produced.

    A `LedgerError` (a problem in the user's files) fails the step with its message alone, naming the day.
    """
    days = days_of(context)
    per_day: dict[date, dict[str, Any]] = {}
    try:
        ledger.layout.check()
        with ledger.compute() as (con, scratch):
            if needs_config:
                load_config(con, ledger.layout)
            for day in days:
                per_day[day] = fn(con, DayWindow(day), scratch / day.isoformat())
    except (LedgerError, OSError, duckdb.Error) as exc:
        failed = days[len(per_day)] if len(per_day) < len(days) else days[-1]
        raise_as_failure(exc, f"{failed}: ", f"{context.asset_key.to_user_string()} computed {failed}")
    finally:
        # One log line for the step, a line per day inside it: each Dagster log event costs 5-10 ms of event
        # storage, and a month's run would otherwise log one per day and asset (about 800).
        if per_day:
            context.log.info("\n".join(f"{context.asset_key.to_user_string()} {day}: {figures}"
                                        for day, figures in per_day.items()))
    return dg.MaterializeResult(metadata={**_summary(per_day), **catalog_metadata(ledger, context.asset_key, days)})


def raise_as_failure(exc: Exception, prefix: str, doing: str) -> None:
    """Re-raise a user's problem (their data, or their machine: a full disk, an unwritable folder) as a Dagster
    Failure carrying only its message; anything else is a bug and keeps its traceback."""
    problem = exc if isinstance(exc, LedgerError) else environment_problem(exc, doing)
    if problem is None:
        raise exc
    raise dg.Failure(description=f"{prefix}{problem}", allow_retries=False) from None


@contextmanager
def user_errors(doing: str, prefix: str = "") -> Iterator[None]:
    """Turn a user's problem raised in the block into a Dagster Failure with its message (see raise_as_failure)."""
    try:
        yield
    except (LedgerError, OSError, duckdb.Error) as exc:
        raise_as_failure(exc, prefix, doing)


def _additive(key: str) -> bool:
    """Whether a per-day figure adds up over days: counts of rows, lines and requests do; gauges (runs measured,
    GPUs needed, a price version) do not, and a multi-day run reports them per day only."""
    return key == "rows" or key.startswith("rows_") or key.endswith(("_rows", "_lines", "_requests")) \
        or key in ("duplicates_merged", "skipped_not_request", "failures_no_model", "quarantined", "accepted", "read")


def _summary(per_day: dict[date, dict[str, Any]]) -> dict[str, Any]:
    """Metadata for the UI: the days covered, totals of the additive figures, and every figure per day."""
    totals: dict[str, Any] = {}
    for figures in per_day.values():
        for key, value in figures.items():
            if _additive(key) and isinstance(value, int | float) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    days = sorted(per_day)
    meta: dict[str, Any] = {"days": len(days)}
    if days:
        meta["first_day"] = days[0].isoformat()
        meta["last_day"] = days[-1].isoformat()
    meta.update(totals)
    if len(days) == 1:
        meta.update({k: v for k, v in per_day[days[0]].items() if k not in totals})
    elif days:
        meta["per_day"] = dg.MetadataValue.json({d.isoformat(): per_day[d] for d in days})
    if "rows" in totals and len(days) == 1:
        # Dagster records a ranged run's materialization on every day of the range with the same metadata: a
        # range's total under the standard row-count key would read as each day's rows. A range has `rows` (the
        # total) and each day's count under `per_day`.
        meta["dagster/row_count"] = totals["rows"]
    return meta


def column_schema(ref) -> dg.TableSchema:
    """The table's columns as its contract declares them (names, types, descriptions), for the catalog."""
    table = load_contract(ref.contract_id).table(ref.contract_table)
    return dg.TableSchema(columns=[
        dg.TableColumn(c.name, c.physical_type, description=c.description or None) for c in table.columns])


def catalog_metadata(ledger: LedgerResource, key: dg.AssetKey, days: list[date]) -> dict[str, Any]:
    """The catalog's view of a day table: its column schema from the contract and its file (for a one-day run
    the day's file; for a range, whose materialization Dagster records on each of its days, the table's folder)."""
    ref = next((r for r in TABLES if r.key_path == list(key.path)), None)
    if ref is None:
        return {}
    meta: dict[str, Any] = {"dagster/column_schema": column_schema(ref)}
    if len(days) == 1:
        meta["path"] = dg.MetadataValue.path(str(lake.day_file(ledger.layout.lake, ref.schema, ref.name, days[0])))
    elif days:
        meta["path"] = dg.MetadataValue.path(str(ledger.layout.lake / ref.schema / ref.name))
    return meta
