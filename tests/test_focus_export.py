"""focus.cost_and_usage_daily: the tenant showback as a FOCUS 1.2 dataset, on a day worked out by hand, on the
messy day of tests/test_cost.py, and read back through tokenledger's own FOCUS reader.

The small day is 2026-11-16 in the conftest inventory plus one hosted-API deployment, claude-api (Anthropic; its
sheet in costs.yaml: input 3, cache read 0.30, cache write 3.75, one-hour cache write 6, output 15 USD per 1M
tokens; all four model properties declared). The bill has one line: 249.00 USD of GPU tagged to m70-h100. Every
expected number is worked out here.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import (
    COSTS_YAML,
    DEPLOYMENTS_YAML,
    SLO_YAML,
    failure_text,
    gateway_dir,
    materialize,
    request,
    rows,
    write_jsonl,
)
from tests.test_cost import charge, write_day
from tokenledger.contracts import load_contract
from tokenledger.expectations import CRITICAL, WARNING, validate_files
from tokenledger.publish.warehouse import connect
from tokenledger.storage.duck import statement, used_params
from tokenledger.storage.layout import HomeLayout

DAY = "2026-11-16"

CLAUDE = """\
  - deployment_id: claude-api
    model: claude
    kind: api
    provider: anthropic
    model_version: "20250514"
    model_developer: Anthropic
    model_family: Claude Sonnet
    valid_from: 2026-11-01
"""

CLAUDE_SHEET = """\
    api_prices:
      claude: {input_per_mtok: 3, cache_read_per_mtok: 0.30, cache_write_per_mtok: 3.75,
               cache_write_1h_per_mtok: 6, output_per_mtok: 15}
"""

BILL_COLUMNS = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "EffectiveCost", "BilledCost",
                "BillingCurrency", "ChargeCategory", "ServiceCategory", "ServiceName", "ResourceId", "SkuId", "Tags"]


def _small_day(home: Path) -> None:
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML + CLAUDE)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML + CLAUDE_SHEET)
    with (home / "raw" / "billing" / "focus.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(BILL_COLUMNS)
        w.writerow([f"{DAY} 00:00:00", "2026-11-17 00:00:00", "2026-11-01 00:00:00", "249.00", "249.00", "USD",
                    "Usage", "Compute", "Amazon EC2", "i-m70-1", "p5.48xlarge",
                    '{"tokenledger:deployment": "m70-h100"}'])
    claude = {"model": "claude", "deployment_id": "claude-api"}
    write_jsonl(gateway_dir(home, DAY) / "requests.jsonl", [
        # m70, weights 0.1 : 1 : 5. team-a: 400 cached, 600 uncached, 50 output: 40 + 600 + 250 = 890 weighted.
        request("a1", tenant_id="team-a"),
        # team-b: 1,000 cached, 1,000 uncached, 100 output: 100 + 1,000 + 500 = 1,600 weighted (2,490 in all).
        request("b1", tenant_id="team-b", input_tokens=2000, cached_input_tokens=1000, output_tokens=100),
        # claude, team-a: 6,000 cache reads, 2,000 cache writes (500 of them one-hour), 2,000 uncached, 400 output
        # of which 150 reasoning.
        request("c1", **claude, tenant_id="team-a", input_tokens=10000, cached_input_tokens=6000,
                cache_write_tokens=2000, cache_write_1h_tokens=500, output_tokens=400, reasoning_tokens=150),
        # claude, team-b: 2,000 uncached input, 100 output.
        request("c2", **claude, tenant_id="team-b", input_tokens=2000, cached_input_tokens=0, output_tokens=100),
    ])


@pytest.fixture(scope="module")
def small_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small day run whole (checks and publishing included), once for the module."""
    home = tmp_path_factory.mktemp("focus") / "home"
    (home / "config").mkdir(parents=True)
    (home / "raw" / "billing").mkdir(parents=True)
    (home / "config" / "slo.yaml").write_text(SLO_YAML)
    _small_day(home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(DAY)
        assert result.success, failure_text(result)
    return home


def d(text: str) -> Decimal:
    return Decimal(text).quantize(Decimal("1e-12"))


def _focus(home: Path, where: str = "true") -> list[dict[str, Any]]:
    """The day's rows as written, columns and all (the day is in ChargePeriodStart, not read from the path)."""
    path = home / "lake" / "focus" / "cost_and_usage_daily" / f"day={DAY}" / "data.parquet"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cur = con.execute(f"SELECT * FROM read_parquet($p, hive_partitioning = false) WHERE {where} "
                      "ORDER BY BillingCurrency, SkuId, BillingAccountId, ResourceId", {"p": str(path)})
    names = [c[0] for c in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_the_small_day_by_hand(small_day: Path) -> None:
    got = {(r["BillingAccountId"], r["ResourceId"], r["x_TokenClass"]): (
        r["ConsumedQuantity"], r["PricingQuantity"], r["EffectiveCost"], r["x_EffectiveUnitPrice"])
        for r in _focus(small_day)}
    # m70: 249.00 over 2,490 weighted tokens is 0.10 a weighted token: a cached token 0.01 (10,000 per 1M tokens),
    # an uncached one 0.10 (100,000), an output one 0.50 (500,000). Claude: its sheet's prices, token by token.
    assert got == {
        ("team-a", "m70-h100", "output"): (d("50"), d("0.00005"), d("25"), pytest.approx(500_000)),
        ("team-a", "m70-h100", "input_uncached"): (d("600"), d("0.0006"), d("60"), pytest.approx(100_000)),
        ("team-a", "m70-h100", "input_cached"): (d("400"), d("0.0004"), d("4"), pytest.approx(10_000)),
        ("team-b", "m70-h100", "output"): (d("100"), d("0.0001"), d("50"), pytest.approx(500_000)),
        ("team-b", "m70-h100", "input_uncached"): (d("1000"), d("0.001"), d("100"), pytest.approx(100_000)),
        ("team-b", "m70-h100", "input_cached"): (d("1000"), d("0.001"), d("10"), pytest.approx(10_000)),
        # 400 * 15 = 6,000; 2,000 * 3 = 6,000; 1,500 * 3.75 = 5,625; 500 * 6 = 3,000; 6,000 * 0.30 = 1,800 per 1M
        # team-a's 400 output tokens are 250 output and 150 reasoning, both weighted as output (15): 250 * 15 = 3,750
        # and 150 * 15 = 2,250 per 1M, 0.00375 + 0.00225 = 0.006, its output cost before the split.
        ("team-a", "claude-api", "output"): (d("250"), d("0.00025"), d("0.00375"), pytest.approx(15)),
        ("team-a", "claude-api", "reasoning"): (d("150"), d("0.00015"), d("0.00225"), pytest.approx(15)),
        ("team-a", "claude-api", "input_uncached"): (d("2000"), d("0.002"), d("0.006"), pytest.approx(3)),
        ("team-a", "claude-api", "input_cache_write"): (d("1500"), d("0.0015"), d("0.005625"), pytest.approx(3.75)),
        ("team-a", "claude-api", "input_cache_write_1h"): (d("500"), d("0.0005"), d("0.003"), pytest.approx(6)),
        ("team-a", "claude-api", "input_cached"): (d("6000"), d("0.006"), d("0.0018"), pytest.approx(0.30)),
        ("team-b", "claude-api", "output"): (d("100"), d("0.0001"), d("0.0015"), pytest.approx(15)),
        ("team-b", "claude-api", "input_uncached"): (d("2000"), d("0.002"), d("0.006"), pytest.approx(3)),
    }
    # The showback they split: m70 890 : 1,600 of 249.00; claude 0.022425 (3,750 + 2,250 + 6,000 + 5,625 + 3,000 +
    # 1,800 per 1M tokens) and 0.0075 (6,000 + 1,500), its sheet cost.
    showback = {(r["model"], r["tenant_id"]): r["cost"] for r in rows(small_day, "finance", "tenant_showback_daily",
                                                                      DAY)}
    assert showback == {("m70", "team-a"): d("89"), ("m70", "team-b"): d("160"),
                        ("claude", "team-a"): d("0.022425"), ("claude", "team-b"): d("0.0075")}


def test_every_focus_column_of_one_row(small_day: Path) -> None:
    (row,) = _focus(small_day, where="BillingAccountId = 'team-a' AND SkuId = 'claude/input_cache_write_1h'")
    start, end = datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 17, tzinfo=UTC)
    assert row == {
        "BilledCost": d("0.003"), "BillingAccountId": "team-a", "BillingAccountName": None,
        "BillingCurrency": "USD", "BillingPeriodEnd": datetime(2026, 12, 1, tzinfo=UTC),
        "BillingPeriodStart": datetime(2026, 11, 1, tzinfo=UTC), "ChargeCategory": "Usage", "ChargeClass": None,
        "ChargeDescription": "One-Hour Cache Write Tokens of claude on deployment claude-api for tenant team-a",
        "ChargeFrequency": "Usage-Based", "ChargePeriodEnd": end, "ChargePeriodStart": start,
        "ConsumedQuantity": d("500"), "ConsumedUnit": "Tokens", "ContractedCost": d("0.003"),
        "EffectiveCost": d("0.003"), "InvoiceId": None, "InvoiceIssuerName": "tokenledger", "ListCost": d("0.003"),
        "PricingQuantity": d("0.0005"), "PricingUnit": "1000000 Tokens", "ProviderName": "tokenledger",
        "PublisherName": "anthropic", "ResourceId": "claude-api", "ResourceName": None,
        "ResourceType": "Hosted Model API", "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "LLM Inference", "ServiceSubcategory": "Generative AI",
        "SkuId": "claude/input_cache_write_1h", "SkuMeter": "One-Hour Cache Write Tokens",
        "SkuPriceDetails": '{"ModelDeveloper":"Anthropic","ModelFamily":"Claude Sonnet","ModelId":"claude",'
                           '"ModelVersion":"20250514"}',
        "SkuPriceId": "claude/input_cache_write_1h@20250514",
        "Tags": '{"tokenledger:tenant":"team-a","tokenledger:model":"claude","tokenledger:deployment":"claude-api"}',
        "x_Model": "claude", "x_TokenClass": "input_cache_write_1h", "x_EffectiveUnitPrice": pytest.approx(6.0),
        "x_PriceVersion": "p1",
    }
    (m70,) = _focus(small_day, where="BillingAccountId = 'team-a' AND SkuId = 'm70/output'")
    assert (m70["PublisherName"], m70["ResourceType"]) == ("tokenledger", "Model Deployment")
    # m70-h100 declares no model_version, developer or family: ModelId only, and SkuPriceId is SkuId.
    assert (m70["SkuPriceDetails"], m70["SkuPriceId"], m70["SkuMeter"]) == ('{"ModelId":"m70"}', "m70/output",
                                                                           "Output Tokens")
    (reasoning,) = _focus(small_day, where="SkuId = 'claude/reasoning'")
    assert (reasoning["SkuMeter"], reasoning["SkuPriceId"], reasoning["ChargeDescription"]) == (
        "Reasoning Tokens", "claude/reasoning@20250514",
        "Reasoning Tokens of claude on deployment claude-api for tenant team-a")


def test_the_export_is_published_and_in_the_warehouse(small_day: Path) -> None:
    files = sorted((small_day / "exports" / "focus" / "cost_and_usage_daily").rglob("*.parquet"))
    assert len(files) == 1
    con = duckdb.connect()
    published = con.execute("SELECT sum(EffectiveCost), count(*) FROM read_parquet($f)",
                            {"f": [str(f) for f in files]}).fetchone()
    assert published == (d("249") + d("0.029925"), 14)  # 13 rows before team-a's claude output was split
    with connect(HomeLayout.of(small_day)) as warehouse:  # its views read paths relative to the home
        assert warehouse.execute("SELECT count(*) FROM focus.cost_and_usage_daily").fetchone() == (14,)


def test_the_contract_catches_what_focus_forbids(small_day: Path, tmp_path: Path) -> None:
    source = small_day / "lake" / "focus" / "cost_and_usage_daily" / f"day={DAY}" / "data.parquet"
    broken = tmp_path / "broken.parquet"
    con = duckdb.connect()
    # m70/output (two rows, one per tenant) becomes a Purchase; claude/output lists at 1 more than it cost; a billing
    # period goes missing; a currency is written in lower case.
    con.execute("COPY (SELECT * REPLACE ("
                "  CASE WHEN SkuId = 'm70/output' THEN 'Purchase' ELSE ChargeCategory END AS ChargeCategory,"
                "  CASE WHEN SkuId = 'claude/output' THEN ListCost + 1 ELSE ListCost END AS ListCost,"
                "  CASE WHEN SkuId = 'm70/input_cached' THEN NULL ELSE BillingPeriodStart END AS BillingPeriodStart,"
                "  CASE WHEN SkuId = 'claude/input_cached' THEN 'usd' ELSE BillingCurrency END AS BillingCurrency)"
                " FROM read_parquet($s, hive_partitioning = false)) TO $t (FORMAT PARQUET)",
                {"s": str(source), "t": str(broken)})
    table = load_contract("focus_cost_and_usage_daily").table()
    validation = validate_files(con, "focus.cost_and_usage_daily", table, [broken])
    assert {f.rule.split(" (")[0]: f.unexpected for f in validation.failed(CRITICAL)} == {
        "ChargeCategory in {Usage}": 2, "costs_agree": 2, "BillingPeriodStart not null": 2,
        "BillingCurrency matches ^[A-Z]{3}$": 1}
    assert not validate_files(con, "focus.cost_and_usage_daily", table, [source]).failed(CRITICAL)



def test_the_contract_checks_sku_price_ids_and_their_details(small_day: Path, tmp_path: Path) -> None:
    source = small_day / "lake" / "focus" / "cost_and_usage_daily" / f"day={DAY}" / "data.parquet"
    broken = tmp_path / "broken.parquet"
    con = duckdb.connect()
    # team-b's claude/output row declares another family: its SkuPriceId claude/output@20250514 now has two
    # SkuPriceDetails (a warning). Both m70/input_cached rows (team-a, team-b) lose nothing but get a SkuPriceId
    # with a version their details do not have (an error).
    con.execute("COPY (SELECT * REPLACE ("
                "  CASE WHEN SkuId = 'claude/output' AND BillingAccountId = 'team-b'"
                "       THEN json_merge_patch(SkuPriceDetails, '{\"ModelFamily\": \"Claude Opus\"}')"
                "       ELSE SkuPriceDetails END AS SkuPriceDetails,"
                "  CASE WHEN SkuId = 'm70/input_cached' THEN SkuId || '@v9' ELSE SkuPriceId END AS SkuPriceId)"
                " FROM read_parquet($s, hive_partitioning = false)) TO $t (FORMAT PARQUET)",
                {"s": str(source), "t": str(broken)})
    table = load_contract("focus_cost_and_usage_daily").table()
    validation = validate_files(con, "focus.cost_and_usage_daily", table, [broken])
    assert {f.rule.split(" (")[0]: f.unexpected for f in validation.failed(CRITICAL)} == {
        "sku_names_model_and_class": 2}
    assert {f.rule.split(" (")[0]: f.unexpected for f in validation.failed(WARNING)} == {
        "one_sku_price_details_per_sku_price_id": 1}
    assert not validate_files(con, "focus.cost_and_usage_daily", table, [source]).failed(WARNING)


def _read_back(export_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[tuple, tuple]:
    """Put the published export in a fresh home's raw/billing/, ingest it as a bill (core/billing_charges) and sum
    the day's cost per (model, tenant, currency) from the Tags the reader kept."""
    reader = tmp_path / "reader"
    (reader / "raw" / "billing").mkdir(parents=True)
    shutil.copytree(export_home / "config", reader / "config")
    for i, f in enumerate(sorted((export_home / "exports" / "focus" / "cost_and_usage_daily").rglob("*.parquet"))):
        shutil.copy(f, reader / "raw" / "billing" / f"tokenledger-focus-{i}.parquet")
    monkeypatch.setenv("TOKENLEDGER_HOME", str(reader))
    result = materialize(DAY, selection=["core/billing_charges"])
    assert result.success, failure_text(result)
    (recon,) = rows(reader, "quality_parts", "ingest_reconciliation_billing", DAY)
    assert (recon["rows_read"], recon["rows_quarantined"], recon["duplicates_merged"]) == (
        len(_focus(export_home)), 0, 0)
    totals: dict[tuple, list] = defaultdict(lambda: [Decimal(0), Decimal(0), 0.0])
    for r in rows(reader, "core", "billing_charges", DAY):
        assert r["day_fraction"] == 1.0 and r["ChargeCategory"] == "Usage"
        tags = json.loads(r["Tags"])
        key = (tags["tokenledger:model"], tags["tokenledger:tenant"], r["BillingCurrency"])
        totals[key][0] += r["effective_cost_day"]
        totals[key][1] += r["billed_cost_day"]
        totals[key][2] += r["consumed_quantity_day"]
    return {k: tuple(v) for k, v in totals.items()}


def test_read_back_as_a_bill_it_gives_the_showback_totals(small_day: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    read = _read_back(small_day, tmp_path, monkeypatch)
    # Tokens: m70 team-a 1,000 input + 50 output; team-b 2,000 + 100; claude team-a 10,000 + 400; team-b 2,100.
    assert read == {
        ("m70", "team-a", "USD"): (d("89"), d("89"), 1050.0),
        ("m70", "team-b", "USD"): (d("160"), d("160"), 2100.0),
        ("claude", "team-a", "USD"): (d("0.022425"), d("0.022425"), 10400.0),
        ("claude", "team-b", "USD"): (d("0.0075"), d("0.0075"), 2100.0),
    }


# The messy day of tests/test_cost.py: shared costs spread by GPU-hours, a credit, moe on two deployments, team-c
# on both, rounding residuals at every split, and a second currency.
EUR_BILL = [charge("100.00", currency="EUR", sku="p5e.48xlarge", tag="moe-a"),
            charge("9.60", currency="EUR", service="Networking", service_name="Transit")]


@pytest.fixture(scope="module")
def messy_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("focus_messy") / "home"
    (home / "config").mkdir(parents=True)
    (home / "raw" / "billing").mkdir(parents=True)
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML)
    (home / "config" / "slo.yaml").write_text(SLO_YAML)
    write_day(home, extra_bill=EUR_BILL)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        result = materialize(DAY)
        assert result.success, failure_text(result)
    return home


def test_a_tenants_parts_add_up_to_its_showback_cost_exactly(messy_day: Path) -> None:
    showback = {(r["model"], r["tenant_id"], r["currency"]): r["cost"]
                for r in rows(messy_day, "finance", "tenant_showback_daily", DAY)}
    parts: dict[tuple, Decimal] = defaultdict(Decimal)
    for r in _focus(messy_day):
        parts[(r["x_Model"], r["BillingAccountId"], r["BillingCurrency"])] += r["EffectiveCost"]
    assert dict(parts) == showback
    assert len(showback) == 10  # m70 (team-a, team-b), m8 (team-a), moe (team-c, team-d), in USD and EUR


def test_team_c_on_two_deployments_by_hand(messy_day: Path) -> None:
    got = {(r["ResourceId"], r["x_TokenClass"]): (r["ConsumedQuantity"], r["EffectiveCost"])
           for r in _focus(messy_day, where="BillingAccountId = 'team-c' AND BillingCurrency = 'USD'")}
    # team-c's moe cost is 248.64 - 47.903119266055 = 200.736880733945 over 4,400 weighted tokens: moe-a 2,000
    # cached (200 weighted), 2,000 uncached (2,000), 200 output (1,000); moe-b 1,000 uncached (1,000), 40 output
    # (200). Each part is rounded to 1e-12; moe-a's uncached input, the largest, takes the rest.
    cost = Fraction("200.736880733945")
    parts = {("moe-a", "input_cached"): 200, ("moe-b", "input_uncached"): 1000, ("moe-a", "output"): 1000,
             ("moe-b", "output"): 200}
    for key, weighted in parts.items():
        assert abs(Fraction(got[key][1]) - cost * weighted / 4400) <= Fraction(1, 10**12), key
    residual = d("200.736880733945") - sum(got[k][1] for k in parts)
    assert got[("moe-a", "input_uncached")] == (d("2000"), residual)
    assert {k: v[0] for k, v in got.items()} == {
        ("moe-a", "input_cached"): d("2000"), ("moe-a", "input_uncached"): d("2000"), ("moe-a", "output"): d("200"),
        ("moe-b", "input_uncached"): d("1000"), ("moe-b", "output"): d("40")}


def test_a_class_costs_the_same_per_token_for_every_tenant_and_deployment(messy_day: Path) -> None:
    prices: dict[tuple, list[float]] = defaultdict(list)
    for r in _focus(messy_day):
        prices[(r["SkuPriceId"], r["BillingCurrency"])].append(r["x_EffectiveUnitPrice"])
    for key, seen in prices.items():
        assert max(seen) == pytest.approx(min(seen), rel=1e-9), key
    # m70 in USD: 475.80 over 7,970 weighted tokens, a cached token weighs 0.1, an output token 5.
    assert prices[("m70/input_cached", "USD")][0] == pytest.approx(475.80 / 7970 * 0.1e6, rel=1e-9)
    assert prices[("m70/output", "USD")][0] == pytest.approx(475.80 / 7970 * 5e6, rel=1e-9)


def test_the_messy_day_reads_back_as_its_showback(messy_day: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    read = _read_back(messy_day, tmp_path, monkeypatch)
    showback = {(r["model"], r["tenant_id"], r["currency"]): r["cost"]
                for r in rows(messy_day, "finance", "tenant_showback_daily", DAY)}
    assert {k: v[0] for k, v in read.items()} == showback
    assert {k: v[1] for k, v in read.items()} == showback



def _split(usage: str, showback: str) -> dict[tuple, tuple]:
    """sql/cost/focus_cost_and_usage_daily.sql on small hand-made tables: model m with weights output 5, uncached 1 (the
    rest 0.1), deployment d1 whose last version of the day declares a version and a developer but no family (an
    earlier version did). `usage` and `showback` are VALUES rows of (tenant, output, reasoning, uncached) and
    (tenant, cost)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE day_usage AS SELECT tenant_id, 'm' AS model, 'd1' AS deployment_id, "
                "output_produced::BIGINT AS output_produced, reasoning_produced::BIGINT AS reasoning_produced, "
                "input_recomputed::BIGINT AS input_recomputed, 0::BIGINT AS input_cache_write, "
                "0::BIGINT AS input_cache_write_1h, 0::BIGINT AS input_cached "
                f"FROM (VALUES {usage}) AS t(tenant_id, output_produced, reasoning_produced, input_recomputed)")
    con.execute("CREATE TABLE day_token_class_weights AS SELECT 'm' AS model, 0.1 AS w_cached, 1.0 AS w_uncached, "
                "0.1 AS w_cache_write, 0.1 AS w_cache_write_1h, 5.0 AS w_output")
    con.execute("CREATE TABLE day_showback AS SELECT tenant_id, 'm' AS model, 'USD' AS currency, 'p1' AS "
                f"price_version, cost::DECIMAL(38, 12) AS cost FROM (VALUES {showback}) AS t(tenant_id, cost)")
    con.execute("CREATE TABLE day_deployments AS SELECT * FROM (VALUES "
                "('d1', 'gpu', NULL, 'v1', 'Meta', 'Llama', TIMESTAMPTZ '2026-11-16 12:00:00+00'), "
                "('d1', 'gpu', NULL, 'v2', 'Meta', NULL, TIMESTAMPTZ '2026-11-17 00:00:00+00')) AS t(deployment_id, "
                "kind, provider, model_version, model_developer, model_family, in_force_to)")
    text = statement("focus_cost_and_usage_daily")
    params = {"day_start": f"{DAY}T00:00:00Z", "day_end": "2026-11-17T00:00:00Z", "provider_name": "tokenledger"}
    cur = con.execute(text, used_params(text, params))
    names = [c[0] for c in cur.description]
    return {(r["BillingAccountId"], r["x_TokenClass"]): (r["SkuMeter"], r["ConsumedQuantity"], r["EffectiveCost"],
                                                         r["SkuPriceId"], r["SkuPriceDetails"])
            for r in (dict(zip(names, row, strict=True)) for row in cur.fetchall())}


def test_reasoning_is_split_from_output_weighted_as_output() -> None:
    # t1 over two hours: 100 output (30 reasoning) and 20 output (reasoning not reported), 300 uncached input.
    # t2: a source that reports 50 reasoning tokens within 40 output: all 40 are reasoning, no output row.
    # t3: 10 output, reasoning never reported: an output row only, no reasoning row.
    got = _split("('t1', 100, 30, 300), ('t1', 20, NULL, 0), ('t2', 40, 50, 0), ('t3', 10, NULL, 0)",
                 "('t1', 1.00), ('t2', 0.20), ('t3', 0.05)")
    # t1: 90 output * 5 = 450, 30 reasoning * 5 = 150, 300 uncached * 1 = 300, 900 weighted tokens of 1.00 USD:
    # 0.5, 0.166666666667 (1/6 rounded to 1e-12) and 0.333333333333, which add up to 1.000000000000; output and
    # reasoning together 0.666666666667, 120 tokens, what the single output row of 120 tokens cost before the split.
    # SkuPriceDetails of d1 as its last version stood: v2 and Meta, no family (v1's Llama is not carried over).
    details = '{"ModelDeveloper":"Meta","ModelId":"m","ModelVersion":"v2"}'
    assert got == {
        ("t1", "output"): ("Output Tokens", d("90"), d("0.5"), "m/output@v2", details),
        ("t1", "reasoning"): ("Reasoning Tokens", d("30"), d("0.166666666667"), "m/reasoning@v2", details),
        ("t1", "input_uncached"): ("Uncached Input Tokens", d("300"), d("0.333333333333"), "m/input_uncached@v2",
                                   details),
        ("t2", "reasoning"): ("Reasoning Tokens", d("40"), d("0.2"), "m/reasoning@v2", details),
        ("t3", "output"): ("Output Tokens", d("10"), d("0.05"), "m/output@v2", details),
    }
    assert sum(v[2] for k, v in got.items() if k[0] == "t1") == d("1.00")
