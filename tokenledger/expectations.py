"""Validate a table's day files against its contract: Great Expectations suites derived from the contract, run
in bounded batches, plus the rules only a whole-table query can judge, run in DuckDB.

Derived from each contract column: not null (`required`), not null when a condition holds (`requiredWhen`),
between (`minimum`/`maximum`, exclusive or not), in set (`invalidValues`), regex (`pattern`); from its table rules:
column pair A >= B (or A > B). Those run in GX 1.x over pandas batches of at most `batch_rows` rows, so a day of
any size is never in memory at once. Judged in DuckDB over all the day's rows, because they need them all:
the schema (every contract column present, with a compatible type), uniqueness of `unique` columns and of the
primary key, the `sql` row rules and the set rules.

Severity follows the contract: `error` rules are critical (the check that runs them blocks publishing),
`warning` rules are reported but never block. GX is imported only when a suite is built: the import takes
seconds and most processes never validate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.contracts import Column, Table
from tokenledger.duck import sql_path

CRITICAL = "critical"
WARNING = "warning"
BATCH_VECTORS = 64  # DuckDB vectors of 2,048 rows: about 131,000 rows per GX batch
EXAMPLES = 5


@dataclass
class Finding:
    """One rule broken by some rows (or by the table's shape)."""

    rule: str
    severity: str
    unexpected: int
    checked: int
    examples: list[Any] = field(default_factory=list)

    def describe(self) -> str:
        shown = ", ".join(_show(e) for e in self.examples[:EXAMPLES])
        where = f" of {self.checked:,}" if self.checked else ""
        return f"{self.rule}: {self.unexpected:,}{where} row(s) fail" + (f", e.g. {shown}" if shown else "")


@dataclass
class Validation:
    """The outcome of validating one table's files: what was checked and every broken rule."""

    table: str
    files: list[str]
    rows: int = 0
    findings: list[Finding] = field(default_factory=list)

    def failed(self, severity: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]

    def describe(self, severity: str) -> str:
        broken = self.failed(severity)
        if not broken:
            return f"{self.table}: {self.rows:,} row(s) in {len(self.files)} day file(s) meet every {severity} rule"
        return f"{self.table} ({len(self.files)} day file(s), {self.rows:,} rows): " + "; ".join(
            f.describe() for f in broken)


def _show(value: Any) -> str:
    """An example value as a reader expects it: plain numbers, `null` for missing, pairs in parentheses."""
    if hasattr(value, "item"):  # numpy scalars from pandas batches
        value = value.item()
    if isinstance(value, list | tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, float):
        return repr(round(value, 6))
    return repr(value) if isinstance(value, str) else str(value)


def _severity(contract_severity: str) -> str:
    return WARNING if contract_severity == "warning" else CRITICAL


# --- the GX suite ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Expectation:
    label: str
    severity: str
    gx_type: str
    kwargs: tuple[tuple[str, Any], ...]


def expectations_for(table: Table, present: set[str]) -> list[_Expectation]:
    """The GX expectations a contract implies for the columns present in the files, with their labels."""
    out: list[_Expectation] = []

    def add(label: str, severity: str, gx_type: str, **kwargs: Any) -> None:
        out.append(_Expectation(label, severity, gx_type, tuple(sorted(kwargs.items()))))

    for col in table.columns:
        if col.name not in present:
            continue
        if col.required:
            add(f"{col.name} not null", CRITICAL, "ExpectColumnValuesToNotBeNull", column=col.name)
        if col.required_when:
            add(f"{col.name} not null when {col.required_when}", CRITICAL, "ExpectColumnValuesToNotBeNull",
                column=col.name, row_condition=col.required_when, condition_parser="pandas")
        if _is_array(col):
            continue
        low = col.minimum if col.minimum is not None else col.exclusive_minimum
        high = col.maximum if col.maximum is not None else col.exclusive_maximum
        if low is not None or high is not None:
            add(_range_label(col), CRITICAL, "ExpectColumnValuesToBeBetween", column=col.name, min_value=low,
                max_value=high, strict_min=col.exclusive_minimum is not None,
                strict_max=col.exclusive_maximum is not None)
        if col.valid_values:
            add(f"{col.name} in {{{', '.join(col.valid_values)}}}", CRITICAL, "ExpectColumnValuesToBeInSet",
                column=col.name, value_set=list(col.valid_values))
        if col.pattern:
            add(f"{col.name} matches {col.pattern}", CRITICAL, "ExpectColumnValuesToMatchRegex", column=col.name,
                regex=col.pattern)
    for rule in table.row_rules:
        if rule.expectation and set(rule.columns) <= present:
            kwargs = dict(rule.expectation.get("kwargs", {}))
            add(f"{rule.name} ({rule.description.rstrip('.')})", _severity(rule.severity),
                "ExpectColumnPairValuesAToBeGreaterThanB", ignore_row_if="either_value_is_missing", **kwargs)
    return out


def _range_label(col: Column) -> str:
    parts = []
    if col.minimum is not None:
        parts.append(f">= {col.minimum}")
    if col.exclusive_minimum is not None:
        parts.append(f"> {col.exclusive_minimum}")
    if col.maximum is not None:
        parts.append(f"<= {col.maximum}")
    if col.exclusive_maximum is not None:
        parts.append(f"< {col.exclusive_maximum}")
    return f"{col.name} {' and '.join(parts)}"


def _is_array(col: Column) -> bool:
    return col.physical_type.endswith("[]")


@cache
def _gx() -> tuple[Any, Any, Any, Any]:
    """GX imported once per process, with an ephemeral context whose progress bars are off."""
    import logging

    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch_definition = (context.data_sources.add_pandas("tokenledger").add_dataframe_asset("day")
                        .add_batch_definition_whole_dataframe("batch"))
    return gx, gxe, context, batch_definition


def _suite(name: str, expectations: list[_Expectation]) -> Any:
    gx, gxe, context, _ = _gx()
    suite = gx.ExpectationSuite(name=name)
    for exp in expectations:
        severity = "warning" if exp.severity == WARNING else "critical"
        suite.add_expectation(getattr(gxe, exp.gx_type)(**dict(exp.kwargs), severity=severity,
                                                        description=exp.label))
    return suite


# --- validation ------------------------------------------------------------------------------------------

def _normalized_type(con: duckdb.DuckDBPyConnection, physical: str) -> str:
    return con.execute(f"SELECT typeof(CAST(NULL AS {physical}))").fetchone()[0]


_COMPATIBLE = {("JSON", "VARCHAR"), ("VARCHAR", "JSON")}


def _schema_findings(con: duckdb.DuckDBPyConnection, table: Table, actual: dict[str, str]) -> list[Finding]:
    findings = []
    for col in table.columns:
        if col.name not in actual:
            if col.required:
                findings.append(Finding(f"column {col.name} present", CRITICAL, 1, 0, ["missing"]))
            continue
        expected = _normalized_type(con, col.physical_type)
        if expected != actual[col.name] and (expected, actual[col.name]) not in _COMPATIBLE:
            findings.append(Finding(f"column {col.name} of type {expected}", CRITICAL, 1, 0, [actual[col.name]]))
    return findings


def _gx_select(table: Table, actual: dict[str, str]) -> str:
    """The columns GX sees: contract columns only, DECIMAL as DOUBLE and JSON as text (pandas has neither)."""
    items = []
    for col in table.columns:
        if col.name not in actual:
            continue
        kind = actual[col.name]
        if kind.startswith("DECIMAL"):
            items.append(f"CAST({col.name} AS DOUBLE) AS {col.name}")
        elif kind == "JSON":
            items.append(f"CAST({col.name} AS VARCHAR) AS {col.name}")
        else:
            items.append(col.name)
    return ", ".join(items)


def _source(files: list[str]) -> str:
    return f"read_parquet([{', '.join(sql_path(f) for f in files)}], union_by_name = true)"


def validate_files(con: duckdb.DuckDBPyConnection, name: str, table: Table, files: list[Path | str],
                   batch_vectors: int = BATCH_VECTORS) -> Validation:
    """Validate `files` (one table's rows) against the contract table `table`, without day labels."""
    return validate_days(con, name, table, dict(enumerate(files)), batch_vectors, label_days=False)


def validate_days(con: duckdb.DuckDBPyConnection, name: str, table: Table, day_files: dict[Any, Path | str],
                  batch_vectors: int = BATCH_VECTORS, label_days: bool = True) -> Validation:
    """Validate a table's day files against the contract table `table`.

    The GX suite runs once over all the days (its rules hold row by row, and GX's cost is per call, not per row);
    the whole-table rules run day by day, since a contract's grain, uniqueness and set rules hold within a day.
    Each finding is prefixed with its day (or the range of days, for the suite).
    """
    files = {day: str(path) for day, path in day_files.items()}
    result = Validation(table=name, files=list(files.values()))
    missing = [f for f in files.values() if not Path(f).is_file()]
    if missing:
        result.findings.append(Finding("day file present", CRITICAL, len(missing), len(files), missing))
    present_days = {day: f for day, f in files.items() if f not in missing}
    if not present_days:
        return result
    source = _source(list(present_days.values()))
    actual = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    result.rows = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
    days = sorted(present_days, key=str)
    span = (f"{days[0]}" if len(days) == 1 else f"{days[0]}..{days[-1]}") if label_days else ""

    def labelled(label: str, findings: list[Finding]) -> list[Finding]:
        return [Finding(f"{label} {f.rule}".strip(), f.severity, f.unexpected, f.checked, f.examples)
                for f in findings]

    result.findings += labelled(span, _schema_findings(con, table, actual))
    present = set(actual)
    if result.rows:
        result.findings += labelled(span, _run_gx(con, name, table, source, actual, present, batch_vectors))
    for day, path in present_days.items():
        day_source = _source([path])
        rows = con.execute(f"SELECT count(*) FROM {day_source}").fetchone()[0]
        if rows:
            found = _duckdb_findings(con, table, day_source, present, rows)
            result.findings += labelled(str(day) if label_days else "", found)
    return result


def _run_gx(con: duckdb.DuckDBPyConnection, name: str, table: Table, source: str, actual: dict[str, str],
            present: set[str], batch_vectors: int) -> list[Finding]:
    expectations = expectations_for(table, present)
    if not expectations:
        return []
    _, _, _, batch_definition = _gx()
    suite = _suite(f"{name}.contract", expectations)
    totals = {e.label: Finding(e.label, e.severity, 0, 0) for e in expectations}
    cursor = con.execute(f"SELECT {_gx_select(table, actual)} FROM {source}")
    while True:
        frame = cursor.fetch_df_chunk(batch_vectors)
        if frame.empty:
            break
        batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
        outcome = batch.validate(suite, result_format={"result_format": "SUMMARY",
                                                       "partial_unexpected_count": EXAMPLES})
        for item in outcome.results:
            finding = totals[item.expectation_config.description]
            finding.checked += int(item.result.get("element_count") or 0)
            if item.exception_info and item.exception_info.get("raised_exception"):
                finding.unexpected += 1
                finding.examples.append(item.exception_info.get("exception_message"))
                continue
            finding.unexpected += int(item.result.get("unexpected_count") or 0)
            if len(finding.examples) < EXAMPLES:
                finding.examples += list(item.result.get("partial_unexpected_list") or [])[:EXAMPLES]
    return [f for f in totals.values() if f.unexpected]


def _duckdb_findings(con: duckdb.DuckDBPyConnection, table: Table, source: str, present: set[str],
                     rows: int) -> list[Finding]:
    findings = []
    keys = [[c.name] for c in table.columns if c.unique and not c.primary_key]
    primary = [c for c in table.primary_key if c in present]
    if primary:
        keys.append(primary)
    for key in keys:
        if not set(key) <= present:
            continue
        cols = ", ".join(key)
        dup_rows, examples = con.execute(
            f"SELECT coalesce(sum(n - 1), 0), list(k ORDER BY n DESC)[1:{EXAMPLES}] FROM "
            f"(SELECT ({cols})::VARCHAR AS k, count(*) AS n FROM {source} GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()
        if dup_rows:
            findings.append(Finding(f"({cols}) unique", CRITICAL, int(dup_rows), rows, list(examples or [])))
    for rule in table.row_rules:
        if rule.expectation or not set(rule.columns) <= present:
            continue
        where = f"FROM {source} WHERE coalesce({rule.violation}, false)"
        count = con.execute(f"SELECT count(*) {where}").fetchone()[0]
        if count:
            examples = con.execute(f"SELECT {', '.join(rule.columns) or '*'} {where} LIMIT {EXAMPLES}").fetchall()
            findings.append(Finding(f"{rule.name} ({rule.description.rstrip('.')})", _severity(rule.severity),
                                    int(count), rows, examples))
    # Set rules are written against the contract's table name: give the day's rows that name.
    con.execute(f"CREATE OR REPLACE TEMP VIEW {table.name} AS SELECT * FROM {source}")
    for rule in table.set_rules:
        count = con.execute(rule.query).fetchone()[0]
        if count:
            findings.append(Finding(f"{rule.name} ({rule.description.rstrip('.')})", _severity(rule.severity),
                                    int(count), rows))
    return findings
