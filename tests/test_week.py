"""Accounting and cost over a generated week, and the published accounting and cost tables against their data
contracts.

One week at 20,000 requests per weekday (tokenledger.generate, seed 7) is generated and run through the whole
daily pipeline once per module; the tests read its lake and exports with DuckDB. The cost tests (formerly a module
of their own, on a 4,000-request week run leniently, since at that volume the generator's planted bad rows exceed
the quarantine tolerance) read the same week, run with every check as it stands: one generated week, not two. The
generated bill tags GPU, CPU, network and storage rows to their deployment, has a 6-hour snapshot placed only by its
ResourceId pattern, untagged platform rows and gateway nodes tagged `shared` (spread by GPU-hours over all three
deployments, the two on-premises ones included), and a credit of -12 a day over the week.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import failure_text, materialize
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, TableRef
from tokenledger.contracts import Table, load_contract, sql_literal
from tokenledger.generate import generate_landing_zone
from tokenledger.storage import lake

START, END = "2026-11-16", "2026-11-22"  # Monday to Sunday; the 70B model scales 1 -> 2 replicas Thursday noon
MODEL_70B, CODER = "llama-3.1-70b-instruct", "qwen3-coder-30b-a3b-instruct"
ACCOUNTING_TABLES = [ref for ref in PUBLISHED_TABLES if ref.schema == "infra"] + [
    ref for ref in CORE_TABLES if ref.name == "usage_hourly"]


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("week") / "home"
    generate_landing_zone(home, date(2026, 11, 16), 7, 20_000, seed=7)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(START, END)
        assert result.success, failure_text(result)
        yield home


def _connect(home: Path, table: TableRef) -> duckdb.DuckDBPyConnection:
    """A connection with the table's week as a view of its name."""
    files = sql_literal(lake.table_glob(home / "lake", table.schema, table.name))
    con = duckdb.connect()
    con.execute(f"CREATE VIEW {table.name} AS SELECT * FROM read_parquet({files})")
    return con


def _query(home: Path, sql: str, table: TableRef) -> list[tuple]:
    with _connect(home, table) as con:
        return con.execute(sql).fetchall()


def test_a_lightly_loaded_fleet_keeps_goodput_with_raw_throughput(week: Path) -> None:
    ref = TableRef("infra", "goodput_hourly")
    # The fleet is sized to the demo's 200,000 requests a weekday (tokenledger.generate.fleet); at 20,000 the 70B's
    # one replica runs at ~6% even in the business-hours peak, so nearly every token produced is compliant at
    # every hour. (At the demo volume the same peak falls behind: tests/test_demo_fleet.py.)
    (peak, night), = _query(week, f"""
        SELECT
            sum(slo_goodput) FILTER (WHERE hour BETWEEN 10 AND 15)
              / sum(raw_throughput) FILTER (WHERE hour BETWEEN 10 AND 15),
            sum(slo_goodput) FILTER (WHERE hour BETWEEN 0 AND 5)
              / sum(raw_throughput) FILTER (WHERE hour BETWEEN 0 AND 5)
        FROM goodput_hourly WHERE model = '{MODEL_70B}' AND day <= '2026-11-18'""", ref)
    assert peak > 0.99 and night > 0.99
    # The hours are in the published table too, with the GPUs of the scale-up: 2 until Thursday noon, then 4.
    gpus = dict(_query(week, f"SELECT hour, gpus FROM goodput_hourly WHERE model = '{MODEL_70B}' "
                             "AND day = '2026-11-19'", ref))
    assert (gpus[11], gpus[12]) == (2.0, 4.0)
    assert (week / "exports" / "infra" / "goodput_hourly" / "day=2026-11-18" / "data.parquet").is_file()


def test_the_coding_agent_reads_about_300_input_tokens_per_output_token(week: Path) -> None:
    days = _query(week, f"SELECT day, input_output_ratio, cache_hit_ratio, input_overstatement "
                        f"FROM token_split_daily WHERE model = '{CODER}' ORDER BY day",
                  TableRef("infra", "token_split_daily"))
    assert len(days) == 7
    for day, ratio, hit, overstatement in days:
        assert 250 < ratio < 350, day
        assert hit == pytest.approx(0.96, abs=0.01), day
        # At a ~96% hit ratio a report of total input overstates input compute about 25 times.
        assert overstatement == pytest.approx(1 / (1 - hit)) and 20 < overstatement < 30, day


def _violations(table: Table) -> list[tuple[str, str]]:
    """(rule, query counting violating rows) for every rule the contract states, column rules included."""
    checks = []
    for col in table.columns:
        if col.required:
            checks.append((f"{col.name} required", f"{col.name} IS NULL"))
        for bound, op in ((col.minimum, "<"), (col.maximum, ">"), (col.exclusive_minimum, "<="),
                          (col.exclusive_maximum, ">=")):
            if bound is not None:
                checks.append((f"{col.name} {op} {bound}", f"{col.name} {op} {sql_literal(bound)}"))
    queries = [(name, f"SELECT COUNT(*) FROM {table.name} WHERE {cond}") for name, cond in checks]
    queries += [(r.name, f"SELECT COUNT(*) FROM {table.name} WHERE coalesce({r.violation}, false)")
                for r in table.row_rules]
    queries += [(r.name, r.query) for r in table.set_rules]
    return queries


@pytest.mark.parametrize("ref", ACCOUNTING_TABLES, ids=lambda r: r.qualified)
def test_every_accounting_table_matches_its_contract(week: Path, ref: TableRef) -> None:
    contract_id = f"{ref.schema}_{ref.name}"
    table = load_contract(contract_id).table()
    assert table.name == ref.name
    con = _connect(week, ref)  # every rule's query on one connection: a connection per query cost ~20 s a module
    described = con.execute(f"DESCRIBE SELECT * FROM {ref.name}").fetchall()
    assert [(c[0], c[1]) for c in described] == [(c.name, c.physical_type) for c in table.columns]
    assert [c.name for c in table.columns if c.primary_key] == {
        "usage_hourly": ["day", "hour", "model", "deployment_id", "tenant_id", "isl_bucket"],
        "token_split_daily": ["day", "model"], "token_split_hourly": ["day", "hour", "model"],
        "slo_daily": ["day", "model", "isl_bucket"], "slo_hourly": ["day", "hour", "model", "isl_bucket"],
        "capacity_daily": ["day", "model", "deployment_id"],
        "capacity_model_daily": ["day", "model", "deployment_id"],
        "loadtest_sweep_daily": ["day", "model", "deployment_id", "step_index"],
        "goodput_hourly": ["day", "hour", "model", "deployment_id"], "load_hourly": ["day", "hour", "model"],
        "gpu_usage_hourly": ["day", "hour", "model", "deployment_id"],
        "gpu_usage_daily": ["day", "model", "deployment_id"],
        "capacity_plan_daily": ["day", "model", "deployment_id"],
        "gpu_memory_daily": ["day", "model", "deployment_id"],
        "capacity_verdict_daily": ["day", "model", "deployment_id"],
        "cache_whatif_daily": ["day", "model", "deployment_id", "scenario"]}[ref.name]
    broken = {name: n for name, q in _violations(table) if (n := con.execute(q).fetchone()[0])}
    assert broken == {}, f"{contract_id}: rules broken by the generated week"
    # The week has no load test, so no deployment has a sweep (tests/test_loadtest_batching.py fills one).
    days = 0 if ref.name == "loadtest_sweep_daily" else 7
    assert con.execute(f"SELECT count(DISTINCT day) FROM {ref.name}").fetchall() == [(days,)]


# --- cost over the week ---------------------------------------------------------------------------------------------

COST_TABLES = [r for r in CORE_TABLES + PUBLISHED_TABLES
               if r.name in ("cost_lines", "cost_allocation_daily") or r.schema == "finance"]


@pytest.fixture(scope="module")
def cost_week(week: Path) -> Iterator[tuple[Path, duckdb.DuckDBPyConnection]]:
    """The week's home and a connection with its cost tables (and the bill and the deployments) as views."""
    con = duckdb.connect()
    for ref in COST_TABLES + [TableRef("core", "billing_charges"), TableRef("core", "deployments_daily")]:
        files = sql_literal(lake.table_glob(week / "lake", ref.schema, ref.name))
        con.execute(f"CREATE VIEW {ref.name} AS SELECT * FROM read_parquet({files})")
    yield week, con


def test_every_day_of_the_week_reconciles_with_the_bill(cost_week) -> None:
    _, con = cost_week
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


def test_shared_costs_are_spread_by_gpu_hours_and_the_credit_lands_on_its_deployment(cost_week) -> None:
    _, con = cost_week
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


def test_class_costs_and_tenant_costs_add_back(cost_week) -> None:
    _, con = cost_week
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
def test_each_cost_table_has_its_contract_columns(cost_week, ref: TableRef) -> None:
    home, con = cost_week
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
        # every finance table but the provider cost reconciliation (Parquet only) is also a CSV per day
        assert len(list(exported.glob("day=*/data.parquet"))) == 7
        assert len(list(spreadsheets.glob("*.csv"))) == (7 if ref.csv_export else 0)


# --- the capacity review of every day, figure by figure (issue 57 items 2 and 3) -------------------------------------

_SPAN = re.compile(r"<span ([^>]*)>([^<]*)</span>")
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')


def _figures(page: str) -> list[dict[str, str]]:
    """Every marked figure of a review page: its data attributes and its text, as a reader reads them."""
    out = []
    for attrs, text in _SPAN.findall(page):
        found = {k: html.unescape(v) for k, v in _ATTR.findall(attrs)}
        if "data-table" in found or "data-derived" in found:
            out.append({**found, "text": html.unescape(text)})
    return out


def _published_rows(home: Path) -> dict[tuple[str, ...], dict]:
    """Every row of the tables a review cites, keyed by (table, day, its key columns in TABLE_KEYS' order)."""
    from tokenledger.report.review import TABLE_KEYS

    rows: dict[tuple[str, ...], dict] = {}
    for qualified, keys in TABLE_KEYS.items():
        if "." not in qualified:
            continue
        schema, name = qualified.split(".")
        with _connect(home, TableRef(schema, name)) as con:
            cursor = con.execute(f"SELECT * FROM {name}")
            names = [d[0] for d in cursor.description]
            for values in cursor.fetchall():
                row = dict(zip(names, values, strict=True))
                rows[(qualified, str(row["day"]), *(str(row[k]) for k in keys))] = row
    return rows


def _visible_text(fragment: str) -> str:
    fragment = re.sub(r"<svg.*?</svg>", " ", fragment, flags=re.S)
    fragment = re.sub(r"<(style|title)>.*?</\1>", " ", fragment, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


# Digits the review's own words carry (not figures): P99, 1M input tokens, N+1's N, 28 days and 14 published days
# of the growth forecast, the bucket names' 4k and 128k, UTC.
_STATIC_NUMBERS = re.compile(r"\bP(10|50|90|99)\b|\bE2E\b|\b1M\b|\b28 days\b|\b14 published days\b|\bthe last 28\b")


def test_every_figure_of_every_review_is_its_published_cell(week: Path) -> None:
    """Every day of the week: each figure the review prints is the published cell it names, formatted as the
    review formats it; each verdict is infra.capacity_verdict_daily's words and colour, and every judged deployment
    has its row; a bucket not judged never reads 'missed'; no line beside an SLO table that says missed says 'met';
    and no number is printed without its cell (beyond the review's own words)."""
    from tokenledger.capacity.day import review_of_day
    from tokenledger.config import load_config
    from tokenledger.publish.versions import manifest_path
    from tokenledger.report.review import shown
    from tokenledger.storage.duck import compute_connection
    from tokenledger.storage.lake import DayWindow
    from tokenledger.storage.layout import HomeLayout

    rows = _published_rows(week)
    layout = HomeLayout.of(week)
    checked = 0
    for offset in range(7):
        day = date(2026, 11, 16 + offset)
        page = (week / "reports" / f"capacity-review-{day}.html").read_text()
        markdown = (week / "reports" / f"capacity-review-{day}.md").read_text()
        run_id = json.loads(manifest_path(layout, day).read_text())["run_id"]
        with compute_connection(week / "tmp" / "test-week-review") as con:
            load_config(con, layout)
            policy = review_of_day(con, layout, DayWindow(day), run_id).policy
        for fig in _figures(page):
            where = (str(day), fig.get("data-table"), fig.get("data-column"), fig.get("data-key"))
            assert fig["text"] in markdown or html.escape(fig["text"], quote=False) in markdown, where
            if "data-derived" in fig:
                # The growth forecast needs 14 published days; the week has `offset + 1` up to the day.
                assert fig["data-derived"] == "published days" and fig["text"] == str(offset + 1), where
                continue
            table, column, kind = fig["data-table"], fig["data-column"], fig["data-format"]
            if table == "run":
                assert fig["text"] == run_id, where
                continue
            key = fig["data-key"].split("|") if fig["data-key"] else []
            if table == "policy":
                limits = policy[key[0]]
                row = next(b for b in limits["isl_buckets"] if b["isl_bucket"] == key[1]) if len(key) > 1 else limits
            else:
                row = rows[(table, fig.get("data-day", str(day)), *key)]
            value = row[column]
            if column == "all_met" and kind == "met":  # a bucket with too few judged requests is not judged
                judged = row["isl_bucket"] == "all" or row["attainment_met"] is not None
                value = value if judged else None
            assert fig["text"] == shown(value, kind, fig.get("data-currency")), (where, value)
            if "data-verdict" in fig:
                assert column == "verdict_text" and fig["data-verdict"] == row["verdict"], where
            checked += 1
        # Every deployment of a model with requests has its verdict row, in its words and colour.
        verdicts = {tuple(f["data-key"].split("|")) for f in _figures(page)
                    if f.get("data-column") == "verdict_text" and f.get("data-verdict")}
        tokens = sql_literal(lake.table_glob(week / "lake", "infra", "token_split_daily"))
        with _connect(week, TableRef("infra", "capacity_verdict_daily")) as con:
            expected = set(con.execute(
                "SELECT v.model, v.deployment_id FROM capacity_verdict_daily v WHERE v.day = $day AND EXISTS ("
                f"SELECT 1 FROM read_parquet({tokens}) t WHERE t.day = v.day AND t.model = v.model AND t.requests > 0)",
                {"day": day}).fetchall())
        assert verdicts == expected, day
        # Per model: no line says 'met' where its SLO table says missed.
        for section in re.findall(r'<section id="model-[^"]+">.*?</section>', page, re.S):
            screen = re.sub(r"<details>.*?</details>", "", section, flags=re.S)
            slo = [f["text"] for f in _figures(screen) if f.get("data-column") == "all_met"]
            lines = [_visible_text(n) for n in re.findall(r'<p class="note">(.*?)</p>', screen, re.S)]
            if "missed" in slo:
                assert not [n for n in lines if re.search(r"\bmet\b", n)], (day, lines)
        # No number outside a marked figure: the page's text without its figures, charts and glossary.
        body = page[page.index("<body>"):page.index('<section id="glossary">')]
        body = _SPAN.sub(lambda m: " " if "data-table=" in m.group(1) or "data-derived=" in m.group(1) else m.group(0),
                         body)
        text = _STATIC_NUMBERS.sub(" ", _visible_text(body))
        text = text.replace(str(day), " ")
        # Names are not figures: models, deployments, ISL buckets and what-if scenarios (longest first).
        names = {v for (_, _, *key) in rows for v in key if re.search(r"[a-z]", v)}
        for name in sorted(names, key=len, reverse=True):
            text = text.replace(name, " ")
        assert not re.findall(r"\d[\d,.]*", text), (day, re.findall(r".{30}\d[\d,.]*.{30}", text)[:10])
    assert checked > 7 * 300


def test_gpus_needed_is_one_figure_in_the_plan_and_the_verdict(week: Path) -> None:
    # Issue 57: the plan said 4.67 where the review said 6.01. Now the verdict reads the plan's one gpus_needed (the
    # larger sizing), its GPUs in force are the plan's gpus_deployed, and the plan's surplus is their difference.
    files = {name: sql_literal(lake.table_glob(week / "lake", "infra", name))
             for name in ("capacity_plan_daily", "capacity_verdict_daily")}
    with duckdb.connect() as con:
        pairs = con.execute(
            f"SELECT p.day, p.deployment_id, p.gpus_needed, v.gpus_needed, p.gpus_deployed, v.gpus_in_force, "
            f"p.gpu_surplus, greatest(p.gpus_needed_erlang_c, p.gpus_needed_goodput) "
            f"FROM read_parquet({files['capacity_plan_daily']}) AS p "
            f"JOIN read_parquet({files['capacity_verdict_daily']}) AS v USING (day, model, deployment_id)").fetchall()
    assert len(pairs) == 7 * 3  # every GPU deployment of every day has both rows
    for day, deployment, planned, verdict, deployed, in_force, surplus, larger in pairs:
        assert planned is not None and verdict == planned and planned == larger, (day, deployment)
        assert in_force == deployed and surplus == pytest.approx(deployed - planned), (day, deployment)
