"""The contract gate on small hand-made tables: every kind of rule counted in DuckDB, each broken rule named with
its count, the rows it judged and examples, and the verdict given by the GX suite over those counts.

The end-to-end tests (tests/test_checks.py) tamper with real day files and watch the Dagster checks; these check
the rule forms one by one without running the job.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import pytest

from tokenledger.contracts import Column, RowRule, SetRule, Table
from tokenledger.expectations import CRITICAL, WARNING, Finding, judge, validate_days

DAY = date(2026, 11, 16)

TABLE = Table("t", "a table with one rule of every kind", (
    Column("id", "string", "VARCHAR", required=True, unique=True, primary_key=True, max_length=5),
    Column("kind", "string", "VARCHAR", required=True, valid_values=("a", "b")),
    Column("n", "integer", "BIGINT", required=True, minimum=0),
    Column("x", "number", "DOUBLE", required_when="kind = 'a'", exclusive_maximum=10),
    Column("code", "string", "VARCHAR", pattern="^[A-Z]{3}$"),
), row_rules=(
    RowRule("x_within_n", "x must not exceed n.", "error", "(n IS NOT NULL AND x IS NOT NULL AND n < x)", ("n", "x"),
            expectation={"expectation_type": "expect_column_pair_values_a_to_be_greater_than_b"}),
    RowRule("n_small", "n above 100 is unusual.", "warning", "(n > 100)", ("n",)),
), set_rules=(
    SetRule("has_b", "some row is of kind b.", "error", "SELECT (count(*) FILTER (WHERE kind = 'b') = 0)::INT FROM t"),
))

GOOD = "('r1', 'a', 5, 2.0, 'ABC')"
# r2: kind outside the set, n below 0. r3: a second r1, n large (a warning), x missing though kind is 'a', code in
# lower case. r4: an id of 7 characters, x not below 10 and above n.
BAD = [GOOD, "('r2', 'c', -1, NULL, 'ABC')", "('r1', 'a', 200, NULL, 'abc')", "('toolong', 'a', 3, 12.0, NULL)"]


def _day_file(folder: Path, name: str, rows: list[str], select: str = "*") -> Path:
    path = folder / name
    typed = (f"SELECT id, kind, n::BIGINT AS n, x::DOUBLE AS x, code "
             f"FROM (VALUES {', '.join(rows)}) v(id, kind, n, x, code)")
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT {select} FROM ({typed})) TO '{path}' (FORMAT PARQUET)")
    return path


def test_every_kind_of_rule_is_counted_named_and_shown(tmp_path: Path) -> None:
    validation = validate_days(duckdb.connect(), "t", TABLE, {DAY: _day_file(tmp_path, "day.parquet", BAD)})

    assert validation.rows == 4
    assert validation.describe(CRITICAL) == (
        "t (1 day file(s), 4 rows): "
        "2026-11-16 id at most 5 characters: 1 of 4 row(s) fail, e.g. 7; "
        "2026-11-16 kind in {a, b}: 1 of 4 row(s) fail, e.g. 'c'; "
        "2026-11-16 n >= 0: 1 of 4 row(s) fail, e.g. -1; "
        "2026-11-16 x not null when kind = 'a': 1 of 3 row(s) fail, e.g. null; "
        "2026-11-16 x < 10: 1 of 4 row(s) fail, e.g. 12.0; "
        "2026-11-16 code matches ^[A-Z]{3}$: 1 of 4 row(s) fail, e.g. 'abc'; "
        "2026-11-16 x_within_n (x must not exceed n): 1 of 4 row(s) fail, e.g. (3, 12.0); "
        "2026-11-16 (id) unique: 1 of 4 row(s) fail, e.g. 'r1'; "
        "2026-11-16 has_b (some row is of kind b): 1 of 4 row(s) fail")
    assert validation.describe(WARNING) == (
        "t (1 day file(s), 4 rows): 2026-11-16 n_small (n above 100 is unusual): 1 of 4 row(s) fail, e.g. (200)")
    # Every rule was counted, broken or not: 2 + 2 + 2 + 2 + 1 column rules, 5 column types, 4 table rules.
    assert len(validation.counts) == 1 + 9 + 5 + 4


def test_a_day_meeting_every_rule_passes(tmp_path: Path) -> None:
    rows = [GOOD, "('r2', 'b', 0, NULL, NULL)"]
    validation = validate_days(duckdb.connect(), "t", TABLE, {DAY: _day_file(tmp_path, "day.parquet", rows)})
    assert validation.findings == []
    assert validation.describe(CRITICAL) == "t: 2 row(s) in 1 day file(s) meet every critical rule"


def test_the_gx_suite_is_the_judge_of_the_counts() -> None:
    counts = [Finding("a", CRITICAL, 0, 4), Finding("b", CRITICAL, 2, 4), Finding("c", WARNING, 1, 4),
              Finding("d", WARNING, 0, 4)]
    assert [f.rule for f in judge(counts)] == ["b", "c"]
    assert judge([Finding("a", CRITICAL, 0, 4)]) == []


def test_rules_over_days_are_summed_and_day_rules_named_by_day(tmp_path: Path) -> None:
    days = {DAY: _day_file(tmp_path, "d1.parquet", [GOOD, "('r2', 'b', -1, NULL, NULL)"]),
            # A file name DuckDB would take as a glob is read as itself.
            date(2026, 11, 17): _day_file(tmp_path, "d[2]*.parquet", ["('r1', 'b', -2, NULL, NULL)"] * 2),
            date(2026, 11, 18): tmp_path / "missing.parquet"}
    validation = validate_days(duckdb.connect(), "t", TABLE, days)
    assert validation.rows == 4
    assert [f.describe() for f in validation.failed(CRITICAL)] == [
        f"day file present: 1 of 3 row(s) fail, e.g. '{tmp_path / 'missing.parquet'}'",
        "2026-11-16..2026-11-17 n >= 0: 3 of 4 row(s) fail, e.g. -1, -2, -2",
        "2026-11-17 (id) unique: 1 of 2 row(s) fail, e.g. 'r1'",
    ]


def test_a_column_of_the_wrong_type_is_reported_not_raised(tmp_path: Path) -> None:
    path = _day_file(tmp_path, "day.parquet", [GOOD], select="* REPLACE (n::VARCHAR AS n)")
    broken = {f.rule: f for f in validate_days(duckdb.connect(), "t", TABLE, {DAY: path}).failed(CRITICAL)}
    assert broken["2026-11-16 column n of type BIGINT"].examples == ["VARCHAR"]
    assert "Binder Error" in broken["2026-11-16 n >= 0"].examples[0]


@pytest.mark.parametrize("value", ["'nan'::DOUBLE", "NULL::DOUBLE"])
def test_a_missing_float_is_judged_only_by_not_null(tmp_path: Path, value: str) -> None:
    path = _day_file(tmp_path, "day.parquet", [GOOD], select=f"* REPLACE ({value} AS x)")
    broken = [f.rule for f in validate_days(duckdb.connect(), "t", TABLE, {DAY: path}).failed(CRITICAL)]
    assert broken == ["2026-11-16 x not null when kind = 'a'", "2026-11-16 has_b (some row is of kind b)"]


def test_scipy_stats_still_works_after_gx_is_imported_without_it() -> None:
    # GX's import defers scipy.stats (tokenledger.expectations._defer_scipy_stats); code that uses it must get the
    # whole module on first use.
    judge([Finding("r", CRITICAL, 0, 1)])
    from scipy import stats

    assert stats.norm.cdf(0.0) == 0.5
    assert stats.entropy([0.5, 0.5], base=2) == pytest.approx(1.0)


class _Recording:
    """A DuckDB connection that keeps the statements it was given."""

    def __init__(self) -> None:
        self.con, self.statements = duckdb.connect(), []

    def execute(self, query: str, params=None):
        self.statements.append(query)
        return self.con.execute(query, params)

    def __getattr__(self, name: str):
        return getattr(self.con, name)


def test_days_of_one_schema_are_counted_in_one_statement_with_the_same_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tokenledger.expectations as expectations

    empty = tmp_path / "d3.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT * FROM read_parquet('{_day_file(tmp_path, 'g.parquet', [GOOD])}') WHERE false) "
                    f"TO '{empty}' (FORMAT PARQUET)")
    days = {DAY: _day_file(tmp_path, "d1.parquet", BAD),
            date(2026, 11, 17): _day_file(tmp_path, "d2.parquet", [GOOD, "('r2', 'b', 0, NULL, NULL)"]),
            date(2026, 11, 18): empty,
            # Alone in its schema (no code column): counted by itself.
            date(2026, 11, 19): _day_file(tmp_path, "d4.parquet", BAD, select="* EXCLUDE (code)"),
            # n as text in two days: DuckDB cannot compare it with 0, so these are counted day by day, rule by rule.
            date(2026, 11, 20): _day_file(tmp_path, "d5.parquet", BAD, select="* REPLACE (n::VARCHAR AS n)"),
            date(2026, 11, 21): _day_file(tmp_path, "d6.parquet", [GOOD], select="* REPLACE (n::VARCHAR AS n)")}

    def outcome(validation):
        return validation.rows, [(c.rule, c.severity, c.unexpected, c.checked, c.examples)
                                 for c in validation.counts]

    together = _Recording()
    grouped = validate_days(together, "t", TABLE, days)
    monkeypatch.setattr(expectations, "_count_together", lambda *args: {})
    alone = _Recording()
    day_by_day = validate_days(alone, "t", TABLE, days)

    assert outcome(grouped) == outcome(day_by_day)
    assert grouped.rows == 4 + 2 + 0 + 4 + 4 + 1
    by_rule = {c.rule: (c.unexpected, c.checked) for c in grouped.counts}
    assert by_rule["2026-11-16 (id) unique"] == (1, 4)
    assert by_rule["2026-11-16 has_b (some row is of kind b)"] == (1, 4)
    assert by_rule["2026-11-17 has_b (some row is of kind b)"] == (0, 2)
    assert "2026-11-18 has_b (some row is of kind b)" not in by_rule  # an empty day has no rows to judge
    # kind in {a, b} holds row by row: summed over the six days (d1, d4 and d5 hold the 'c').
    assert by_rule["2026-11-16..2026-11-21 kind in {a, b}"] == (3, 15)
    grouped_statements = [q for q in together.statements if "GROUP BY __tokenledger_day_file" in q]
    assert len(grouped_statements) == 2  # d1-d3 counted; d5-d6 tried, then day by day
    assert not any("GROUP BY __tokenledger_day_file" in q for q in alone.statements)
