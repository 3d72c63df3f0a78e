"""Data contracts (ODCS v3 YAML under data_contracts/) and the SQL derived from them.

The contracts are the only place a column's type, nullability, range, allowed values or a cross-column rule is
written. This module reads them and derives:

- the typing of raw text values (`typed_select`), with strict integers (DuckDB's cast would round "12.5");
- the quarantine reason of every row (`violation_reasons`): one readable phrase per broken rule;
- set-level rules (`Table.set_rules`) that are whole queries over a table (uniqueness across rows, tiling).

Supported rule forms, all standard ODCS v3:
- column: `required`, `logicalTypeOptions` (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
  `pattern`, `maxLength`), a `library` quality rule with metric `invalidValues` and `validValues`, and the custom
  properties `requiredWhen` (a condition on other columns, valid in both SQL and pandas), `acceptNumbers` (a
  string column that takes a JSON number as its text, e.g. numeric ids), `noRawKeys` (a label that must never
  hold a credential: a value that looks like an API key is rejected and never stored, see `KEY_PATTERN`),
  `default` (the text a missing value is read as), and for the contract of another format's records
  (tokenledger/ingest/adapters/): `path` (the JSON path, or list of paths tried in order, the field is read from) and
  `epoch` (`seconds` or `nanoseconds`: a timestamp written as a number since the Unix epoch); `zoneless: utc` on a
  timestamp whose format defines a time written without an offset as UTC (elsewhere such a time is still read as
  UTC, but counted: `zoneless_fields`);
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

from tokenledger.packaged import contract_file

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
    max_length: int | None = None
    accept_numbers: bool = False
    no_raw_keys: bool = False
    default: str | None = None
    paths: tuple[str, ...] = ()
    epoch: str | None = None
    zoneless: str | None = None
    description: str = ""

    @property
    def is_integer(self) -> bool:
        return self.physical_type.upper() in {"BIGINT", "INTEGER"}

    @property
    def is_list(self) -> bool:
        """A list column (`<ELEMENT>[]`): its value is a JSON array, or a Parquet list."""
        return self.physical_type.endswith("[]")

    @property
    def element_type(self) -> str:
        return self.physical_type[:-2].upper()


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
    # The contract's own `description` (purpose, usage, limitations), each folded to one line.
    description: dict[str, str] = field(default_factory=dict)

    def table(self, name: str | None = None) -> Table:
        if name is None:
            if len(self.tables) != 1:
                raise KeyError(f"contract {self.id} has several tables; name one of {sorted(self.tables)}")
            return next(iter(self.tables.values()))
        return self.tables[name]


def contract_path(contract_id: str) -> Path:
    return contract_file(contract_id)


# libyaml's safe loader when PyYAML has it: every process that loads the definitions reads the contracts, and the
# pure-Python one took 0.74 s for the 32 files against 0.08 s (the same documents; contracts are the project's own
# files, never a user's).
_CONTRACT_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def load_contract(contract_id: str) -> Contract:
    """Read `data_contracts/<contract_id>.odcs.yaml` into tables, columns and rules."""
    path = contract_path(contract_id)
    doc = yaml.load(path.read_text(), Loader=_CONTRACT_LOADER)  # noqa: S506 - a safe loader, on the project's files
    tables = {}
    for obj in doc.get("schema", []):
        tables[obj["name"]] = _parse_table(obj, path)
    about = doc.get("description") or {}
    about = {k: " ".join(str(v).split()) for k, v in about.items()} if isinstance(about, dict) else {
        "purpose": " ".join(str(about).split())}
    return Contract(id=doc["id"], version=str(doc["version"]), path=path, tables=tables, description=about)


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
                used = tuple(c.name for c in columns if re.search(rf"\b{c.name}\b", condition))
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
        max_length=options.get("maxLength"),
        accept_numbers=bool(custom.get("acceptNumbers", False)),
        no_raw_keys=bool(custom.get("noRawKeys", False)),
        default=None if custom.get("default") is None else _default_text(custom["default"]),
        paths=tuple(custom["path"]) if isinstance(custom.get("path"), list) else (
            (custom["path"],) if custom.get("path") else ()),
        epoch=custom.get("epoch"),
        zoneless=custom.get("zoneless"),
        description=" ".join(str(prop.get("description", "")).split()),
    )


def _default_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


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


# What a source says a value is, where it says (`<name>__kind` in a text relation): a JSON value's type or a Parquet
# column's. A relation without kinds (config files, CSV) carries text only, judged as `string`.
KIND_INTEGER, KIND_FLOAT = "integer", "float"
NON_SCALAR_KINDS = ("object", "array", "boolean", "binary")
JSON_KIND = ("CASE json_type({v}) WHEN 'VARCHAR' THEN 'string' WHEN 'BIGINT' THEN 'integer' WHEN 'UBIGINT' "
             "THEN 'integer' WHEN 'DOUBLE' THEN 'float' WHEN 'OBJECT' THEN 'object' WHEN 'ARRAY' THEN 'array' "
             "WHEN 'BOOLEAN' THEN 'boolean' END")

# Credentials that a `noRawKeys` label must never hold (the contract promises raw keys are never stored). One RE2
# scan per value, after a length test: no key is shorter than 20 characters. OpenAI (`sk-`, `sk-proj-`) and
# Anthropic (`sk-ant-`) keys, AWS access key ids, Google API keys, GitHub, Hugging Face, Slack and GitLab tokens,
# JWTs and bearer headers.
KEY_PATTERN = (r"sk-[A-Za-z0-9_\-]*[0-9][A-Za-z0-9_\-]*|(AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}"
               r"|gh[pousr]_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30}|xox[abposr]-[0-9A-Za-z\-]{10}|glpat-[0-9A-Za-z_\-]{20}"
               r"|eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}|[Bb]earer\s+\S{16}")
_KEY_MIN_LENGTH = 20
_PLAIN_INTEGER = r"\s*[+-]?[0-9]+\s*"
_JSON_NUMBER = r"\s*-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?\s*"
# Beyond 2^53 a DOUBLE no longer holds every integer: a token count written as 1e17 or 9007199254740993.0 could
# be off by one, so such values are refused rather than rounded (plain digits are read exactly up to 2^63 - 1).
_EXACT_DOUBLE_LIMIT = 9007199254740992


def _from_double(text: str, physical: str) -> str:
    value = f"try_cast({text} AS DOUBLE)"
    return (f"CASE WHEN isfinite({value}) AND {value} = trunc({value}) AND abs({value}) <= {_EXACT_DOUBLE_LIMIT} "
            f"THEN try_cast({value} AS {physical}) END")


def _not_scalar(col: Column) -> tuple[str, ...]:
    """The value kinds that are never a value of the column: objects, arrays, binary, and booleans but in a
    boolean column; for a list column, anything but an array."""
    if col.is_list:
        return ("object", "boolean", "binary", "string", KIND_INTEGER, KIND_FLOAT)
    return NON_SCALAR_KINDS if col.physical_type.upper() != "BOOLEAN" else ("object", "array", "binary")


def parsed_list(col: Column, text: str, kind: str | None = None) -> str:
    """The JSON array `text` of a list column read as the column's type, NULL when it is not a JSON array: the
    one parse of the value, shared by the typing and its checks (`typed_select(..., parsed=True)` reads it from
    `<name>__list`)."""
    blank = f"({text} IS NULL OR ltrim({text}) = '')"
    array = f"NOT {blank} AND json_valid({text}) AND json_type({text}) = 'ARRAY'"
    if kind is not None:
        # A value's kind is what its reader saw (a JSON array, a Parquet list): an array kind is a JSON array
        # already, so it is not parsed twice more to be told so. Without a kind (a CSV cell), the text decides.
        array = f"({kind} = 'array' OR ({kind} IS NULL AND {array}))"
    physical = col.physical_type.upper()
    return f"(CASE WHEN {array} THEN try_cast(from_json({text}, '[\"{physical[:-2]}\"]') AS {physical}) END)"


def _integer_list(text: str, value: str) -> str:
    """A JSON array of integers (`value`, its parse as BIGINT[] or INTEGER[]), exactly: every element a JSON
    integer within the element type (a fraction, exponent, string, boolean, null or nested array makes the whole
    value NULL, never a rounded or partial list).

    from_json rounds 1.5, reads "12" and true as numbers, and gives NULL for null, a nested value or an integer
    beyond the type. In a valid JSON array every fraction or exponent holds `.`, `e` or `E`, every string `"`,
    true and false an `e`: without those four characters and without a NULL element, every element is an integer
    written as one (four byte searches, ~10x cheaper than a pattern over the text)."""
    integers = " OR ".join(f"contains({text}, '{c}')" for c in ('.', 'e', 'E', '"'))
    return f"CASE WHEN NOT ({integers}) AND list_count({value}) = len({value}) THEN {value} END"


def typed_expr(col: Column, text: str, kind: str | None = None, parsed: str | None = None) -> str:
    """SQL that turns the text value `text` into the column's type, or NULL when it is missing or malformed.

    Integers are exact: plain digits are cast directly (never through DOUBLE, which rounds past 2^53); a JSON
    number with a fraction or exponent is accepted only when it is whole and at most 2^53. A value whose kind is
    object, array, boolean or binary is never a scalar of the contract; a number is text only for a column that
    `acceptNumbers`.

    Without `kind` (a typed or text source) the tests of the value's kind are left out, as in `raw_text`: each
    tested NULL, so the text alone decided already.
    """
    blank = f"({text} IS NULL OR ltrim({text}) = '')"  # ltrim: the same test, 5-10x cheaper than trim
    physical = col.physical_type.upper()
    # Without a kind, coalesce(NULL NOT IN ..., true) was always true: the test is left out.
    scalar = f"coalesce({kind} NOT IN {_not_scalar(col)!r}, true)" if kind is not None else "true"
    not_scalar = f" OR NOT {scalar}" if kind is not None else ""
    if col.is_integer:
        by_kind = (f"WHEN {kind} = '{KIND_INTEGER}' THEN try_cast({text} AS {physical}) "
                   f"WHEN {kind} = '{KIND_FLOAT}' THEN {_from_double(text, physical)} ") if kind is not None else ""
        return (f"(CASE WHEN {blank}{not_scalar} THEN NULL {by_kind}"
                f"WHEN regexp_full_match({text}, '{_PLAIN_INTEGER}') THEN try_cast(trim({text}) AS {physical}) "
                f"WHEN regexp_full_match({text}, '{_JSON_NUMBER}') THEN {_from_double(text, physical)} END)")
    if physical == "DOUBLE":
        value = f"try_cast({text} AS DOUBLE)"
        numeric = (f"({kind} IN ('{KIND_INTEGER}', '{KIND_FLOAT}') OR regexp_full_match({text}, '{_JSON_NUMBER}'))"
                   if kind is not None else f"regexp_full_match({text}, '{_JSON_NUMBER}')")
        return f"(CASE WHEN NOT {blank} AND {scalar} AND {numeric} AND isfinite({value}) THEN {value} END)"
    if physical == "JSON":
        return (f"(CASE WHEN NOT {blank} AND json_valid({text}) AND json_type({text}) = 'OBJECT' "
                f"THEN {text}::JSON END)")
    if physical.endswith("[]"):
        value = parsed or parsed_list(col, text, kind)
        if physical[:-2] in ("BIGINT", "INTEGER"):
            return f"({_integer_list(text, value)})"
        return value
    if physical == "VARCHAR":
        numbers_ok = ("true" if col.accept_numbers or kind is None
                      else f"coalesce({kind} NOT IN ('{KIND_INTEGER}', '{KIND_FLOAT}'), true)")
        return f"(CASE WHEN NOT {blank} AND {scalar} AND {numbers_ok} THEN {text} END)"
    if physical == "TIMESTAMPTZ" and col.epoch:
        # A number since the epoch (as a JSON number, or one written in a string); anything else as ISO 8601 text.
        # Only a JSON number is a number (DuckDB's cast reads "1_000" and "inf"), and one beyond the timestamps a
        # BIGINT of microseconds holds is no timestamp (a cast error would stop the file).
        scale = {"seconds": 1, "milliseconds": 1e3, "nanoseconds": 1e9}[col.epoch]
        number = f"try_cast({text} AS DOUBLE)"
        micros = f"try_cast({number} / {scale} * 1e6 AS BIGINT)"
        return (f"(CASE WHEN {blank}{not_scalar} THEN NULL WHEN regexp_full_match({text}, '{_JSON_NUMBER}') "
                f"THEN CASE WHEN isfinite({number}) THEN make_timestamptz({micros}) END "
                f"ELSE try_cast({text} AS TIMESTAMPTZ) END)")
    return f"(CASE WHEN NOT {blank} AND {scalar} THEN try_cast({text} AS {physical}) END)"


def text_of(col: Column, text_columns: dict[str, str] | None = None) -> str:
    """The SQL text of a column in a text relation: `<name>__text`, or its contract `default` when missing."""
    text = (text_columns or {}).get(col.name, f"{col.name}__text")
    return text if col.default is None else f"coalesce({text}, {sql_literal(col.default)})"


def typed_select(table: Table, text_columns: dict[str, str] | None = None, kinds: bool = False,
                 parsed: bool = False) -> list[str]:
    """Select-list items typing every column of `table` from its text column (default `<name>__text`) and, when
    the relation reports them, its value kind (`<name>__kind`). With `parsed`, a list column's parse is read
    from `<name>__list` (`parse_select`) instead of being written into the expression, where DuckDB would
    evaluate it once per use."""
    items = []
    for c in table.columns:
        kind, parse = f"{c.name}__kind" if kinds else None, f"{c.name}__list" if parsed and c.is_list else None
        items.append(f"{typed_expr(c, text_of(c, text_columns), kind, parse)} AS {c.name}")
    return items


def parse_select(table: Table, text_columns: dict[str, str] | None = None, kinds: bool = False) -> list[str]:
    """Select-list items `<name>__list` parsing each list column once (`parsed_list`), for `typed_select(...,
    parsed=True)` over the result."""
    return [f"{parsed_list(c, text_of(c, text_columns), f'{c.name}__kind' if kinds else None)} AS {c.name}__list"
            for c in table.columns if c.is_list]


def _key_like(text: str) -> str:
    return f"(length({text}) >= {_KEY_MIN_LENGTH} AND regexp_matches({text}, {sql_literal(KEY_PATTERN)}))"


def raw_text(col: Column, text: str, kind: str | None = None) -> str:
    """The text of a value as the quarantine may keep it: never a JSON object or array (prompt text could ride in
    one) but an array of numbers in a list column, never a value that looks like a key, and at most 80 characters
    of a value beyond its maximum length.

    Without `kind` (text read from a typed or text source, never JSON) the branches on the value's kind are left
    out: each would test NULL and never be taken, and DuckDB binds every branch of every statement it plans."""
    parts = []
    if kind is not None:
        if col.is_list and col.element_type in ("BIGINT", "INTEGER"):
            # Digits, commas and signs cannot carry prompt text; 80 characters say enough of a long list.
            parts.append(f"WHEN {kind} = 'array' AND regexp_full_match({text}, '\\[[0-9eE.,+\\- \\t\\r\\n]*\\]') "
                         f"THEN CASE WHEN length({text}) > 80 THEN left({text}, 80) || format('... [{{}} characters]', "
                         f"length({text})) ELSE {text} END")
        parts += [f"WHEN {kind} IN ('object', 'array') THEN format('[a JSON {{}} was here, not kept]', {kind})",
                  f"WHEN {kind} = 'binary' THEN '[binary data, not kept]'"]
    if col.no_raw_keys:
        parts.append(f"WHEN {_key_like(text)} THEN '[looks like an API key, not kept]'")
    if col.max_length is not None:
        parts.append(f"WHEN length({text}) > {int(col.max_length)} "
                     f"THEN left({text}, 80) || format('... [{{}} characters, not kept]', length({text}))")
    return f"(CASE {' '.join(parts)} ELSE {text} END)" if parts else f"({text})"


def unknown_fields(table: Table, keys: str) -> str:
    """SQL for the names in the VARCHAR[] `keys` (a record's field names) that are not columns of the contract."""
    names = ", ".join(sql_literal(n) for n in table.column_names)
    return f"list_filter({keys}, lambda k: k NOT IN ({names}))"


# What a timestamp column takes, said with an example in the reason of a value it cannot read.
TIMESTAMP_EXAMPLE = "2026-11-16T10:00:00Z"
_EPOCH_EXAMPLE = {"seconds": "1794823200", "milliseconds": "1794823200000", "nanoseconds": "1794823200000000000"}


def _accepted(col: Column) -> str:
    """' (what the column accepts, e.g. ...)' for a timestamp column, '' for any other."""
    if col.physical_type.upper() != "TIMESTAMPTZ":
        return ""
    said = f" (ISO 8601, with its offset, e.g. {TIMESTAMP_EXAMPLE}"
    if col.epoch:
        said += f", or {col.epoch} since the Unix epoch, e.g. {_EPOCH_EXAMPLE[col.epoch]}"
    return said + ")"


def _did_you_mean(name: str, unknown: str) -> str:
    """SQL for ', and the row has an unknown field X (did you mean <name>?)', X being the field of the VARCHAR[]
    `unknown` (the row's fields the contract does not have) closest to `name` within a misspelling (a
    Damerau-Levenshtein distance, case aside, of 1 for names up to 7 characters, 2 beyond); '' when none is."""
    limit = 1 if len(name) < 8 else 2
    closest = (f"list_filter(list_sort(list_transform({unknown}, lambda k: "
               f"{{'d': damerau_levenshtein(lower(k), {sql_literal(name)}), 'k': k}})), "
               f"lambda c: c.d <= {limit})[1].k")
    return (f"coalesce(', and the row has an unknown field ' || left({closest}, 80) || "
            f"{sql_literal(f' (did you mean {name}?)')}, '')")


def _column_reasons(col: Column, text: str, kind: str | None = None, label: str | None = None,
                    unknown: str | None = None) -> str:
    """One SQL CASE giving the first broken rule of a column as a phrase naming field, rule and value, or NULL.

    The value shown is the kept form (`raw_text`), so a reason never repeats what the quarantine may not keep.
    `label` names the field in the reason when it came from another format's field (an adapter's source field).
    Without `kind`, the branches on the value's kind are left out, as in `raw_text`. `unknown`, a VARCHAR[] of
    the row's fields the contract does not have, names a misspelling of a required field that is missing.
    """
    shown = f"left({raw_text(col, text, kind)}, 80)"
    n = col.name
    f = (label or n).replace("'", "''")
    blank = f"({text} IS NULL OR ltrim({text}) = '')"
    branches = []
    if kind is not None:
        branches.append(f"WHEN {kind} IN {_not_scalar(col)!r} "
                        f"THEN format('{f}: a value of type {{}} is not a valid {col.logical_type}', {kind})")
    if col.required:
        missing = sql_literal(f'{label or n}: required but missing')
        if unknown is not None:
            missing = f"{missing} || {_did_you_mean(n, unknown)}"
        branches.append(f"WHEN {blank} THEN {missing}")
    else:
        branches.append(f"WHEN {blank} THEN NULL")
    if col.physical_type.upper() == "VARCHAR" and not col.accept_numbers and kind is not None:
        branches.append(f"WHEN {kind} IN ('{KIND_INTEGER}', '{KIND_FLOAT}') "
                        f"THEN format('{f}: the number {{}} is not text (write it as a JSON string)', {shown})")
    if col.no_raw_keys:
        branches.append(f"WHEN {_key_like(text)} THEN '{f}: looks like a raw API key, which is never stored; "
                        "log a key alias or team name instead'")
    if col.max_length is not None:
        branches.append(f"WHEN length({text}) > {int(col.max_length)} THEN format('{f}: {{}} characters, above "
                        f"the maximum length {int(col.max_length)}', length({text}))")
    if col.is_integer:
        branches.append(f"WHEN {n} IS NULL AND regexp_full_match({text}, '{_JSON_NUMBER}') "
                        f"AND try_cast({text} AS DOUBLE) = trunc(try_cast({text} AS DOUBLE)) "
                        f"THEN format('{f}: {{}} is beyond the integers tokenledger reads exactly (up to 2^63 - 1 "
                        f"written as digits, 2^53 with a fraction or exponent)', {shown})")
    if col.is_list:
        element = "integers" if col.element_type in ("BIGINT", "INTEGER") else col.element_type.lower()
        bound = " (each within signed 64 bits)" if col.element_type == "BIGINT" else ""
        branches.append(f"WHEN {n} IS NULL THEN format('{f}: {{}} is not a JSON array of {element}{bound}', "
                        f"{shown})")
    branches.append(f"WHEN {n} IS NULL THEN format('{f}: {{}} is not a valid {col.logical_type}{_accepted(col)}', "
                    f"{shown})")
    bounds = [
        (col.minimum, "<", "below the minimum"),
        (col.exclusive_minimum, "<=", "not above"),
        (col.maximum, ">", "above the maximum"),
        (col.exclusive_maximum, ">=", "not below"),
    ]
    for bound, op, phrase in bounds:
        if bound is not None:
            branches.append(f"WHEN {n} {op} {sql_literal(bound)} "
                            f"THEN format('{f}: {{}} is {phrase} {bound}', {shown})")
    if col.pattern:
        branches.append(f"WHEN NOT regexp_full_match({n}, {sql_literal(col.pattern)}) "
                        f"THEN format('{f}: {{}} does not match {{}}', {shown}, {sql_literal(col.pattern)})")
    if col.valid_values:
        values = ", ".join(sql_literal(v) for v in col.valid_values)
        allowed = ", ".join(col.valid_values)
        branches.append(f"WHEN {n} NOT IN ({values}) "
                        f"THEN format('{f}: {{}} is not one of {allowed}', {shown})")
    reason = "CASE " + " ".join(branches) + " END"
    if col.required_when:
        when = col.required_when
        required = sql_literal(f'{label or n}: required when {when}')
        if unknown is not None:
            required = f"{required} || {_did_you_mean(n, unknown)}"
        reason = f"coalesce({reason}, CASE WHEN {n} IS NULL AND ({when}) THEN {required} END)"
    return reason


def _column_clear(col: Column, text: str, kind: str | None = None) -> str:
    """A SQL condition that, where true, makes `_column_reasons` NULL for the column: its value read (the typed
    column not NULL) within every rule that can still be broken then, or no value at all where none is required.

    Cheaper than the reasons (a few tests against the typed value, no phrase, no kind but for a JSON column), so
    `violation_reasons` builds the phrases only for the rows it does not clear. It follows `typed_expr`: a value it
    types is never blank, and of a scalar kind and a number only where the column takes one, except a JSON column's
    value, whose kind is tested here."""
    n = col.name
    tests = [f"{n} IS NOT NULL"]
    if kind is not None and col.physical_type.upper() == "JSON":
        tests.append(f"coalesce({kind} NOT IN {_not_scalar(col)!r}, true)")
    if col.no_raw_keys:
        tests.append(f"NOT {_key_like(text)}")
    if col.max_length is not None:
        tests.append(f"length({text}) <= {int(col.max_length)}")
    for bound, op in ((col.minimum, "<"), (col.exclusive_minimum, "<="), (col.maximum, ">"),
                      (col.exclusive_maximum, ">=")):
        if bound is not None:
            tests.append(f"NOT ({n} {op} {sql_literal(bound)})")
    if col.pattern:
        tests.append(f"regexp_full_match({n}, {sql_literal(col.pattern)})")
    if col.valid_values:
        tests.append(f"{n} IN ({', '.join(sql_literal(v) for v in col.valid_values)})")
    present = " AND ".join(tests)
    if col.required or col.default is not None:
        return f"({present})"
    absent = f"{text} IS NULL" + (f" AND {kind} IS NULL" if kind is not None else "")
    if col.required_when:
        absent += f" AND NOT coalesce(({col.required_when}), false)"
    return f"(({present}) OR ({absent}))"


def _rule_reason(rule: RowRule, labels: dict[str, str] | None = None) -> str:
    labels = labels or {}
    values = ", ".join(f"'{labels.get(c, c).replace(chr(39), chr(39) * 2)}=' || coalesce({c}::VARCHAR, 'null')"
                       for c in rule.columns)
    shown = f"concat_ws(', ', {values})" if rule.columns else "''"
    return (f"CASE WHEN coalesce({rule.violation}, false) "
            f"THEN format('{rule.name}: {{}} ({{}})', {sql_literal(rule.description.rstrip('.'))}, {shown}) END")


def violation_reasons(table: Table, text_columns: dict[str, str] | None = None,
                      severities: tuple[str, ...] = ("error",), kinds: bool = False,
                      labels: dict[str, str] | None = None, unknown: str | None = None) -> str:
    """SQL for one VARCHAR: every broken rule of the row joined by '; ', NULL when the row is valid.

    Evaluated over a relation holding both the typed columns (by name) and their text (`<name>__text`), and their
    value kinds (`<name>__kind`) when `kinds`. `labels` names columns by the fields they were read from;
    `unknown`, a VARCHAR[] expression of the row's fields outside the contract, names misspelt required fields
    (evaluated only for a row missing one).
    """
    text_columns = text_columns or {}
    labels = labels or {}
    parts = [_column_reasons(c, text_of(c, text_columns), f"{c.name}__kind" if kinds else None, labels.get(c.name),
                             unknown)
             for c in table.columns]
    rules = [r for r in table.row_rules if r.severity in severities]
    parts += [_rule_reason(r, labels) for r in rules]
    # Most rows break no rule: they are cleared by cheap tests, and the phrases built for the others only (a CASE
    # evaluates its ELSE for the rows its condition leaves).
    clear = [_column_clear(c, text_of(c, text_columns), f"{c.name}__kind" if kinds else None) for c in table.columns]
    clear += [f"NOT coalesce({r.violation}, false)" for r in rules]
    return f"CASE WHEN {' AND '.join(clear)} THEN NULL ELSE nullif(concat_ws('; ', {', '.join(parts)}), '') END"


def struct_spec(table: Table) -> str:
    """The json_transform structure that reads every contract column of a JSON object as a JSON value, so that
    its JSON type (string, number, object...) is known beside its text."""
    return "{" + ", ".join(f'"{c.name}": "JSON"' for c in table.columns) + "}"


def json_value_columns(name: str, value: str, arrays: bool = False) -> str:
    """Select-list items `<name>__text, <name>__kind` for the JSON value `value`: a string's value, a number's
    digits as written, a boolean's true or false, an array's JSON text when `arrays` (a list column), NULL text
    for anything else (its kind says what it was, NULL for JSON null)."""
    array = f"WHEN 'ARRAY' THEN {value}::VARCHAR " if arrays else ""
    return (f"CASE json_type({value}) WHEN 'VARCHAR' THEN {value} ->> '$' WHEN 'BIGINT' THEN {value}::VARCHAR "
            f"WHEN 'UBIGINT' THEN {value}::VARCHAR WHEN 'DOUBLE' THEN {value}::VARCHAR "
            f"WHEN 'BOOLEAN' THEN {value}::VARCHAR {array}END AS {name}__text, "
            f"{JSON_KIND.format(v=value)} AS {name}__kind")


# One step of a contract's JSON path: `.name`, `."dotted.name"` or `[index]` (`[*]`: every element).
_PATH_STEP = re.compile(r'\.(?:"([^"]*)"|([^.\["]+))|\[[^\]]*\]')
DUPLICATE_KEY = "a record must hold each key once (which value is meant cannot be told)"


def read_objects(paths: list[str] | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The JSON objects a record's fields are read from, by path (`$` the record itself), each with the keys read in
    it: every step of every path (`$.usage.input_tokens` reads `usage` in `$` and `input_tokens` in `$.usage`)."""
    objects: dict[str, list[str]] = {}
    for path in paths:
        parent = "$"
        for step in _PATH_STEP.finditer(path.removeprefix("$")):
            key = step.group(1) if step.group(1) is not None else step.group(2)
            if key is not None and key not in objects.setdefault(parent, []):
                objects[parent].append(key)
            parent += step.group(0)
    return {parent: tuple(keys) for parent, keys in objects.items()}


def duplicate_key_problem(value: str, objects: dict[str, tuple[str, ...]], unparsed: bool = False) -> str:
    """SQL for why the JSON value `value` cannot be read: a key of `objects` (`read_objects`) held twice in its object
    (`duplicate key "input_tokens" in the object at $.usage: ...`, the first such object in `objects`' order); NULL
    when there is none, or when `value` is NULL or not an object. A JSON parser keeps one of the two values, so
    which one a record meant is unknown: the record is quarantined rather than read with either.

    DuckDB keeps every copy of a key in json_keys: one parse of `value` gives the keys of all the paths without
    a wildcard (json_keys takes a wildcard path only alone: one parse each). With `unparsed`, `value` is text that
    may not be JSON at all (NULL here, its reader says why)."""
    def keys(paths: str | list[str]) -> str:
        found = f"json_keys({value}, {sql_literal(paths) if isinstance(paths, str) else _sql_list(paths)})"
        return f"try({found})" if unparsed else found

    def first_repeated(keys_list: str, read: tuple[str, ...]) -> str:
        return (f"list_filter({keys_list}, lambda k, n: k IN ({', '.join(sql_literal(k) for k in read)}) "
                f"AND list_position({keys_list}, k) < n)[1]")

    def reason(key: str, parent: str) -> str:
        after = sql_literal(f'" in the object at {parent}: {DUPLICATE_KEY}')
        return f"'duplicate key \"' || left({key}, 80) || {after}"

    plain = [p for p in objects if "[*]" not in p]
    found = [reason(first_repeated(f"ks[{i}]", objects[p]), p) for i, p in enumerate(plain, start=1)]
    problems = [f"list_transform([{keys(plain)}], lambda ks: coalesce({', '.join(found)}))[1]"] if plain else []
    for p in objects:
        if "[*]" in p:
            every = f"flatten(list_transform({keys(p)}, lambda ks: [{first_repeated('ks', objects[p])}]))"
            problems.append(reason(f"list_filter({every}, lambda k: k IS NOT NULL)[1]", p))
    return f"coalesce({', '.join(problems)})" if len(problems) > 1 else (problems[0] if problems else "NULL")


def _sql_list(values: list[str]) -> str:
    return "[" + ", ".join(sql_literal(v) for v in values) + "]"


def json_text_columns(table: Table, struct: str) -> str:
    """`json_value_columns` for every contract column of `struct`, the result of
    json_transform(..., struct_spec(table))."""
    return ", ".join(json_value_columns(c.name, f"{struct}.{c.name}", arrays=c.is_list) for c in table.columns)


def validation_query(table: Table, text_relation: str, passthrough: list[str], gate: str | None = None,
                     kinds: bool = False, labels: dict[str, str] | None = None, raw: str | None = None,
                     keep_raw: str | None = None, unknown: str | None = None) -> str:
    """Type and judge every row of `text_relation`, which holds `<name>__text` for each contract column (and
    `<name>__kind` when `kinds`).

    Returns `passthrough` columns, the typed contract columns, `raw` (the row's contract fields as JSON text, in
    the form `raw_text` may keep: nothing outside the contract, no JSON object, no key) and `reason` (NULL for a
    valid row). `gate` is an optional column of the relation giving why a row cannot be judged at all (e.g. a
    line that is not a JSON object), NULL when it can; such a row keeps no raw fields. `raw`, when given, is the
    relation's own kept form of the row (an adapter keeps its source's fields, checked by their own contract).

    `keep_raw`, a condition on the typed columns, keeps `raw` only for the rows that break a rule or meet it (the
    rows a later rule may still quarantine) and leaves it NULL for the others: only quarantined rows keep it, and
    building it for every row cost about a third of staging a file.

    `unknown` (see `violation_reasons`) names a misspelt field beside a required one that is missing.
    """
    reason = violation_reasons(table, kinds=kinds, labels=labels, unknown=unknown)
    if gate:
        reason = f"CASE WHEN {gate} IS NOT NULL THEN {gate} ELSE {reason} END"
    parses = parse_select(table, kinds=kinds)
    if parses:
        text_relation = f"SELECT *, {', '.join(parses)} FROM ({text_relation})"
    typed = f"SELECT *, {', '.join(typed_select(table, kinds=kinds, parsed=bool(parses)))} FROM ({text_relation})"
    keep = ", ".join(passthrough)
    if raw is None:
        raw_fields = ", ".join(
            f"{sql_literal(c.name)}, {raw_text(c, text_of(c), f'{c.name}__kind' if kinds else None)}"
            for c in table.columns)
        raw = f"json_object({raw_fields})::VARCHAR"
        if keep_raw:
            raw = (f"CASE WHEN {f'{gate} IS NULL AND ' if gate else ''}(reason IS NOT NULL OR ({keep_raw})) "
                   f"THEN {raw} END")
            return (f"SELECT {keep}, {', '.join(table.column_names)}, {raw} AS raw, reason "
                    f"FROM (SELECT *, {reason} AS reason FROM ({typed}))")
        if gate:
            raw = f"CASE WHEN {gate} IS NULL THEN {raw} END"
    return f"SELECT {keep}, {', '.join(table.column_names)}, {raw} AS raw, {reason} AS reason FROM ({typed})"


# A time of day followed by its own zone: Z, +HH, +HHMM, +HH:MM (and -), UTC, GMT or a zone name (Europe/Paris).
_OFFSET = r":[0-9]{2}(\.[0-9]+)?\s*([Zz]|[+-][0-9]{2}(:?[0-9]{2})?|UTC|GMT|[A-Za-z_]+/[A-Za-z_/+-]+)\s*$"


def zoneless_fields(table: Table, labels: dict[str, str] | None = None) -> str | None:
    """A select-list expression over a validation query's typed relation (`<name>__text` beside the typed column)
    naming the timestamp fields of the row written as text without an offset, which are read as UTC (`, `-joined,
    NULL when none); None when the table has no timestamp whose format leaves the zone open. A number since the
    epoch has no zone to leave out, and a column marked `zoneless: utc` is UTC by its format's definition."""
    labels = labels or {}
    tests = [f"CASE WHEN {c.name} IS NOT NULL AND NOT regexp_matches({text_of(c)}, {sql_literal(_OFFSET)}) "
             f"AND NOT regexp_full_match({text_of(c)}, '{_JSON_NUMBER}') "
             f"THEN {sql_literal(labels.get(c.name, c.name))} END"
             for c in table.columns if c.physical_type.upper() == "TIMESTAMPTZ" and c.zoneless != "utc"]
    return f"nullif(concat_ws(', ', {', '.join(tests)}), '')" if tests else None
