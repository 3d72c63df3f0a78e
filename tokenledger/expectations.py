"""Validate a table's day files against its contract: every rule counted in DuckDB, the counts judged by a Great
Expectations suite.

Each rule the contract states becomes a count of the rows that break it. From each column: not null (`required`),
not null when a condition holds (`requiredWhen`), between (`minimum`/`maximum`, exclusive or not), in set
(`invalidValues`), regex (`pattern`), at most `maxLength` characters; from the table: the column pair rules
(A >= B, or A > B), the `sql` row rules, uniqueness of `unique` columns and of the primary key, and the set rules
(whole queries over the day). One DuckDB statement per day file computes every count of both severities in one
scan, the set rules as scalar subqueries of it; examples of the rows that break a rule are read only for a rule
whose count is not 0. The schema (every contract column present, with a compatible type) comes from the files'
metadata.

The gate is a GX 1.x suite over those counts: a frame with one row per rule (and per day, for the rules judged
day by day) and one column of counts per severity, on which `expect_column_values_to_be_between(0, 0)` must hold.
The rows GX finds unexpected are the findings; GX's verdict per severity is the check's. GX never sees a request:
a day of millions of rows is judged as a frame of a few dozen counts.

Severity follows the contract: `error` rules are critical (the `contract` check blocks publishing), `warning`
rules are reported but never block. Both are counted in the same pass. GX is imported only when a suite first
judges: the import takes seconds and most processes never validate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.contracts import Column, RowRule, Table, sql_literal
from tokenledger.storage.duck import literal_path, query_files

CRITICAL = "critical"
WARNING = "warning"
SEVERITIES = (CRITICAL, WARNING)
EXAMPLES = 5


@dataclass
class Finding:
    """One rule's count over some rows (or the table's shape): broken when `unexpected` is not 0."""

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
    """The outcome of validating one table's files: what was checked, every rule's count and the broken rules
    (`findings`, as the GX suite judged them)."""

    table: str
    files: list[str]
    rows: int = 0
    counts: list[Finding] = field(default_factory=list)
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
    """An example value as a reader expects it: plain numbers, `null` for missing, rows in parentheses."""
    if isinstance(value, list | tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, float):
        return repr(round(value, 6))
    return repr(value) if isinstance(value, str) else str(value)


def _severity(contract_severity: str) -> str:
    return WARNING if contract_severity == "warning" else CRITICAL


# --- the rules, as SQL over one day's rows ---------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """One rule of a contract as DuckDB aggregates over a day's rows (the relation named as the contract's table).

    `count` and `checked` are aggregate expressions: the rows that break the rule and the rows it judges. When the
    count is not 0, `exact` (when given) counts again without the shortcut `count` takes, and `examples` (a query
    over the relation) gives up to EXAMPLES example values, as rows when `as_rows`. A rule `per_day` is labelled
    with its day; the others are labelled with the run's days and summed over them, since a row rule holds
    whatever the day. A `set_rule` is a whole query over one day's rows, so it is never counted over several days
    grouped by day.
    """

    label: str
    severity: str
    count: str
    checked: str = "count(*)"
    examples: str | None = None
    as_rows: bool = False
    per_day: bool = False
    exact: str | None = None
    set_rule: bool = False


def _floating(col: Column) -> bool:
    return col.physical_type.upper() in {"DOUBLE", "FLOAT", "REAL"}


def _missing(col: Column) -> str:
    # pandas held a floating NaN as missing, as GX saw it; the contract's tables never store one.
    return f"({col.name} IS NULL OR isnan({col.name}))" if _floating(col) else f"({col.name} IS NULL)"


def _shown(name: str, actual: str) -> str:
    """A column as examples show it: DECIMAL as a plain float, JSON as its text."""
    if actual.startswith("DECIMAL"):
        return f"CAST({name} AS DOUBLE)"
    return f"CAST({name} AS VARCHAR)" if actual == "JSON" else name


def _count_if(condition: str) -> str:
    # A NULL condition (a missing value) breaks no rule; count_if of only NULLs is NULL, not 0.
    return f"coalesce(count_if({condition}), 0)"


def _where(relation: str, condition: str, shown: str) -> str:
    return f"SELECT {shown} FROM {relation} WHERE {condition} LIMIT {EXAMPLES}"


def contract_rules(table: Table, actual: dict[str, str]) -> list[Rule]:
    """Every rule of the contract table `table` that the columns present (`actual`: name to DuckDB type) allow,
    in the order findings are reported: column by column, then the table's rules."""
    rel = table.name
    rules: list[Rule] = []
    for col in table.columns:
        if col.name in actual:
            rules += _column_rules(col, rel, actual[col.name])
    for rule in table.row_rules:
        if rule.expectation and set(rule.columns) <= set(actual):
            # A column pair rule ignores a row missing either value, and a NaN is missing (as in GX over pandas).
            broken = " AND ".join([rule.violation] + [f"NOT isnan({c})" for c in rule.columns
                                                      if _floating(table.column(c))])
            shown = ", ".join(_shown(c, actual[c]) for c in rule.columns)
            rules.append(Rule(_rule_label(rule), _severity(rule.severity), _count_if(broken),
                              examples=_where(rel, broken, shown), as_rows=True))
    keys = [[c.name] for c in table.columns if c.unique and not c.primary_key]
    if table.primary_key and set(table.primary_key) <= set(actual):
        keys.append(table.primary_key)
    for key in keys:
        if set(key) <= set(actual):
            rules.append(_unique_rule(key, rel))
    for rule in table.row_rules:
        if not rule.expectation and set(rule.columns) <= set(actual):
            rules.append(Rule(_rule_label(rule), _severity(rule.severity), _count_if(rule.violation),
                              examples=_where(rel, rule.violation, ", ".join(rule.columns) or "*"), as_rows=True,
                              per_day=True))
    for set_rule in table.set_rules:
        # A set rule is a whole query over the day (written against the contract's table name), so a scalar
        # subquery here; an empty day has no rows for it to judge (a rule such as "24 hours a day" would fail).
        rules.append(Rule(f"{set_rule.name} ({set_rule.description.rstrip('.')})", _severity(set_rule.severity),
                          f"CASE WHEN count(*) > 0 THEN coalesce(({set_rule.query}), 0) ELSE 0 END", per_day=True,
                          set_rule=True))
    return rules


def _rule_label(rule: RowRule) -> str:
    return f"{rule.name} ({rule.description.rstrip('.')})"


def _column_rules(col: Column, rel: str, actual: str) -> list[Rule]:
    n, missing = col.name, _missing(col)
    value = _shown(n, actual)
    out = []
    if col.required:
        out.append(Rule(f"{n} not null", CRITICAL, _count_if(missing), examples=_where(rel, missing, "NULL")))
    if col.required_when:
        when = f"({col.required_when})"
        out.append(Rule(f"{n} not null when {col.required_when}", CRITICAL, _count_if(f"{missing} AND {when}"),
                        checked=_count_if(when), examples=_where(rel, f"{missing} AND {when}", "NULL")))
    if col.physical_type.endswith("[]"):
        return out
    # A missing value is judged only by the rules above: each condition below is NULL for it (a NaN, which DuckDB
    # orders above every number, is excluded by hand).
    low = col.minimum if col.minimum is not None else col.exclusive_minimum
    high = col.maximum if col.maximum is not None else col.exclusive_maximum
    outside = []
    if low is not None:
        outside.append(f"{n} {'<=' if col.exclusive_minimum is not None else '<'} {sql_literal(low)}")
    if high is not None:
        above = f"{n} {'>=' if col.exclusive_maximum is not None else '>'} {sql_literal(high)}"
        outside.append(f"({above} AND NOT isnan({n}))" if _floating(col) else above)
    if outside:
        broken = f"({' OR '.join(outside)})"
        out.append(Rule(_range_label(col), CRITICAL, _count_if(broken), examples=_where(rel, broken, value)))
    if col.valid_values:
        broken = f"{n} NOT IN ({', '.join(sql_literal(v) for v in col.valid_values)})"
        out.append(Rule(f"{n} in {{{', '.join(col.valid_values)}}}", CRITICAL, _count_if(broken),
                        examples=_where(rel, broken, value)))
    if col.pattern:
        broken = f"NOT regexp_matches({n}, {sql_literal(col.pattern)})"
        out.append(Rule(f"{n} matches {col.pattern}", CRITICAL, _count_if(broken),
                        examples=_where(rel, broken, value)))
    if col.max_length is not None:
        # The length is shown, not the value: a value too long to keep may be one that must not be repeated.
        broken = f"length({n}) > {int(col.max_length)}"
        out.append(Rule(f"{n} at most {int(col.max_length)} characters", CRITICAL, _count_if(broken),
                        examples=_where(rel, broken, f"length({n})")))
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


def _unique_rule(key: list[str], rel: str) -> Rule:
    cols = ", ".join(key)
    k = f"({cols})::VARCHAR"
    # Rows beyond the first of each key. Counted on 64-bit hashes of the key (a missing key hashes to one value,
    # so all missing keys are one key, as in GROUP BY): a collision can only add a duplicate, never hide one, so a
    # count of 0 is exact, and any other count is redone on the keys themselves.
    return Rule(f"({cols}) unique", CRITICAL, f"count(*) - count(DISTINCT hash({cols}))",
                exact=f"count(*) - count(DISTINCT {k}) - (count({k}) < count(*))::BIGINT",
                examples=f"SELECT k FROM (SELECT {k} AS k, count(*) AS n FROM {rel} GROUP BY ALL HAVING count(*) > 1) "
                         f"ORDER BY n DESC, k LIMIT {EXAMPLES}",
                per_day=True)


# --- the schema ----------------------------------------------------------------------------------------------

@cache
def _normalized_type(physical: str) -> str:
    return query_files(f"SELECT typeof(CAST(NULL AS {physical}))")[0][0]


_COMPATIBLE = {("JSON", "VARCHAR"), ("VARCHAR", "JSON")}


def _schema_counts(table: Table, actual: dict[str, str]) -> list[Finding]:
    counts = []
    for col in table.columns:
        if col.name not in actual:
            if col.required:
                counts.append(Finding(f"column {col.name} present", CRITICAL, 1, 0, ["missing"]))
            continue
        expected = _normalized_type(col.physical_type)
        broken = expected != actual[col.name] and (expected, actual[col.name]) not in _COMPATIBLE
        counts.append(Finding(f"column {col.name} of type {expected}", CRITICAL, int(broken), 0,
                              [actual[col.name]] if broken else []))
    return counts


# --- counting --------------------------------------------------------------------------------------------

def _day_relation(table: Table, columns: dict[str, str], day_columns: set[str], days: str = "$file",
                  file_column: str | None = None) -> str:
    """The CTE naming one day's rows as the contract's table (set rules are written against that name), with
    every column of the run's files: a column another day has and this one lacks is missing (NULL) here.

    With `days` a list of day files of the same schema and `file_column`, the rows of all of them, each with its
    file's path in `file_column` (a count grouped by it is a count per day)."""
    def quoted(name: str) -> str:  # a file may hold columns the contract does not name, in any spelling
        return '"' + name.replace('"', '""') + '"'

    items = [quoted(name) if name in day_columns else f"NULL::{kind} AS {quoted(name)}"
             for name, kind in columns.items()]
    reader = f"read_parquet({days})"
    if file_column:
        items.append(quoted(file_column))
        reader = f"read_parquet({days}, filename = '{file_column}')"
    return f"WITH {table.name} AS NOT MATERIALIZED (SELECT {', '.join(items)} FROM {reader}) "


def _count_day(con: duckdb.DuckDBPyConnection, cte: str, relation: str, params: dict[str, Any], rules: list[Rule]
               ) -> tuple[int, list[tuple[int, int] | str]]:
    """The day's rows and, per rule, (rows breaking it, rows it judges), all in one statement; a rule DuckDB cannot
    evaluate (a column of the wrong type) gives DuckDB's message instead, so the others are still counted."""
    def select(items: list[Rule]) -> str:
        return cte + "SELECT count(*)" + "".join(f", {r.count}, {r.checked}" for r in items) + f" FROM {relation}"

    try:
        row = con.execute(select(rules), params).fetchone()
        return int(row[0]), [(int(row[1 + 2 * i]), int(row[2 + 2 * i])) for i in range(len(rules))]
    except duckdb.Error:
        pass
    rows = int(con.execute(select([]), params).fetchone()[0])
    results: list[tuple[int, int] | str] = []
    for rule in rules:
        try:
            row = con.execute(select([rule]), params).fetchone()
            results.append((int(row[1]), int(row[2])))
        except duckdb.Error as exc:
            results.append(str(exc).splitlines()[0])
    return rows, results


# The column naming each row's day file in a count over several days (no contract names a column so).
_FILE_COLUMN = "__tokenledger_day_file"


def _count_together(con: duckdb.DuckDBPyConnection, table: Table, columns: dict[str, str],
                    day_schemas: dict[Any, tuple[tuple[str, str], ...]], present_days: dict[Any, str],
                    rules: list[Rule]) -> dict[Any, tuple[int, list[tuple[int, int] | str]]]:
    """What `_count_day` gives each day, for the days whose files share one schema, with every rule but the set
    rules counted in one statement grouped by day file; the set rules (whole queries over one day's rows) are
    still counted day by day. Planning a statement of every rule costs 5-60 ms a table, more than counting a
    day's rows, and a month's run would plan it 30 times for each of 25 tables.

    A day left out (alone in its schema, or in a group whose statement DuckDB cannot run, such as a column of
    the wrong type) is for `_count_day`, which names the rule DuckDB cannot evaluate."""
    grouped = [i for i, r in enumerate(rules) if not r.set_rule]
    set_rules = [i for i, r in enumerate(rules) if r.set_rule]
    by_schema: dict[tuple[tuple[str, str], ...], list[Any]] = {}
    for day, schema in day_schemas.items():
        by_schema.setdefault(schema, []).append(day)
    out: dict[Any, tuple[int, list[tuple[int, int] | str]]] = {}
    for schema, days in by_schema.items():
        if len(days) < 2 or _FILE_COLUMN in dict(schema):
            continue
        cte = _day_relation(table, columns, {name for name, _ in schema}, "$files", _FILE_COLUMN)
        query = (cte + f"SELECT {_FILE_COLUMN}, count(*)" + "".join(f", {rules[i].count}, {rules[i].checked}"
                                                                   for i in grouped)
                 + f" FROM {table.name} GROUP BY {_FILE_COLUMN}")
        try:
            found = {row[0]: row[1:] for row in con.execute(
                query, {"files": [literal_path(present_days[d]) for d in days]}).fetchall()}
        except duckdb.Error:
            continue
        for day in days:
            # A day with no rows has no group: no row breaks or is judged by a rule.
            row = found.get(present_days[day], (0,) + (0, 0) * len(grouped))
            counted: list[tuple[int, int] | str] = [(0, 0)] * len(rules)
            for j, i in enumerate(grouped):
                counted[i] = (int(row[1 + 2 * j]), int(row[2 + 2 * j]))
            if set_rules:
                cte_day = _day_relation(table, columns, {name for name, _ in schema})
                _, set_counted = _count_day(con, cte_day, table.name, {"file": literal_path(present_days[day])},
                                            [rules[i] for i in set_rules])
                for i, outcome in zip(set_rules, set_counted, strict=True):
                    counted[i] = outcome
            out[day] = (int(row[0]), counted)
    return out


def _examples(con: duckdb.DuckDBPyConnection, cte: str, params: dict[str, Any], rule: Rule, wanted: int) -> list:
    if rule.examples is None or wanted <= 0:
        return []
    rows = con.execute(cte + rule.examples, params).fetchmany(wanted)
    return [tuple(r) if rule.as_rows else r[0] for r in rows]


# --- validation ------------------------------------------------------------------------------------------

def validate_files(con: duckdb.DuckDBPyConnection, name: str, table: Table, files: list[Path | str]) -> Validation:
    """Validate `files` (one table's rows) against the contract table `table`, without day labels."""
    return validate_days(con, name, table, dict(enumerate(files)), label_days=False)


def validate_days(con: duckdb.DuckDBPyConnection, name: str, table: Table, day_files: dict[Any, Path | str],
                  label_days: bool = True) -> Validation:
    """Validate a table's day files against the contract table `table`, every rule of both severities at once.

    Rules that hold row by row are reported over all the days (prefixed with the range of days); uniqueness, the
    `sql` row rules and the set rules day by day (prefixed with their day), since a contract's grain holds within
    a day.
    """
    files = {day: str(path) for day, path in day_files.items()}
    result = Validation(table=name, files=list(files.values()))
    missing = [f for f in files.values() if not Path(f).is_file()]
    result.counts.append(Finding("day file present", CRITICAL, len(missing), len(files), missing))
    present_days = {day: f for day, f in files.items() if f not in missing}
    if present_days:
        _count_days(con, table, present_days, label_days, result)
    result.findings = judge(result.counts)
    return result


def _count_days(con: duckdb.DuckDBPyConnection, table: Table, present_days: dict[Any, str], label_days: bool,
                result: Validation) -> None:
    paths = [literal_path(f) for f in present_days.values()]
    columns = {r[0]: r[1] for r in con.execute(
        "DESCRIBE SELECT * FROM read_parquet($files, union_by_name = true)", {"files": paths}).fetchall()}
    days = sorted(present_days, key=str)
    span = (f"{days[0]}" if len(days) == 1 else f"{days[0]}..{days[-1]}") if label_days else ""

    def label(prefix: str, rule: str) -> str:
        return f"{prefix} {rule}".strip()

    result.counts += [Finding(label(span, f.rule), f.severity, f.unexpected, f.checked, f.examples)
                      for f in _schema_counts(table, columns)]
    rules = contract_rules(table, columns)
    over_days = {i: Finding(label(span, r.label), r.severity, 0, 0) for i, r in enumerate(rules) if not r.per_day}
    per_day: list[Finding] = []
    day_schemas = {day: tuple((r[0], r[1]) for r in con.execute(
        "DESCRIBE SELECT * FROM read_parquet($file)", {"file": literal_path(path)}).fetchall())
        for day, path in present_days.items()}
    together = _count_together(con, table, columns, day_schemas, present_days, rules)
    for day, path in present_days.items():
        params = {"file": literal_path(path)}
        cte = _day_relation(table, columns, {name for name, _ in day_schemas[day]})
        rows, counted = together[day] if day in together else _count_day(con, cte, table.name, params, rules)
        result.rows += rows
        for i, (rule, outcome) in enumerate(zip(rules, counted, strict=True)):
            examples: list | None = None
            if isinstance(outcome, str):  # not countable: one failure, with DuckDB's message as its example
                unexpected, checked, examples = 1, 0, [outcome]
            else:
                unexpected, checked = outcome
                if unexpected and rule.exact:
                    unexpected = int(con.execute(cte + f"SELECT {rule.exact} FROM {table.name}", params).fetchone()[0])
            if not rule.per_day:
                finding = over_days[i]
            elif rows:
                finding = Finding(label(str(day) if label_days else "", rule.label), rule.severity, 0, 0)
                per_day.append(finding)
            else:  # an empty day has no rows to break a rule of its own
                continue
            finding.unexpected += unexpected
            finding.checked += checked
            if unexpected:
                finding.examples += examples or _examples(con, cte, params, rule, EXAMPLES - len(finding.examples))
    result.counts += list(over_days.values()) + per_day


# --- the judge -------------------------------------------------------------------------------------------

def _defer_scipy_stats() -> None:
    """Make `scipy.stats` load on first use instead of at GX's import.

    Importing GX imports every expectation it ships, and three of them (KL divergence, two KS tests) import
    scipy.stats, about 1 s of the 3 s GX takes to import in each process. The suite uses none of them. The module
    object GX binds is importlib's lazy module, which runs scipy.stats in full the first time anything is read
    from it, so code that does use it gets the real module. Done once, from the step's thread, before GX is
    imported, and only if nothing has imported scipy.stats yet."""
    import importlib.util
    import sys

    if "scipy.stats" in sys.modules:
        return
    try:
        import scipy
    except ImportError:
        return
    spec = importlib.util.find_spec("scipy.stats")
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["scipy.stats"] = module
    spec.loader.exec_module(module)
    # `from scipy import stats` reads the package's attribute: set, it never touches the module's __spec__, which
    # on Python 3.11 would load it at once.
    scipy.stats = module


@cache
def _gx() -> tuple[Any, Any, Any, Any]:
    """GX imported once per process, with an ephemeral context whose progress bars are off."""
    import logging

    _defer_scipy_stats()
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch_definition = (context.data_sources.add_pandas("tokenledger").add_dataframe_asset("rule_counts")
                        .add_batch_definition_whole_dataframe("counts"))
    return gx, gxe, context, batch_definition


@cache
def _suite(severities: tuple[str, ...]) -> Any:
    """The contract as GX judges it: in each severity's column, every rule's count of failing rows is 0."""
    gx, gxe, _, _ = _gx()
    suite = gx.ExpectationSuite(name="contract rule counts: " + ", ".join(severities))
    for severity in severities:
        suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(
            column=severity, min_value=0, max_value=0, severity=severity,
            description=f"no row breaks a {severity} rule of the contract"))
    return suite


# The frame's column holding every rule's count, whatever its severity (the first question `judge` asks).
_ANY = "any_severity"


@cache
def _any_rule_suite() -> Any:
    """The first question asked of a table's counts: does any rule, of either severity, have a failing row?"""
    gx, gxe, _, _ = _gx()
    suite = gx.ExpectationSuite(name="contract rule counts: any rule")
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(
        column=_ANY, min_value=0, max_value=0, description="no row breaks a rule of the contract"))
    return suite


def judge(counts: list[Finding]) -> list[Finding]:
    """The broken rules among `counts`, as the GX suite judges them: a frame with one row per rule and its count
    of failing rows in its severity's column (missing in the other), on which the suite's expectations run."""
    import pandas as pd

    severities = tuple(s for s in SEVERITIES if any(c.severity == s for c in counts))
    if not severities:
        return []
    frame = pd.DataFrame({"rule": [c.rule for c in counts], _ANY: [float(c.unexpected) for c in counts]} | {
        s: [float(c.unexpected) if c.severity == s else math.nan for c in counts] for s in severities})
    _, _, _, batch_definition = _gx()
    # Whether any rule is broken, first, by one expectation over every rule's count: GX's cost is per expectation
    # (about 7 ms each), and most tables break none. The complete result of the suite, by severity, which names the
    # broken rules, only when one is.
    if batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
            _any_rule_suite(), result_format={"result_format": "BOOLEAN_ONLY"}).success:
        return []
    outcome = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(
        _suite(severities), result_format={"result_format": "COMPLETE"})
    broken: set[int] = set()
    findings: list[Finding] = []
    for item in outcome.results:
        severity = item.expectation_config.kwargs["column"]
        if item.exception_info and item.exception_info.get("raised_exception"):
            findings.append(Finding("GX suite", severity, 1, 0, [item.exception_info.get("exception_message")]))
        elif not item.success:
            broken |= {int(i) for i in item.result.get("unexpected_index_list") or []}
    return [counts[i] for i in sorted(broken)] + findings
