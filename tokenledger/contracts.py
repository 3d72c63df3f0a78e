"""Data contracts (ODCS v3 YAML under data_contracts/) and the SQL derived from them.

The contracts are the only place a column's type, nullability, range, allowed values or a cross-column rule is
written. This module reads them and derives:

- the typing of raw text values (`typed_select`), with strict integers (DuckDB's cast would round "12.5");
- the quarantine reason of every row (`violation_reasons`): one readable phrase per broken rule;
- set-level rules (`Table.set_rules`) that are whole queries over a table (uniqueness across rows, tiling).

Supported rule forms, all standard ODCS v3:
- column: `required`, `logicalTypeOptions` (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
  `pattern`), a `library` quality rule with metric `invalidValues` and `validValues`, and the custom property
  `requiredWhen` (a condition on other columns, valid in both SQL and pandas);
- table: `custom` rules with engine `great-expectations` whose implementation is an expectation
  (`expect_column_pair_values_a_to_be_greater_than_b`), and `sql` rules whose query counts violating rows.
  A query of the form `SELECT COUNT(*) FROM <table> WHERE <condition>` is a row rule (each row is judged);
  any other query is a set rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tokenledger.paths import CONTRACTS_DIR

_ROW_RULE_QUERY = re.compile(r"^\s*SELECT\s+COUNT\(\*\)\s+FROM\s+(\w+)\s+WHERE\s+(?P<condition>.+?)\s*;?\s*$",
                             re.IGNORECASE | re.DOTALL)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Column:
    name: str
    logical_type: str
    physical_type: str
    required: bool = False
    required_when: str | None = None
    unique: bool = False
    primary_key: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    pattern: str | None = None
    valid_values: tuple[str, ...] | None = None
    description: str = ""


@dataclass(frozen=True)
class RowRule:
    """A rule judged row by row. `violation` is a SQL condition over typed columns, true when the row breaks it."""

    name: str
    description: str
    severity: str
    violation: str
    columns: tuple[str, ...]
    expectation: dict[str, Any] | None = None


@dataclass(frozen=True)
class SetRule:
    """A rule over a whole table: `query` returns a count of violations that must be 0."""

    name: str
    description: str
    severity: str
    query: str


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]
    row_rules: tuple[RowRule, ...] = ()
    set_rules: tuple[SetRule, ...] = ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")

    @property
    def primary_key(self) -> list[str]:
        return [c.name for c in self.columns if c.primary_key]


@dataclass(frozen=True)
class Contract:
    id: str
    version: str
    path: Path
    tables: dict[str, Table] = field(default_factory=dict)

    def table(self, name: str | None = None) -> Table:
        if name is None:
            if len(self.tables) != 1:
                raise KeyError(f"contract {self.id} has several tables; name one of {sorted(self.tables)}")
            return next(iter(self.tables.values()))
        return self.tables[name]


def contract_path(contract_id: str) -> Path:
    return CONTRACTS_DIR / f"{contract_id}.odcs.yaml"


@cache
def load_contract(contract_id: str) -> Contract:
    """Read `data_contracts/<contract_id>.odcs.yaml` into tables, columns and rules."""
    path = contract_path(contract_id)
    doc = yaml.safe_load(path.read_text())
    tables = {}
    for obj in doc.get("schema", []):
        tables[obj["name"]] = _parse_table(obj, path)
    return Contract(id=doc["id"], version=str(doc["version"]), path=path, tables=tables)


def _parse_table(obj: dict[str, Any], path: Path) -> Table:
    columns = tuple(_parse_column(p) for p in obj.get("properties", []))
    names = {c.name for c in columns}
    row_rules: list[RowRule] = []
    set_rules: list[SetRule] = []
    for rule in obj.get("quality", []) or []:
        severity = rule.get("severity", "error")
        description = rule.get("description", rule.get("name", ""))
        if rule.get("type") == "custom" and rule.get("engine") == "great-expectations":
            row_rules.append(_expectation_rule(rule, severity, description, names, path))
        elif rule.get("type") == "sql":
            query = " ".join(rule["query"].split())
            match = _ROW_RULE_QUERY.match(query)
            if match and match.group(1) == obj["name"]:
                condition = match.group("condition")
                used = tuple(n for n in names if re.search(rf"\b{n}\b", condition))
                row_rules.append(RowRule(rule["name"], description, severity, f"({condition})", used))
            else:
                set_rules.append(SetRule(rule["name"], description, severity, query))
        else:
            raise ValueError(f"{path}: quality rule {rule.get('name')!r} of a kind tokenledger cannot derive")
    return Table(obj["name"], obj.get("description", ""), columns, tuple(row_rules), tuple(set_rules))


def _parse_column(prop: dict[str, Any]) -> Column:
    name = prop["name"]
    if not _IDENTIFIER.match(name):
        raise ValueError(f"column name {name!r} is not a plain identifier")
    options = prop.get("logicalTypeOptions") or {}
    custom = {c["property"]: c["value"] for c in prop.get("customProperties") or []}
    valid_values = None
    for rule in prop.get("quality") or []:
        if rule.get("metric") == "invalidValues":
            valid_values = tuple(str(v) for v in rule["arguments"]["validValues"])
    return Column(
        name=name,
        logical_type=prop.get("logicalType", "string"),
        physical_type=prop.get("physicalType", "VARCHAR"),
        required=bool(prop.get("required", False)),
        required_when=custom.get("requiredWhen"),
        unique=bool(prop.get("unique", False)),
        primary_key=bool(prop.get("primaryKey", False)),
        minimum=options.get("minimum"),
        maximum=options.get("maximum"),
        exclusive_minimum=options.get("exclusiveMinimum"),
        exclusive_maximum=options.get("exclusiveMaximum"),
        pattern=options.get("pattern"),
        valid_values=valid_values,
        description=" ".join(str(prop.get("description", "")).split()),
    )


def _expectation_rule(rule: dict[str, Any], severity: str, description: str, names: set[str],
                      path: Path) -> RowRule:
    impl = rule["implementation"]
    kind = impl["expectation_type"]
    kwargs = impl.get("kwargs", {})
    if kind != "expect_column_pair_values_a_to_be_greater_than_b":
        raise ValueError(f"{path}: rule {rule['name']!r} uses {kind}, which tokenledger cannot turn into SQL")
    a, b = kwargs["column_A"], kwargs["column_B"]
    for col in (a, b):
        if col not in names:
            raise ValueError(f"{path}: rule {rule['name']!r} names unknown column {col!r}")
    op = "<" if kwargs.get("or_equal") else "<="
    # Like GX with ignore_row_if="either_value_is_missing": a missing value is judged by its own column's rules.
    violation = f"({a} IS NOT NULL AND {b} IS NOT NULL AND {a} {op} {b})"
    return RowRule(rule["name"], description, severity, violation, (a, b), expectation=dict(impl))


def sql_literal(value: Any) -> str:
    """A SQL literal for a constant written in a contract (never for user data, which is bound as a parameter)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def typed_expr(col: Column, text: str) -> str:
    """SQL that turns the text value `text` into the column's type, or NULL when it is missing or malformed."""
    blank = f"({text} IS NULL OR trim({text}) = '')"
    physical = col.physical_type.upper()
    if physical in {"BIGINT", "INTEGER"}:
        as_double = f"try_cast({text} AS DOUBLE)"
        value = f"try_cast({as_double} AS {physical})"
        return f"(CASE WHEN NOT {blank} AND {as_double} = trunc({as_double}) THEN {value} END)"
    if physical == "DOUBLE":
        return f"(CASE WHEN NOT {blank} AND isfinite(try_cast({text} AS DOUBLE)) THEN try_cast({text} AS DOUBLE) END)"
    if physical == "JSON":
        return (f"(CASE WHEN NOT {blank} AND json_valid({text}) AND json_type({text}) = 'OBJECT' "
                f"THEN {text}::JSON END)")
    if physical.endswith("[]"):
        element = physical[:-2]
        return (f"(CASE WHEN NOT {blank} AND json_valid({text}) AND json_type({text}) = 'ARRAY' "
                f"THEN try_cast(from_json({text}, '[\"{element}\"]') AS {physical}) END)")
    if physical == "VARCHAR":
        return f"(CASE WHEN NOT {blank} THEN {text} END)"
    return f"(CASE WHEN NOT {blank} THEN try_cast({text} AS {physical}) END)"


def typed_select(table: Table, text_columns: dict[str, str] | None = None) -> list[str]:
    """Select-list items typing every column of `table` from its text column (default `<name>__text`)."""
    text_columns = text_columns or {}
    return [f"{typed_expr(c, text_columns.get(c.name, f'{c.name}__text'))} AS {c.name}" for c in table.columns]


def _column_reasons(col: Column, text: str) -> str:
    """One SQL CASE giving the first broken rule of a column as a phrase naming field, rule and value, or NULL."""
    shown = f"left({text}, 80)"
    n = col.name
    blank = f"({text} IS NULL OR trim({text}) = '')"
    branches = []
    if col.required:
        branches.append(f"WHEN {blank} THEN {sql_literal(f'{n}: required but missing')}")
    else:
        branches.append(f"WHEN {blank} THEN NULL")
    branches.append(f"WHEN {n} IS NULL THEN format('{n}: {{}} is not a valid {col.logical_type}', {shown})")
    bounds = [
        (col.minimum, "<", "below the minimum"),
        (col.exclusive_minimum, "<=", "not above"),
        (col.maximum, ">", "above the maximum"),
        (col.exclusive_maximum, ">=", "not below"),
    ]
    for bound, op, phrase in bounds:
        if bound is not None:
            branches.append(f"WHEN {n} {op} {sql_literal(bound)} "
                            f"THEN format('{n}: {{}} is {phrase} {bound}', {shown})")
    if col.pattern:
        branches.append(f"WHEN NOT regexp_full_match({n}, {sql_literal(col.pattern)}) "
                        f"THEN format('{n}: {{}} does not match {{}}', {shown}, {sql_literal(col.pattern)})")
    if col.valid_values:
        values = ", ".join(sql_literal(v) for v in col.valid_values)
        allowed = ", ".join(col.valid_values)
        branches.append(f"WHEN {n} NOT IN ({values}) "
                        f"THEN format('{n}: {{}} is not one of {allowed}', {shown})")
    reason = "CASE " + " ".join(branches) + " END"
    if col.required_when:
        when = col.required_when
        reason = (f"coalesce({reason}, CASE WHEN {n} IS NULL AND ({when}) "
                  f"THEN {sql_literal(f'{n}: required when {when}')} END)")
    return reason


def _rule_reason(rule: RowRule) -> str:
    values = ", ".join(f"'{c}=' || coalesce({c}::VARCHAR, 'null')" for c in rule.columns)
    shown = f"concat_ws(', ', {values})" if rule.columns else "''"
    return (f"CASE WHEN coalesce({rule.violation}, false) "
            f"THEN format('{rule.name}: {{}} ({{}})', {sql_literal(rule.description.rstrip('.'))}, {shown}) END")


def violation_reasons(table: Table, text_columns: dict[str, str] | None = None,
                      severities: tuple[str, ...] = ("error",)) -> str:
    """SQL for one VARCHAR: every broken rule of the row joined by '; ', NULL when the row is valid.

    Evaluated over a relation holding both the typed columns (by name) and their text (`<name>__text`).
    """
    text_columns = text_columns or {}
    parts = [_column_reasons(c, text_columns.get(c.name, f"{c.name}__text")) for c in table.columns]
    parts += [_rule_reason(r) for r in table.row_rules if r.severity in severities]
    return "nullif(concat_ws('; ', " + ", ".join(parts) + "), '')"


def struct_spec(table: Table) -> str:
    """The json_transform structure that reads every contract column of a JSON object as text."""
    return "{" + ", ".join(f'"{c.name}": "VARCHAR"' for c in table.columns) + "}"


def validation_query(table: Table, text_relation: str, passthrough: list[str],
                     gate: tuple[str, str] | None = None) -> str:
    """Type and judge every row of `text_relation`, which holds `<name>__text` for each contract column.

    Returns `passthrough` columns, the typed contract columns, `raw` (the row's contract fields as JSON text:
    nothing outside the contract is ever kept) and `reason` (NULL for a valid row). `gate` is an optional
    (boolean column, reason) checked first, e.g. that a line is a JSON object at all.
    """
    reason = violation_reasons(table)
    raw_fields = ", ".join(f"{sql_literal(c)}, {c}__text" for c in table.column_names)
    raw = f"json_object({raw_fields})::VARCHAR"
    if gate:
        column, message = gate
        reason = f"CASE WHEN NOT {column} THEN {sql_literal(message)} ELSE {reason} END"
        raw = f"CASE WHEN {column} THEN {raw} END"
    keep = ", ".join(passthrough)
    return (
        f"SELECT {keep}, {', '.join(table.column_names)}, {raw} AS raw, {reason} AS reason "
        f"FROM (SELECT *, {', '.join(typed_select(table))} FROM ({text_relation}))"
    )
