"""Day-table assets built from their registry line (tokenledger/catalog.py): key, group, partitions, lineage and
catalog metadata come from the line, so no module repeats them.

`table_asset("infra.capacity_daily")` decorates a day table's compute function; `sql_table_asset(ref)` builds the
whole asset of a table its SQL computes alone from one of the standard INPUTS below. Either way the table's
contract checks run in its step, after its days are written.
"""

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from tokenledger.assets.checks import table_check_results, table_check_specs
from tokenledger.assets.daily import column_schema, for_each_day
from tokenledger.pipelines.partitions import daily_partitions, single_run
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.accounting.day import (
    attach_inputs,
    attach_usage,
    judge_requests,
    slo_percentiles,
    slo_version_in_force,
)
from tokenledger.catalog import TABLES, TableRef, table
from tokenledger.contracts import load_contract
from tokenledger.storage.lake import DayWindow, write_table


def _table_asset(ref: TableRef, compute: Callable[..., dg.MaterializeResult], description: str | None = None
                 ) -> dg.AssetsDefinition:
    """The asset of a registry line: `compute(context, ledger)` writes the run's days of the table, then its
    checks (its contract's and any other, assets/checks.py) judge them in the same step.

    One step for a table and its checks, not two: a step costs Dagster 20-40 ms of its own (events, the inputs'
    data versions, a connection), and a day's 31 check steps were a quarter of a small day's run. The asset can be
    subset: a run may select its checks alone (they judge the day files already written) or the table alone.
    A blocking check that fails fails the step once every selected check of the table has been evaluated.
    """
    key = dg.AssetKey(ref.key_path)
    checks = table_check_specs(ref)
    # What the table reads, and what its checks read besides it: the step runs after both are written.
    reads = [dg.AssetKey(table(name).key_path) for name in ref.reads]
    reads += [d.asset_key for c in checks for d in c.additional_deps if d.asset_key not in reads + [key]]
    spec = dg.AssetSpec(
        key,
        deps=reads,
        description=description,
        group_name=ref.stage,
        kinds={"duckdb", "parquet"},
        metadata={
            "grain": ref.grain,
            "contract": ref.contract_file,
            "sql": ref.sql_file,
            "published": ref.published,
            "dagster/column_schema": column_schema(ref),
        },
    )

    @dg.multi_asset(name=key.to_python_identifier(), specs=[spec], check_specs=checks,
                    partitions_def=daily_partitions, backfill_policy=single_run, can_subset=True)
    def _asset(context: dg.AssetExecutionContext, ledger: LedgerResource) -> Iterator[Any]:
        if key in context.selected_asset_keys:
            written = compute(context, ledger)
            yield dg.MaterializeResult(asset_key=key, metadata=written.metadata)
        yield from table_check_results(context, ledger, ref)

    return _asset


def table_asset(qualified: str) -> Callable[[Callable[..., dg.MaterializeResult]], dg.AssetsDefinition]:
    """The asset decorator of a registry table whose compute function is the decorated one (its docstring is the
    description)."""
    def decorate(compute: Callable[..., dg.MaterializeResult]) -> dg.AssetsDefinition:
        return _table_asset(table(qualified), compute, inspect.cleandoc(compute.__doc__ or "") or None)
    return decorate


def _day_fn(ledger: LedgerResource, ref: TableRef) -> Callable[[duckdb.DuckDBPyConnection, DayWindow, Path],
                                                               dict[str, Any]]:
    """sql/<name>.sql for one day, after attaching what `ref.inputs` names:

    judged           the day's requests judged against the SLO policy in force (its version is reported)
    judged+usage     the same, and core.usage_hourly
    judged+slo_percentiles  the same, and each latency's percentiles taken one at a time (accounting.slo_percentiles)
    usage            core.usage_hourly and the day's deployments
    usage+slo        the same, with the SLO policy version in force as $slo_version
    usage+requests   the same as usage, and the day's requests
    """
    def day_fn(con: duckdb.DuckDBPyConnection, window: DayWindow, scratch: Path) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        params: dict[str, Any] = {}
        if ref.inputs.startswith("judged"):
            figures["slo_version"] = judge_requests(con, ledger.layout, window)
        if ref.inputs == "judged+slo_percentiles":
            slo_percentiles(con, scratch)
        if ref.inputs == "usage+requests":
            attach_inputs(con, ledger.layout, window)
        if not ref.inputs.startswith("judged") or ref.inputs == "judged+usage":
            attach_usage(con, ledger.layout, window)
        if ref.inputs == "usage+slo":
            params["slo_version"] = figures["slo_version"] = slo_version_in_force(con, ledger.layout, window)
        rows = write_table(con, ledger.layout, window, ref.schema, ref.name, **params)
        return {"rows": rows, **figures}
    return day_fn


INPUTS = ("judged", "judged+usage", "judged+slo_percentiles", "usage", "usage+slo", "usage+requests")


def sql_table_asset(ref: TableRef) -> dg.AssetsDefinition:
    """The asset of a table computed by sql/<name>.sql alone; its description is its contract's."""
    if ref.inputs not in INPUTS:
        raise ValueError(f"{ref.qualified}: inputs={ref.inputs!r} is not one of {INPUTS}")
    contract = load_contract(ref.contract_id)
    described = contract.table(ref.contract_table)
    description = (f"{described.description}\n\nGrain: {ref.grain}. Rows: {ref.sql_file} over "
                   f"{ref.inputs.replace('+', ' and ')}; contract {ref.contract_file}.")

    def compute(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
        return for_each_day(context, ledger, _day_fn(ledger, ref), needs_config=True)

    return _table_asset(ref, compute, description)


def sql_table_assets(stage: str) -> list[dg.AssetsDefinition]:
    """The SQL-only tables of a stage, in registry order."""
    return [sql_table_asset(ref) for ref in TABLES if ref.stage == stage and ref.inputs]
