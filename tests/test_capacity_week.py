"""A generated week end to end through `tokenledger run`: every day publishes the capacity tables and writes its
capacity review, the tables match their contracts, and a load test counts from the day it ran."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from tokenledger.capacity.day import report_paths
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES
from tokenledger.cli import main
from tokenledger.contracts import load_contract, sql_literal
from tokenledger.generate import generate_landing_zone, generate_loadtest_run
from tokenledger.storage import lake
from tokenledger.storage.layout import HomeLayout

START = date(2026, 11, 16)  # Monday; the 70B deployment scales from 1 to 2 replicas Thursday noon
DAYS = [START + timedelta(days=i) for i in range(7)]
MODEL_QWEN, DEP_QWEN, DEP_70B = "qwen3-coder-30b-a3b-instruct", "qwen3coder30b-h100", "llama70b-h100nvl-tp2"
CAPACITY_TABLES = [ref for ref in PUBLISHED_TABLES + CORE_TABLES
                   if ref.name in ("capacity_daily", "load_hourly", "capacity_plan_daily", "capacity_windows",
                                   "loadtest_steps")]


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("capacity_week") / "home"
    generate_landing_zone(home, START, 7, 3_000, seed=7, bad_rows_per_day=0)
    slo = home / "config" / "slo.yaml"
    slo.write_text(slo.read_text().replace("    models:\n",
                                           f"    models:\n      {MODEL_QWEN}:\n        stable_window_min: 10\n"))
    # A verified load test of the coding model on Tuesday night.
    generate_loadtest_run(home, "lt-qwen", MODEL_QWEN, DEP_QWEN, datetime(2026, 11, 17, 22, tzinfo=UTC), None, 12, 7)
    with pytest.MonkeyPatch.context() as mp:
        assert main(["run", "--home", str(home), "--start", DAYS[0].isoformat(), "--end", DAYS[-1].isoformat()]) == 0
        mp.setenv("TOKENLEDGER_HOME", str(home))
        yield home


def _published(home: Path, table: str) -> list[dict]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cursor = con.execute("SELECT * FROM read_parquet($f, hive_partitioning = true) ORDER BY ALL",
                         {"f": str(home / "exports" / "infra" / table / "day=*" / lake.DATA_FILE)})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def test_every_day_is_published_with_its_review(week: Path) -> None:
    layout = HomeLayout.of(week)
    for day in DAYS:
        for table in ("capacity_daily", "load_hourly", "capacity_plan_daily"):
            assert lake.day_file(layout.exports, "infra", table, day).is_file(), (table, day)
        html_path, md_path = report_paths(layout, day)
        assert html_path.is_file() and md_path.is_file(), day
        assert f"Capacity review {day.isoformat()}" in html_path.read_text()
    # Three models, 24 hours each, every day; one plan row per deployment and day.
    assert len(_published(week, "load_hourly")) == 7 * 3 * 24
    assert len(_published(week, "capacity_plan_daily")) == 7 * 3
    # The last review's cost chart has every published day of every deployment.
    last = report_paths(layout, DAYS[-1])[0].read_text()
    chart = last[last.index('<svg class="chart chart-cost"'):]
    assert chart[:chart.index("</svg>")].count("<circle") == 7 * 3


@pytest.mark.parametrize("ref", CAPACITY_TABLES, ids=lambda r: r.qualified)
def test_the_capacity_tables_match_their_contracts(week: Path, ref) -> None:
    table = load_contract(ref.contract_id).table()
    con = duckdb.connect()
    files = str(week / "lake" / ref.schema / ref.name / "day=*" / lake.DATA_FILE)
    described = con.execute("DESCRIBE SELECT * FROM read_parquet($f)", {"f": files}).fetchall()
    spelled = [con.execute(f"DESCRIBE SELECT NULL::{c.physical_type} AS x").fetchone()[1] for c in table.columns]
    assert [(c[0], c[1]) for c in described] == list(zip(table.column_names, spelled, strict=True))
    con.execute(f"CREATE VIEW {table.name} AS SELECT * FROM read_parquet({sql_literal(files)})")
    for rule in table.row_rules:
        assert con.execute(f"SELECT count(*) FROM {table.name} WHERE coalesce({rule.violation}, false)"
                           ).fetchone() == (0,), rule.name


def test_a_load_test_counts_from_the_day_it_ran(week: Path) -> None:
    qwen = {r["day"]: r for r in _published(week, "capacity_daily") if r["deployment_id"] == DEP_QWEN}
    assert qwen[DAYS[0]]["loadtest_run_id"] is None
    for day in DAYS[1:]:
        assert (qwen[day]["capacity_source"], qwen[day]["capacity_verified"], qwen[day]["loadtest_run_id"]) == (
            "loadtest", True, "lt-qwen"), day
    assert len({qwen[day]["capacity_goodput_per_gpu"] for day in DAYS[1:]}) == 1


def test_the_plan_follows_the_scale_up(week: Path) -> None:
    plans = {r["day"]: r for r in _published(week, "capacity_plan_daily") if r["deployment_id"] == DEP_70B}
    # GPUs deployed at the end of each day: 1 replica of 2 until Thursday noon, then 2.
    assert [plans[d]["gpus_deployed"] for d in DAYS] == [2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    for plan in plans.values():
        assert plan["gpu_surplus"] == pytest.approx(plan["gpus_deployed"] - plan["gpus_needed"])


def test_the_catalog_shows_the_review_and_each_tables_rows_schema_and_file(week: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What `tokenledger run` recorded in the home's Dagster instance, as the UI shows it: the review's path and a
    Markdown preview of it; a table's rows per day, its contract's columns and its folder."""
    import dagster as dg

    from tokenledger.cli import dagster_home_of

    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(week)))
    layout = HomeLayout.of(week)
    with dg.DagsterInstance.get() as instance:
        def latest(*path: str) -> dict:
            event = instance.get_latest_materialization_event(dg.AssetKey(list(path)))
            return event.asset_materialization.metadata

        review = latest("reports", "capacity_review")
        plan = latest("infra", "capacity_plan_daily")
    html_path, md_path = report_paths(layout, DAYS[-1])
    assert review["path"].path == str(html_path)
    assert review["preview"].md_str == md_path.read_text(encoding="utf-8")[:20_000]
    assert review["preview"].md_str.startswith(f"# Capacity review {DAYS[-1].isoformat()} (UTC)")
    # `tokenledger run` ran the week as one ranged run, whose materialization Dagster records on each of the seven
    # days: the rows are the week's, each day's under per_day (the last day's three deployments, as its file holds),
    # and no per-day row count or file is claimed for the range.
    last_file = lake.day_file(layout.lake, "infra", "capacity_plan_daily", DAYS[-1])
    rows = duckdb.connect().execute("SELECT count(*) FROM read_parquet($f)", {"f": str(last_file)}).fetchone()[0]
    assert plan["per_day"].data[DAYS[-1].isoformat()]["rows"] == rows == 3
    assert plan["rows"].value == sum(day["rows"] for day in plan["per_day"].data.values())
    assert plan["days"].value == 7 and "dagster/row_count" not in plan
    contract = load_contract("infra_capacity_plan_daily").table()
    assert [c.name for c in plan["dagster/column_schema"].schema.columns] == contract.column_names
    assert plan["path"].path == str(last_file.parent.parent)
