"""Cost over a generated week: every day reconciles, shared and credit rows are spread, and each cost table's
Parquet columns are its contract's.

One week at 4,000 requests a weekday (tokenledger.generate, seed 7) runs through the whole daily pipeline once per
module (leniently: at this volume the generator's planted bad rows exceed the quarantine tolerance). The generated
bill tags GPU, CPU, network and storage rows to their deployment, has a 6-hour snapshot placed only by its
ResourceId pattern, untagged platform rows and gateway nodes tagged `shared` (spread by GPU-hours over all three
deployments, the two on-premises ones included), and a credit of -12 a day over the week.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import failure_text, lenient, materialize
from tokenledger import lake
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, TableRef
from tokenledger.contracts import load_contract, sql_literal
from tokenledger.generate import generate_landing_zone

START, END = "2026-11-16", "2026-11-22"
COST_TABLES = [r for r in CORE_TABLES + PUBLISHED_TABLES
               if r.name in ("cost_lines", "cost_allocation_daily") or r.schema == "finance"]


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, duckdb.DuckDBPyConnection]]:
    home = tmp_path_factory.mktemp("cost_week") / "home"
    generate_landing_zone(home, date(2026, 11, 16), 7, 4_000, seed=7)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(START, END, run_config=lenient())
        assert result.success, failure_text(result)
    con = duckdb.connect()
    for ref in COST_TABLES + [TableRef("core", "billing_charges"), TableRef("core", "deployments_daily")]:
        files = sql_literal(lake.table_glob(home / "lake", ref.schema, ref.name))
        con.execute(f"CREATE VIEW {ref.name} AS SELECT * FROM read_parquet({files})")
    yield home, con


def test_every_day_of_the_week_reconciles_with_the_bill(week) -> None:
    _, con = week
    got = con.execute(
        "SELECT r.day, r.currency, r.balanced, r.billed_effective_cost = b.billed, r.unallocated_cost, "
        "r.deployment_cost = r.allocated_cost + r.rate_card_cost "
        "FROM cost_reconciliation_daily r JOIN (SELECT day, sum(effective_cost_day) AS billed "
        "FROM billing_charges GROUP BY day) b USING (day) ORDER BY day").fetchall()
    assert [(str(d), c, ok, same, unallocated, adds) for d, c, ok, same, unallocated, adds in got] == [
        (f"2026-11-{16 + i}", "USD", True, True, Decimal(0), True) for i in range(7)]
    # Every deployment's cost in the published table adds up to what was placed on deployments.
    assert con.execute(
        "SELECT count(*) FROM cost_reconciliation_daily r JOIN (SELECT day, currency, sum(cost_total) AS c FROM "
        "cost_per_mtok_daily GROUP BY ALL) p USING (day, currency) WHERE p.c <> r.deployment_cost").fetchone() \
        == (0,)


def test_shared_costs_are_spread_by_gpu_hours_and_the_credit_lands_on_its_deployment(week) -> None:
    _, con = week
    # Per day and category, the spread shares add up to the shared lines exactly ...
    assert con.execute(
        "SELECT count(*) FROM (SELECT day, category, sum(effective_cost_day) AS c FROM cost_lines "
        "WHERE placement = 'shared' GROUP BY ALL) l FULL JOIN (SELECT day, category, sum(cost) AS c "
        "FROM cost_allocation_daily WHERE placement = 'shared' GROUP BY ALL) a USING (day, category) "
        "WHERE l.c IS DISTINCT FROM a.c").fetchone() == (0,)
    # ... and each deployment's share is its GPU-hours over the day's (within the 1e-12 rounding).
    off = con.execute(
        "WITH g AS (SELECT day, deployment_id, sum(gpu_hours) / sum(sum(gpu_hours)) OVER (PARTITION BY day) AS share "
        "FROM deployments_daily GROUP BY day, deployment_id), "
        "s AS (SELECT day, category, sum(effective_cost_day) AS c FROM cost_lines WHERE placement = 'shared' "
        "GROUP BY ALL) "
        "SELECT max(abs(a.cost::DOUBLE - s.c::DOUBLE * g.share)), "
        "count(DISTINCT a.deployment_id), count(DISTINCT a.category) "
        "FROM cost_allocation_daily a JOIN g USING (day, deployment_id) JOIN s USING (day, category) "
        "WHERE a.placement = 'shared'").fetchone()
    assert off[0] < 1e-9 and off[1:] == (3, 2)  # cpu (the gateway nodes) and platform (EKS, CloudWatch)
    credit = con.execute(
        "SELECT day, deployment_id, placement, category, effective_cost_day FROM cost_lines "
        "WHERE ChargeCategory = 'Credit' ORDER BY day").fetchall()
    assert [(d, p, c, v) for _, d, p, c, v in credit] == [
        ("qwen3coder30b-h100", "tagged", "gpu", Decimal("-12"))] * 7
    snapshot = con.execute("SELECT day::VARCHAR, deployment_id, placement, category FROM cost_lines "
                           "WHERE ResourceId LIKE '%snapshot/%'").fetchall()
    assert snapshot == [("2026-11-16", "qwen3coder30b-h100", "resource_id", "storage")]
    assert con.execute("SELECT DISTINCT deployment_id, category FROM cost_lines WHERE source = 'rate_card' "
                       "ORDER BY 1").fetchall() == [("llama70b-h100nvl-tp2", "gpu"), ("llama8b-l40s-onprem", "gpu")]


def test_class_costs_and_tenant_costs_add_back(week) -> None:
    _, con = week
    worst = con.execute(
        "SELECT max(abs((input_cached * unit_cost_cached_per_mtok + input_recomputed * unit_cost_recomputed_per_mtok"
        " + output_tokens * unit_cost_output_per_mtok) / 1e6 / cost_total::DOUBLE - 1)), count(*) "
        "FROM cost_per_mtok_daily").fetchone()
    assert worst[0] < 1e-9 and worst[1] == 7 * 3
    assert con.execute(
        "SELECT count(*) FROM (SELECT day, model, currency, sum(cost_total) AS c FROM cost_per_mtok_daily "
        "GROUP BY ALL) m FULL JOIN (SELECT day, model, currency, sum(cost) AS c FROM tenant_showback_daily "
        "GROUP BY ALL) t USING (day, model, currency) WHERE m.c IS DISTINCT FROM t.c").fetchone() == (0,)
    assert con.execute("SELECT count(DISTINCT tenant_id) > 1, min(cost_share) > 0 FROM tenant_showback_daily"
                       ).fetchone() == (True, True)


def _normalized(con: duckdb.DuckDBPyConnection, physical_type: str) -> str:
    return con.execute(f"SELECT typeof(CAST(NULL AS {physical_type}))").fetchone()[0]


@pytest.mark.parametrize("ref", COST_TABLES, ids=lambda r: r.qualified)
def test_each_cost_table_has_its_contract_columns(week, ref: TableRef) -> None:
    home, con = week
    table = load_contract(ref.contract_id).table()
    assert table.name == ref.name
    for day in ("2026-11-16", "2026-11-22"):
        described = con.execute("DESCRIBE SELECT * FROM read_parquet($p)",
                                {"p": str(lake.day_file(home / "lake", ref.schema, ref.name, date.fromisoformat(day)))}
                                ).fetchall()
        assert [(c[0], c[1]) for c in described] == [(c.name, _normalized(con, c.physical_type))
                                                     for c in table.columns], day
    if ref.schema == "finance":
        exported = home / "exports" / ref.schema / ref.name
        spreadsheets = home / "exports" / "csv" / ref.schema / ref.name
        assert len(list(exported.glob("day=*/data.parquet"))) == len(list(spreadsheets.glob("*.csv"))) == 7
