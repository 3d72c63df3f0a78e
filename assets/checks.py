"""Blocking checks between computing a day and publishing it: a failing check stops that run's publishing.

Every table in the catalog gets a `contract` check (blocking: the critical rules of its contract, counted in DuckDB
and judged by a GX suite, see tokenledger/expectations.py) and, when its contract has warning rules, a
`contract_warnings` check that never blocks; both run in the table's own step, right after its days are written,
from one pass over the day's rows (the specs and results are here, the steps in assets/tables.py).
Cross-table checks guard what no single contract can: every day and source reconciles, the quarantine stays
small, every model in the logs is in the inventory.

Each check reads the day files its asset wrote (for a ranged run, every day of the range) and fails with a
message naming the table, the day file(s), the rule, how many rows break it and examples.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from tokenledger.pipelines.partitions import daily_partitions, days_of
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.catalog import TableRef
from tokenledger.contracts import load_contract
from tokenledger.cost.day import unbalanced_rows
from tokenledger.expectations import CRITICAL, WARNING, Validation, validate_days
from tokenledger.faults import failpoint
from tokenledger.ingest.landing import landing_files
from tokenledger.ingest.sources import GATEWAY_FORMATS
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path, query_files, scratch_connection

_RECONCILIATION = "quality.ingest_reconciliation_daily"


@dataclass(frozen=True)
class TableCheck:
    """A check of one table other than its contract, evaluated in the table's step after the contract checks:
    `evaluate(context, ledger)` gives its verdict (its asset key and name are the spec's)."""

    spec: dg.AssetCheckSpec
    evaluate: Callable[[dg.AssetExecutionContext, LedgerResource], dg.AssetCheckResult]


# By table (`schema.name`), in the order they are declared.
TABLE_CHECKS: dict[str, list[TableCheck]] = {}


def table_check(table: str, *, blocking: bool, description: str, additional_deps: tuple[str, ...] = ()
                ) -> Callable[[Callable[..., dg.AssetCheckResult]], Callable[..., dg.AssetCheckResult]]:
    """Register the decorated function (named as the check) as a check of `table`, run in the table's step
    (assets/tables.py); `additional_deps`: other tables it reads, which the step then waits for."""
    def register(fn: Callable[..., dg.AssetCheckResult]) -> Callable[..., dg.AssetCheckResult]:
        spec = dg.AssetCheckSpec(fn.__name__, asset=dg.AssetKey(table.split(".")), blocking=blocking,
                                 partitions_def=daily_partitions, description=description,
                                 additional_deps=[dg.AssetKey(d.split(".")) for d in additional_deps])
        TABLE_CHECKS.setdefault(table, []).append(TableCheck(spec, fn))
        return fn
    return register


def table_check_specs(ref: TableRef) -> list[dg.AssetCheckSpec]:
    """Every check of the table run in its step: its contract's, then the others registered for it."""
    return contract_check_specs(ref) + [c.spec for c in TABLE_CHECKS.get(ref.qualified, [])]


def table_check_results(context: dg.AssetExecutionContext, ledger: LedgerResource, ref: TableRef
                        ) -> Iterator[Any]:
    """The results of the table's checks the run selected: its contract's, then each other one's, one per day of
    the run (see per_day_results)."""
    yield from per_day_results(context, contract_verdicts(context, ledger, ref))
    selected = context.selected_asset_check_keys
    for check in TABLE_CHECKS.get(ref.qualified, []):
        if check.spec.key not in selected:
            continue
        verdicts = _days_judged(context, lambda ctx, check=check: check.evaluate(ctx, ledger))
        yield from per_day_results(context, [(check.spec.key, verdicts)])


Verdicts = dict[date, dg.AssetCheckResult]


class _OneDay:
    """The run's context seen as one day of its range: `days_of` (and so every day file a check reads) gives
    that day alone; everything else is the run's."""

    def __init__(self, context: dg.AssetExecutionContext, day: date):
        self._context, self._day = context, day

    @property
    def partition_time_window(self) -> dg.TimeWindow:
        start = datetime.combine(self._day, time.min, tzinfo=UTC)
        return dg.TimeWindow(start, start + timedelta(days=1))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _days_judged(context: dg.AssetExecutionContext,
                 judge: Callable[[Any], dg.AssetCheckResult]) -> Verdicts:
    """A check's verdict for each day of the run. Every check here fails when some day breaks its rule (a count
    of offending rows, files or deployments over the days), so a range that passes passes on each of its days:
    the range is judged once, and only when it fails is each day judged alone, for that day's verdict. Should no
    day fail alone while the range did, each day carries the range's failure (a blocking check still blocks)."""
    days = days_of(context)
    whole = judge(context)
    if len(days) == 1 or whole.passed:
        return dict.fromkeys(days, whole)
    alone = {day: judge(_OneDay(context, day)) for day in days}
    return alone if not all(v.passed for v in alone.values()) else dict.fromkeys(days, whole)


def per_day_results(context: dg.AssetExecutionContext, verdicts: list[tuple[dg.AssetCheckKey, Verdicts]]
                    ) -> Iterator[Any]:
    """Each check's verdicts as Dagster records them per day partition.

    A one-day run yields an AssetCheckResult, which Dagster ties to the day and its materialization. A ranged run
    (one run for many days, single_run backfills) plans each partitioned check on each day of the range, but an
    AssetCheckResult there has no partition: Dagster stores it once for no partition and the UI shows every day
    of the range "Skipped". So a ranged run yields, per check, its output (downstream steps wait on a blocking
    check's output) and one AssetCheckEvaluation per day, with the day as its partition and the day's latest
    materialization as its target, which the UI then shows per day. A failed blocking evaluation of ERROR
    severity still fails the step once the step's checks are all evaluated, as an AssetCheckResult does."""
    if not verdicts:
        return
    if context.has_partition_key:
        for key, by_day in verdicts:
            for verdict in by_day.values():
                yield verdict._replace(asset_key=key.asset_key, check_name=key.name)
        return
    targets = _materializations(context, verdicts[0][0].asset_key, days_of(context))
    for key, by_day in verdicts:
        spec = context.assets_def.get_spec_for_check_key(key)
        yield dg.Output(None, output_name=context.assets_def.get_output_name_for_asset_check_key(key))
        for day, verdict in by_day.items():
            yield dg.AssetCheckEvaluation(
                asset_key=key.asset_key, check_name=key.name, passed=verdict.passed, metadata=verdict.metadata,
                severity=verdict.severity, description=verdict.description, blocking=spec.blocking,
                partition=day.isoformat(), target_materialization_data=targets.get(day.isoformat()))


def _materializations(context: dg.AssetExecutionContext, key: dg.AssetKey, days: list[date]
                      ) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """The latest materialization of each day of `key`, which a day's check evaluation targets (the UI shows a
    check's status only while it targets the day's latest materialization). One query for the range."""
    wanted = [d.isoformat() for d in days]
    found: dict[str, AssetCheckEvaluationTargetMaterializationData] = {}
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=wanted), limit=len(wanted)).records
    missing = set(wanted)
    for record in records:
        if record.partition_key in missing:
            missing.discard(record.partition_key)
            found[record.partition_key] = _target(record)
    for day in sorted(missing):  # materialized again since, with other days in between: one query each
        again = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[day]), limit=1).records
        if again:
            found[day] = _target(again[0])
    return found


def _target(record: Any) -> AssetCheckEvaluationTargetMaterializationData:
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.event_log_entry.run_id, timestamp=record.timestamp)


def _day_files(ledger: LedgerResource, schema: str, table: str, context: dg.AssetExecutionContext) -> list[str]:
    return [literal_path(lake.day_file(ledger.layout.lake, schema, table, day)) for day in days_of(context)]


def _validation_metadata(validation: Validation, severity: str) -> dict:
    return {
        "rows": validation.rows,
        "day_files": len(validation.files),
        "rules_checked": sum(1 for c in validation.counts if c.severity == severity),
        "rules_broken": len(validation.failed(severity)),
        "rows_failing_by_rule": {f.rule: f.unexpected for f in validation.failed(severity)},
    }


_SEVERITY = {"contract": (CRITICAL, dg.AssetCheckSeverity.ERROR),
             "contract_warnings": (WARNING, dg.AssetCheckSeverity.WARN)}


def contract_check_specs(ref: TableRef) -> list[dg.AssetCheckSpec]:
    """The contract checks of one table: `contract` (blocking) for the critical rules and, when its contract has
    warning rules, `contract_warnings` (never blocking) for those. Both run in the table's own step
    (assets/tables.py), after its days are written, over one validation of its day files."""
    key = dg.AssetKey([ref.schema, ref.name])
    table = load_contract(ref.contract_id).table(ref.contract_table)
    contract_file = f"data_contracts/{ref.contract_id}.odcs.yaml"
    specs = [dg.AssetCheckSpec("contract", asset=key, blocking=True, partitions_def=daily_partitions,
                               description=f"Every critical rule of {contract_file} (GX suite and whole-table "
                                           "rules).")]
    if any(r.severity == "warning" for r in table.row_rules + table.set_rules):
        specs.append(dg.AssetCheckSpec("contract_warnings", asset=key, blocking=False, partitions_def=daily_partitions,
                                       description=f"The warning rules of {contract_file}; reported, never blocking."))
    return specs


def contract_verdicts(context: dg.AssetExecutionContext, ledger: LedgerResource, ref: TableRef
                      ) -> list[tuple[dg.AssetCheckKey, Verdicts]]:
    """The verdicts, day by day, of the table's contract checks the run selected (none, when it selected
    neither): one validation of the day files of the run's days, judged for each; when it finds a broken rule,
    each day's file is validated alone for that day's verdict (see _days_judged)."""
    key = dg.AssetKey([ref.schema, ref.name])
    wanted = sorted((k for k in context.selected_asset_check_keys if k.asset_key == key and k.name in _SEVERITY),
                    key=lambda k: k.name)
    if not wanted:
        return []
    failpoint(f"checks:{ref.qualified}")
    table = load_contract(ref.contract_id).table(ref.contract_table)
    validations: dict[Any, Validation] = {}

    def judged(ctx: Any, name: str) -> dg.AssetCheckResult:
        days = tuple(days_of(ctx))
        if days not in validations:
            files = {day: lake.day_file(ledger.layout.lake, ref.schema, ref.name, day) for day in days}
            with ledger.compute() as (con, _scratch):
                validations[days] = validate_days(con, ref.qualified, table, files)
        validation = validations[days]
        rules, level = _SEVERITY[name]
        return dg.AssetCheckResult(asset_key=key, check_name=name, passed=not validation.failed(rules),
                                   severity=level, description=validation.describe(rules),
                                   metadata=_validation_metadata(validation, rules))

    return [(k, _days_judged(context, lambda ctx, name=k.name: judged(ctx, name))) for k in wanted]


@table_check(_RECONCILIATION, blocking=True,
             description="Every day and source: rows read = rows accepted + rows quarantined + duplicates merged "
                         "+ records skipped as not requests + failed calls that name no model.")
def ingest_reconciliation_balanced(context: dg.AssetExecutionContext, ledger: LedgerResource
                                   ) -> dg.AssetCheckResult:
    files = _day_files(ledger, "quality", "ingest_reconciliation_daily", context)
    broken = query_files(
        "SELECT day, source, rows_read, rows_accepted, rows_quarantined, duplicates_merged, skipped_not_request, "
        "failures_no_model FROM read_parquet($f, union_by_name = true) WHERE NOT balanced ORDER BY day, source",
        {"f": files})
    examples = [f"{d} {s}: read {r} != accepted {a} + quarantined {q} + merged {m} + skipped {k}"
                + (f" + failures of no model {n}" if n else "")
                for d, s, r, a, q, m, k, n in broken]
    return dg.AssetCheckResult(
        passed=not broken,
        description=("quality.ingest_reconciliation_daily does not balance: " + "; ".join(examples[:5])
                     if broken else f"{len(files)} day(s) balanced for every source"),
        metadata={"unbalanced_rows": len(broken)},
    )


def _quarantine_by_source(ledger: LedgerResource, context: dg.AssetExecutionContext) -> list[tuple]:
    """Per day and source: rows read, rows quarantined, the commonest reasons (field: rule, without values) and
    the (at most three) files with most rows quarantined, a line each: the file, its first such line, the rule that
    line broke (with "did you mean" where a field is misspelt) and its count.
    Records skipped as not requests are in neither: nothing is wrong with them."""
    return query_files(
        "WITH r AS (SELECT * FROM read_parquet($recon)), "
        # 'field: rule' reasons count by field; the others (a line that is not JSON) by their text before '('.
        "q AS (SELECT day, source, CASE WHEN regexp_matches(reason, '^\\w+:') "
        "      THEN regexp_extract(reason, '^(\\w+):', 1) ELSE trim(regexp_replace(reason, '\\(.*', '')) END "
        "      AS field, count(*) AS n "
        "      FROM read_parquet($quarantine) GROUP BY ALL), "
        "f AS (SELECT day, source, file, count(*) AS n, min(line) AS first_line, "
        "      split_part(arg_min(reason, line), '; ', 1) AS first_reason, "
        "      row_number() OVER (PARTITION BY day, source ORDER BY count(*) DESC, file) AS rank "
        "      FROM read_parquet($quarantine) GROUP BY day, source, file) "
        "SELECT r.day, r.source, r.rows_read, r.rows_quarantined, "
        "       (SELECT string_agg(field || ' ' || n, ', ' ORDER BY n DESC, field) FROM q "
        "        WHERE q.day = r.day AND q.source = r.source), "
        "       (SELECT string_agg(format('  {} line {}: {} ({:,} row(s))', f.file, f.first_line, f.first_reason, "
        "                                 f.n), chr(10) ORDER BY f.rank) "
        "        FROM f WHERE f.day = r.day AND f.source = r.source AND f.rank <= 3) "
        "FROM r ORDER BY r.day, r.source",
        {"recon": _day_files(ledger, "quality", "ingest_reconciliation_daily", context),
         "quarantine": _day_files(ledger, "quality", "quarantine", context)})


@table_check(_RECONCILIATION, blocking=True, additional_deps=("quality.quarantine",),
             description="No source quarantines more than max_quarantine_share of the rows it read "
                         "(the ledger resource's setting, 0.1% by default): beyond it the figures are not trusted.")
def quarantine_within_tolerance(context: dg.AssetExecutionContext, ledger: LedgerResource
                                ) -> dg.AssetCheckResult:
    rows = _quarantine_by_source(ledger, context)
    limit = ledger.max_quarantine_share
    over = [(d, s, read, quarantined, reasons, files) for d, s, read, quarantined, reasons, files in rows
            if read and quarantined / read > limit]
    # A line per day and source, then a line per file (at most three): the file, its first line quarantined and why.
    examples = [f"{d} {s}: {q:,} of {r:,} rows ({q / r:.2%}) quarantined, by field: {reasons}\n{files}"
                for d, s, r, q, reasons, files in over]
    return dg.AssetCheckResult(
        passed=not over,
        description=(f"too many rows quarantined (limit {limit:.2%}); the day was not published:\n"
                     + "\n".join(examples[:5]) + "\nFile, line and reason of each row: "
                     + ", ".join(str(lake.day_file(ledger.layout.lake, "quality", "quarantine", d))
                                 for d in sorted({d for d, *_ in over}))
                     + " (the warehouse view quality.quarantine_pending). Fix the source and re-run the day."
                     if over else f"every source within {limit:.2%} quarantined"),
        metadata={"sources_over_limit": len(over), "max_quarantine_share": limit},
    )


@table_check(_RECONCILIATION, blocking=False, additional_deps=("quality.quarantine",),
             description="Warns when any row was quarantined, with the count per source and field.")
def quarantine_empty(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    rows = _quarantine_by_source(ledger, context)
    found = [(d, s, q, reasons) for d, s, _read, q, reasons, _files in rows if q]
    return dg.AssetCheckResult(
        passed=not found, severity=dg.AssetCheckSeverity.WARN,
        description=("; ".join(f"{d} {s}: {q:,} row(s) quarantined ({reasons})" for d, s, q, reasons in found)
                     if found else "no row quarantined"),
        metadata={"rows_quarantined": sum(q for *_, q, _ in found)},
    )


@table_check(_RECONCILIATION, blocking=False,
             description="Warns with what a source's rows alone do not say, once per source and day: its own totals "
                         "disagreeing with its rows (a Codex session whose turns do not add up to its last "
                         "total_token_usage), failed calls that name no model, times written without a zone and "
                         "read as UTC; each naming the file.")
def source_notes_empty(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    noted = query_files("SELECT day, source, notes FROM read_parquet($f, union_by_name = true) "
                        "WHERE notes IS NOT NULL ORDER BY day, source",
                        {"f": _day_files(ledger, "quality", "ingest_reconciliation_daily", context)})
    return dg.AssetCheckResult(
        passed=not noted, severity=dg.AssetCheckSeverity.WARN,
        description=("; ".join(f"{d} {s}: {n}" for d, s, n in noted) if noted
                     else "nothing noted: every source's totals agree with its rows, every failed call names its "
                          "model and every time its zone"),
        metadata={"sources_with_notes": len(noted)},
    )


@table_check("core.gateway_requests", blocking=True, additional_deps=("core.deployments_daily",),
             description="Every (model, deployment_id) in the day's requests is in the inventory for that day.")
def models_in_inventory(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    missing = query_files(
        "SELECT r.day, r.model, r.deployment_id, count(*) FROM read_parquet($requests) r "
        "ANTI JOIN read_parquet($deployments) d ON d.day = r.day AND d.model = r.model "
        "AND d.deployment_id = r.deployment_id GROUP BY ALL ORDER BY 1, 4 DESC",
        {"requests": _day_files(ledger, "core", "gateway_requests", context),
         "deployments": _day_files(ledger, "core", "deployments_daily", context)})
    return dg.AssetCheckResult(
        passed=not missing,
        description=("requests of deployments not in config/deployments.yaml that day: " + "; ".join(
            f"{d} model {m!r} deployment {dep!r}: {n:,} request(s)" for d, m, dep, n in missing[:5])
            + ". Add them to the inventory and re-run the day." if missing
            else "every model and deployment in the logs is in the inventory"),
        metadata={"unknown_pairs": len(missing)},
    )


@table_check("core.gateway_requests", blocking=False, additional_deps=("core.deployments_daily",),
             description="Every self-hosted (GPU) deployment in force on the day served at least one request (a "
                         "warning: a model may be idle, but a silent one is often a log that never arrived). A "
                         "hosted-API deployment with no request is only counted: it costs nothing unused.")
def deployments_with_requests(context: dg.AssetExecutionContext, ledger: LedgerResource
                              ) -> dg.AssetCheckResult:
    silent = query_files(
        "SELECT d.day, d.model, d.deployment_id, d.kind = 'api' FROM read_parquet($deployments) d "
        "ANTI JOIN read_parquet($requests) r ON r.day = d.day AND r.deployment_id = d.deployment_id "
        "GROUP BY ALL ORDER BY ALL",
        {"requests": _day_files(ledger, "core", "gateway_requests", context),
         "deployments": _day_files(ledger, "core", "deployments_daily", context)})
    gpus = [(d, m, dep) for d, m, dep, api in silent if not api]
    api = [(d, m, dep) for d, m, dep, hosted in silent if hosted]
    idle_api = (f"{len(api)} hosted-API deployment-day(s) with no request (provider-managed: nothing to check)"
                if api else "")
    return dg.AssetCheckResult(
        passed=not gpus, severity=dg.AssetCheckSeverity.WARN,
        description=("self-hosted deployments in force with no request that day: " + "; ".join(
            f"{d} {dep} (model {m})" for d, m, dep in gpus[:10])
            + (f" and {len(gpus) - 10} more" if len(gpus) > 10 else "")
            + ". If they served traffic, their logs are missing: land them and re-run the day." if gpus
            else "every self-hosted deployment in force served requests" + (f"; {idle_api}" if api else "")),
        metadata={"deployments_without_requests": len(gpus), "api_deployments_without_requests": len(api)},
    )


def freshness_verdict(day: date, now: datetime, deadline: datetime, has_data: bool, what: str) -> tuple[bool, str]:
    """A day's input is late when it is missing after its deadline; running before the deadline is flagged too."""
    if has_data and now >= deadline:
        return True, ""
    if has_data:
        return False, (f"{day}: ran at {now:%Y-%m-%d %H:%M} UTC, before its {what} are expected complete "
                       f"({deadline:%Y-%m-%d %H:%M} UTC); re-run the day after that")
    if now >= deadline:
        return False, f"{day}: no {what} by {deadline:%Y-%m-%d %H:%M} UTC"
    return True, f"{day}: no {what} yet; expected by {deadline:%Y-%m-%d %H:%M} UTC"


def _day_end(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


@table_check("core.gateway_requests", blocking=False,
             description="Warns when a day's gateway logs have not arrived by logs_complete_hour_utc of the next "
                         "day (04:00 UTC by default), or when the day ran before then.")
def gateway_logs_fresh(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    now = datetime.now(UTC)
    notes = []
    for day in days_of(context):
        has_data = bool(landing_files(ledger.layout.gateway_day_dir(day), GATEWAY_FORMATS, "gateway log"))
        deadline = _day_end(day) + timedelta(hours=ledger.logs_complete_hour_utc)
        notes.append(freshness_verdict(day, now, deadline, has_data, "gateway logs"))
    late = [text for ok, text in notes if not ok]
    return dg.AssetCheckResult(passed=not late, severity=dg.AssetCheckSeverity.WARN,
                               description="; ".join(late) or "; ".join(t for _, t in notes if t) or "logs complete")


@table_check("core.billing_charges", blocking=False,
             description="Warns when no billing row covers a day billing_complete_after_hours (36 by default) "
                         "after it ended.")
def billing_fresh(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    now = datetime.now(UTC)
    rows = dict(query_files(
        "SELECT day, count(*) FROM read_parquet($f) GROUP BY day",
        {"f": _day_files(ledger, "core", "billing_charges", context)}))
    notes = [freshness_verdict(day, now, _day_end(day) + timedelta(hours=ledger.billing_complete_after_hours),
                        bool(rows.get(day)), "billing rows") for day in days_of(context)]
    late = [text for ok, text in notes if not ok]
    return dg.AssetCheckResult(passed=not late, severity=dg.AssetCheckSeverity.WARN,
                               description="; ".join(late) or "; ".join(t for _, t in notes if t) or "billing complete")


@table_check("finance.cost_reconciliation_daily", blocking=True,
             description="Every day and currency: billed EffectiveCost = allocated + unallocated, within 1e-6.")
def cost_reconciliation_balanced(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    files = _day_files(ledger, "finance", "cost_reconciliation_daily", context)
    with scratch_connection() as con:
        broken = unbalanced_rows(con, files)
        checked = con.execute("SELECT count(*) FROM read_parquet($f)", {"f": files}).fetchone()[0]
    return dg.AssetCheckResult(
        passed=not broken,
        description=("finance.cost_reconciliation_daily does not balance: " + "; ".join(broken[:5])
                     + (f"; and {len(broken) - 5} more" if len(broken) > 5 else "")
                     if broken else f"{len(files)} day(s), {checked} currency row(s) balanced"),
        metadata={"unbalanced_rows": len(broken)},
    )


@table_check("finance.cost_reconciliation_daily", blocking=True,
             description="No day leaves more than max_unpriced_share of its hosted-API requests unpriced (the "
                         "ledger resource's setting, 0 by default: every request must have a price).")
def api_requests_priced(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.AssetCheckResult:
    limit = ledger.max_unpriced_share
    over = query_files(
        "SELECT day, api_requests_unpriced, api_requests_priced + api_requests_unpriced, api_unpriced_reasons "
        "FROM read_parquet($f) WHERE api_unpriced_share > $limit ORDER BY day",
        {"f": _day_files(ledger, "finance", "cost_reconciliation_daily", context), "limit": limit})
    examples = [f"{d}: {n:,} of {total:,} hosted-API requests ({n / total:.2%}) unpriced ({reasons})"
                for d, n, total, reasons in over]
    return dg.AssetCheckResult(
        passed=not over,
        description=(f"too many hosted-API requests without a price (limit {limit:.2%}): " + "; ".join(examples[:5])
                     + ". The day was not published. Each request and its reason: core.api_request_costs "
                     "(price_status 'unpriced'). Add the missing price sheet, tier, region or long-context rate to "
                     "costs.yaml (docs/configuration.md) and re-run the day."
                     if over else f"hosted-API requests unpriced within {limit:.2%}"),
        metadata={"days_over_limit": len(over), "max_unpriced_share": limit},
    )
