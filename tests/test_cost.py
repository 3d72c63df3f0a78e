"""Cost allocation, cost per 1M tokens, tenant showback and reconciliation on a day worked out by hand.

The day is 2026-11-16 in the conftest inventory: m70-h100 (cloud, 16 GPUs until noon then 24: 480 GPU-hours),
m8-onprem (on-premises, 4 L40S all day: 96 GPU-hours, costed by the rate card onprem-l40s), moe-a and moe-b
(cloud, 8 H200 each: 192 GPU-hours each). 960 GPU-hours in all, so a shared cost spread by GPU-hours goes
50% / 10% / 20% / 20%. Every expected number is worked out here from the rows written, never read back.
"""

from __future__ import annotations

import csv
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import failure_text, gateway_dir, make_home, materialize, request, rows, write_jsonl
from tokenledger.storage.duck import sql_text

DAY = "2026-11-16"

COSTS_YAML = """\
versions:
  - price_version: p1
    valid_from: 2024-01-01
    currency: USD
    deployment_tag_keys: ["tokenledger:deployment"]
    shared_tag_value: shared
    shared_cost_key: gpu_hours
    category_rules:
      - {category: gpu, service_category: Compute, sku_id: "p5*"}
      - {category: cpu, service_category: Compute}
      - {category: network, service_category: Networking}
      - {category: storage, service_category: Storage}
      - {category: platform}
    token_class_weights: {cached: 0.1, recomputed: 1.0, output: 5.0}
    rate_cards:
      onprem-l40s: {capex_per_gpu: 11000, lifetime_hours: 35040, power_kw_per_gpu: 0.35, pue: 1.35,
                    price_per_kwh: 0.11, opex_per_gpu_hour: 0.12}
"""

FOCUS_COLUMNS = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "EffectiveCost", "BilledCost",
                 "BillingCurrency", "ChargeCategory", "ServiceCategory", "ServiceName", "ResourceId", "SkuId", "Tags"]


def charge(cost: str, *, billed: str | None = None, start: str = f"{DAY} 00:00:00",
           end: str = "2026-11-17 00:00:00", currency: str = "USD", charge_category: str = "Usage",
           service: str = "Compute", service_name: str = "Amazon EC2", resource: str | None = None,
           sku: str | None = None, tag: str | None = None) -> dict[str, Any]:
    """One FOCUS row; `tag` is the value of tokenledger:deployment (None: no Tags at all)."""
    return {"ChargePeriodStart": start, "ChargePeriodEnd": end, "BillingPeriodStart": "2026-11-01 00:00:00",
            "EffectiveCost": cost, "BilledCost": billed or cost, "BillingCurrency": currency,
            "ChargeCategory": charge_category, "ServiceCategory": service, "ServiceName": service_name,
            "ResourceId": resource, "SkuId": sku,
            "Tags": None if tag is None else f'{{"tokenledger:deployment": "{tag}", "team": "ml"}}'}


def write_focus(home: Path, records: list[dict[str, Any]], name: str = "focus-2026-11.csv") -> None:
    path = home / "raw" / "billing" / name
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, FOCUS_COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("NULL" if v is None else v) for k, v in r.items()} for r in records)


# FOCUS lines 2-9 of the hand-worked day, with what each is expected to become.
BILL = [
    # 2: a day of GPU for m70, tagged: m70 gpu 480 (billed 600: the savings plan's discount is in EffectiveCost)
    charge("480.00", billed="600.00", resource="i-m70-1", sku="p5.48xlarge", tag="m70-h100"),
    # 3: a day of GPU for moe-a, tagged: moe-a gpu 240
    charge("240.00", billed="300.00", resource="i-moe-a-1", sku="p5e.48xlarge", tag="moe-a"),
    # 4: untagged CPU whose ResourceId matches m70's pattern i-m70-*: m70 cpu 12
    charge("12.00", resource="i-m70-router", sku="c7i.2xlarge"),
    # 5: the shared pool's network, tagged `shared`: spread 50/10/20/20 -> 9.60, 1.92, 3.84, 3.84
    charge("19.20", service="Networking", service_name="AWS Data Transfer", sku="DataTransfer-Out-Bytes",
           tag="shared"),
    # 6: untagged, and no pattern matches: shared platform 2.40 -> 1.20, 0.24, 0.48, 0.48
    charge("2.40", service="Management and Governance", service_name="Amazon EKS", resource="cluster/prod"),
    # 7: a credit over three days (15th-17th) tagged to m70: a third, -30, on the 16th, gpu (Compute, p5*)
    charge("-90.00", start="2026-11-15 00:00:00", end="2026-11-18 00:00:00", charge_category="Credit",
           sku="p5.48xlarge", tag="m70-h100"),
    # 8: tagged to a deployment the inventory does not have: unallocated storage 5
    charge("5.00", service="Storage", service_name="Amazon S3", resource="bucket-old", tag="old-llama"),
    # 9: six hours of storage across midnight, untagged, matched by ResourceId: half, 3, is m70 storage on the 16th
    charge("6.00", start=f"{DAY} 21:00:00", end="2026-11-17 03:00:00", service="Storage",
           service_name="Amazon EBS", resource="i-m70-weights", sku="EBS:VolumeUsage.gp3"),
]

# The rate card onprem-l40s, by hand: 11,000 / 35,040 h of capex + 0.35 kW * 1.35 PUE * $0.11/kWh + $0.12 opex
# = 0.313926940639... + 0.051975 + 0.12 = $0.485901940639.../GPU-hour; m8-onprem runs 4 GPUs * 24 h = 96 GPU-hours.
RATE = Fraction(11000, 35040) + Fraction("0.35") * Fraction("1.35") * Fraction("0.11") + Fraction("0.12")
M8_RATE_CARD = Decimal("46.646586301370")  # 96 * RATE = 46.64658630136986..., kept to 1e-12


def none(**fields: Any) -> dict[str, Any]:
    """Fields of a request with no output token: no TTFT, queue or ITL."""
    return {"output_tokens": 0, "ttft_ms": ..., "queue_ms": ..., "itl_max_ms": ..., **fields}


TRAFFIC = [
    # m70 on m70-h100. team-a: three compliant requests of 1,000 input (400 cached) and 50 output ...
    *[request(f"a{i}", tenant_id="team-a") for i in range(3)],
    # ... and one successful but too slow (TTFT 1,500 ms > 1,000 ms in bucket 0-4k): produced, not compliant.
    request("a3", tenant_id="team-a", input_tokens=2000, cached_input_tokens=0, output_tokens=100, ttft_ms=1500.0,
            e2e_ms=3000.0),
    # team-b: one compliant request, one error (reached the model, produced nothing), one rejected (never reached).
    request("b0", tenant_id="team-b", input_tokens=4000, cached_input_tokens=3000, output_tokens=200),
    request("b1", tenant_id="team-b", status="error", input_tokens=500, cached_input_tokens=0, output_tokens=10),
    request("b2", tenant_id="team-b", **none(status="rejected", input_tokens=700, cached_input_tokens=0,
                                             e2e_ms=...)),
    # m8 on m8-onprem: one compliant request of team-a.
    request("c0", model="m8", deployment_id="m8-onprem", tenant_id="team-a", input_tokens=800,
            cached_input_tokens=0, output_tokens=80),
    # moe: team-c twice on moe-a, then team-c and team-d on moe-b; team-d's ITL (150 ms > 100 ms) is not compliant.
    *[request(f"d{i}", model="moe", deployment_id="moe-a", tenant_id="team-c", input_tokens=2000,
              cached_input_tokens=1000, output_tokens=100) for i in range(2)],
    request("e0", model="moe", deployment_id="moe-b", tenant_id="team-c", input_tokens=1000, cached_input_tokens=0,
            output_tokens=40),
    request("e1", model="moe", deployment_id="moe-b", tenant_id="team-d", input_tokens=3000,
            cached_input_tokens=2500, output_tokens=60, itl_max_ms=150.0),
]


# The cost stage and what it reads; most tests run only these (the whole job, publishing included, where exports
# are asserted).
ALL_BUT_RECONCILIATION = ["core/deployments_daily", "core/gateway_requests", "core/billing_charges",
                          "core/usage_hourly", "core/api_request_costs", "core/cost_lines",
                          "core/cost_allocation_daily",
                          # the usage basis and energy of finance.cost_per_mtok_daily (no telemetry: nominal)
                          "core/gpu_samples", "infra/goodput_hourly", "infra/gpu_usage_hourly",
                          "infra/gpu_usage_daily"]
COST = ALL_BUT_RECONCILIATION + ["finance/cost_per_mtok_daily", "finance/tenant_showback_daily",
                                 "finance/cost_reconciliation_daily"]


def write_day(home: Path, extra_bill: list[dict[str, Any]] | None = None) -> None:
    (home / "config" / "costs.yaml").write_text(COSTS_YAML)
    write_focus(home, BILL + (extra_bill or []))
    write_jsonl(gateway_dir(home, DAY) / "requests.jsonl", TRAFFIC)


def by_deployment(home: Path, currency: str = "USD") -> dict[str, dict[str, Any]]:
    return {r["deployment_id"]: r for r in rows(home, "finance", "cost_per_mtok_daily", DAY,
                                                 where=f"currency = '{currency}'")}


def d(text: str) -> Decimal:
    return Decimal(text).quantize(Decimal("1e-12"))


@pytest.fixture(scope="module")
def worked_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worked day through the cost stage, once for the module (its tests only read it), in a home as the `home`
    fixture makes it."""
    home = make_home(tmp_path_factory.mktemp("worked_day") / "home")
    write_day(home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        mp.setenv("TOKENLEDGER_IDLE_DAYS", "all")
        result = materialize(DAY, selection=COST)
    assert result.success, failure_text(result)
    return home


def test_cost_lines_are_placed_and_categorized(worked_day: Path) -> None:
    lines = {(r["source"], r["source_line"]): r for r in rows(worked_day, "core", "cost_lines", DAY)}
    got = {k: (r["placement"], r["deployment_id"], r["category"], r["effective_cost_day"]) for k, r in lines.items()}
    assert got == {
        ("focus", 2): ("tagged", "m70-h100", "gpu", d("480")),
        ("focus", 3): ("tagged", "moe-a", "gpu", d("240")),
        ("focus", 4): ("resource_id", "m70-h100", "cpu", d("12")),
        ("focus", 5): ("shared", None, "network", d("19.2")),
        ("focus", 6): ("shared", None, "platform", d("2.4")),
        ("focus", 7): ("tagged", "m70-h100", "gpu", d("-30")),
        ("focus", 8): ("unallocated", None, "storage", d("5")),
        ("focus", 9): ("resource_id", "m70-h100", "storage", d("3")),
        # the on-premises deployment's rate-card line points at its version in deployments.yaml (line 22)
        ("rate_card", 22): ("tagged", "m8-onprem", "gpu", M8_RATE_CARD),
    }
    assert lines[("focus", 8)]["placement_reason"] == \
        "tag tokenledger:deployment = old-llama names no deployment in force on the day"
    assert lines[("focus", 4)]["placement_reason"] == "ResourceId matches i-m70-* of m70-h100"
    card = lines[("rate_card", 22)]
    assert (card["ResourceId"], card["SkuId"], card["currency"], card["ServiceCategory"], card["ChargeCategory"]) \
        == ("rate-card:onprem-l40s:m8-onprem", "onprem-l40s", "USD", "Compute", "Usage")
    assert abs(Fraction(card["effective_cost_day"]) - 96 * RATE) < Fraction(1, 10**12)
    assert {r["price_version"] for r in lines.values()} == {"p1"}


def test_every_published_cost_column_of_the_worked_day(worked_day: Path) -> None:
    got = by_deployment(worked_day)
    # Costs by category. Shared: network 19.20 and platform 2.40, spread by GPU-hours 480/96/192/192 of 960.
    # m70-h100: gpu 480 - 30 (credit) = 450, cpu 12, network 9.60, storage 3, platform 1.20 = 475.80
    # m8-onprem: gpu 46.646586301370 (rate card), network 1.92, platform 0.24 = 48.806586301370
    # moe-a: gpu 240, network 3.84, platform 0.48 = 244.32; moe-b: network 3.84, platform 0.48 = 4.32
    costs = {dep: tuple(r[c] for c in ("cost_gpu", "cost_cpu", "cost_network", "cost_storage", "cost_platform",
                                       "cost_total")) for dep, r in got.items()}
    assert costs == {
        "m70-h100": (d("450"), d("12"), d("9.6"), d("3"), d("1.2"), d("475.8")),
        "m8-onprem": (M8_RATE_CARD, d("0"), d("1.92"), d("0"), d("0.24"), M8_RATE_CARD + d("2.16")),
        "moe-a": (d("240"), d("0"), d("3.84"), d("0"), d("0.48"), d("244.32")),
        "moe-b": (d("0"), d("0"), d("3.84"), d("0"), d("0.48"), d("4.32")),
    }
    # Deployment facts: GPUs time-weighted (m70: 480 GPU-hours / 24 = 20), currency and policy.
    assert {dep: (r["model"], r["gpu_type"], r["gpus"], r["currency"], r["price_version"])
            for dep, r in got.items()} == {
        "m70-h100": ("m70", "H100", 20.0, "USD", "p1"), "m8-onprem": ("m8", "L40S", 4.0, "USD", "p1"),
        "moe-a": ("moe", "H200", 8.0, "USD", "p1"), "moe-b": ("moe", "H200", 8.0, "USD", "p1")}
    # Tokens. m70: reached input 3*1,000 + 2,000 + 4,000 + 500 (error) = 9,500 (the rejected 700 never reached it),
    # cached 3*400 + 3,000 = 4,200, recomputed 5,300; produced 3*50 + 100 + 200 = 450 (the error's 10 are not);
    # compliant 3*50 + 200 = 350. moe-a: 2*2,000 in, 2*1,000 cached, 200 out, all compliant.
    # moe-b: 4,000 in, 2,500 cached, 100 out, 40 compliant (team-d's ITL breaks the limit).
    tokens = {dep: tuple(r[c] for c in ("output_tokens", "compliant_output_tokens", "input_total", "input_cached",
                                        "input_recomputed")) for dep, r in got.items()}
    assert tokens == {"m70-h100": (450, 350, 9500, 4200, 5300), "m8-onprem": (80, 80, 800, 0, 800),
                      "moe-a": (200, 200, 4000, 2000, 2000), "moe-b": (100, 40, 4000, 2500, 1500)}
    # $/MTok: m70 475.80 / 450 * 1e6 delivered, / 350 under SLO, / (9,500 + 450) over all tokens.
    m70 = got["m70-h100"]
    assert m70["cost_per_mtok_output"] == pytest.approx(475.80 / 450 * 1e6, rel=1e-12)  # 1,057,333.33
    assert m70["cost_per_mtok_goodput"] == pytest.approx(475.80 / 350 * 1e6, rel=1e-12)  # 1,359,428.57
    assert m70["cost_per_mtok_total"] == pytest.approx(475.80 / 9950 * 1e6, rel=1e-12)  # 47,819.10
    # Per class, weights 0.1 : 1 : 5. m70's weighted tokens: 4,200 * 0.1 + 5,300 * 1 + 450 * 5 = 7,970,
    # so u_c = 475.80 / 7,970 * 0.1 * 1e6 = 5,969.89, u_r = 59,698.87, u_o = 298,494.35 $/MTok.
    assert (m70["unit_cost_cached_per_mtok"], m70["unit_cost_recomputed_per_mtok"],
            m70["unit_cost_output_per_mtok"]) == pytest.approx(
        (475.80 / 7970 * 0.1e6, 475.80 / 7970 * 1e6, 475.80 / 7970 * 5e6), rel=1e-12)
    assert (m70["weight_cached"], m70["weight_recomputed"], m70["weight_output"]) == (0.1, 1.0, 5.0)
    # moe-b: 4.32 / 100 delivered, / 40 under SLO; weighted 2,500 * 0.1 + 1,500 + 100 * 5 = 2,250.
    moe_b = got["moe-b"]
    assert (moe_b["cost_per_mtok_output"], moe_b["cost_per_mtok_goodput"], moe_b["cost_per_mtok_total"],
            moe_b["unit_cost_output_per_mtok"]) == pytest.approx(
        (43_200.0, 108_000.0, 4.32 / 4100 * 1e6, 4.32 / 2250 * 5e6), rel=1e-12)
    m8 = got["m8-onprem"]  # 800 recomputed + 80 * 5 = 1,200 weighted tokens
    m8_total = float(M8_RATE_CARD) + 2.16
    assert (m8["cost_per_mtok_output"], m8["cost_per_mtok_total"], m8["unit_cost_recomputed_per_mtok"]) \
        == pytest.approx((m8_total / 80 * 1e6, m8_total / 880 * 1e6, m8_total / 1200 * 1e6), rel=1e-12)
    # The three class costs times their tokens add back to the total cost.
    for r in got.values():
        back = (r["input_cached"] * r["unit_cost_cached_per_mtok"] + r["input_recomputed"]
                * r["unit_cost_recomputed_per_mtok"] + r["output_tokens"] * r["unit_cost_output_per_mtok"]) / 1e6
        assert back == pytest.approx(float(r["cost_total"]), rel=1e-12)


def test_the_worked_day_reconciles_with_the_bill(worked_day: Path) -> None:
    (recon,) = rows(worked_day, "finance", "cost_reconciliation_daily", DAY)
    # Billed: 480 + 240 + 12 + 19.20 + 2.40 - 30 + 5 + 3 = 731.60; unallocated: the unknown deployment's 5;
    # allocated: 726.60. Rate card 46.646586301370 beside it; on deployments 726.60 + 46.646586301370.
    # BilledCost: 600 + 300 + 12 + 19.20 + 2.40 - 30 + 5 + 3 = 911.60.
    assert recon == {
        "day": recon["day"], "currency": "USD", "billed_effective_cost": d("731.6"), "allocated_cost": d("726.6"),
        "unallocated_cost": d("5"), "difference": d("0"), "balanced": True, "rate_card_cost": M8_RATE_CARD,
        "deployment_cost": d("726.6") + M8_RATE_CARD, "billed_cost": d("911.6"), "price_version": "p1",
        "api_cost": d("0"),  # no hosted-API deployment on the worked day: no request priced or unpriced
        "api_requests_priced": 0, "api_requests_unpriced": 0, "api_unpriced_share": None,
        "api_unpriced_reasons": None}
    assert str(recon["day"]) == DAY
    total = sum(r["cost_total"] for r in by_deployment(worked_day).values())
    assert total == recon["deployment_cost"]


def test_tenant_showback_of_the_worked_day(worked_day: Path) -> None:
    got = {(r["model"], r["tenant_id"]): r for r in rows(worked_day, "finance", "tenant_showback_daily", DAY)}
    figures = {k: (r["requests"], r["input_total"], r["input_cached"], r["input_recomputed"], r["output_tokens"],
                   r["weighted_tokens"]) for k, r in got.items()}
    # weighted = cached * 0.1 + recomputed * 1 + produced output * 5
    assert figures == {
        ("m70", "team-a"): (4, 5000, 1200, 3800, 250, 5170.0),  # 120 + 3,800 + 1,250
        ("m70", "team-b"): (3, 4500, 3000, 1500, 200, 2800.0),  # 300 + 1,500 + 1,000 (the rejected 700 is out)
        ("m8", "team-a"): (1, 800, 0, 800, 80, 1200.0),
        ("moe", "team-c"): (3, 5000, 2000, 3000, 240, 4400.0),  # over moe-a and moe-b
        ("moe", "team-d"): (1, 3000, 2500, 500, 60, 1050.0),
    }
    # m70's 475.80 split 5,170 : 2,800 of 7,970; team-b's 167.156838143036... is rounded to 1e-12 and team-a, the
    # largest share, takes the rest. moe's 244.32 + 4.32 = 248.64 split 4,400 : 1,050 of 5,450.
    costs = {k: (r["cost_share"], r["cost"], r["currency"], r["price_version"]) for k, r in got.items()}
    assert costs == {
        ("m70", "team-a"): (pytest.approx(5170 / 7970), d("475.8") - d("167.156838143036"), "USD", "p1"),
        ("m70", "team-b"): (pytest.approx(2800 / 7970), d("167.156838143036"), "USD", "p1"),
        ("m8", "team-a"): (1.0, M8_RATE_CARD + d("2.16"), "USD", "p1"),
        ("moe", "team-c"): (pytest.approx(4400 / 5450), d("248.64") - d("47.903119266055"), "USD", "p1"),
        ("moe", "team-d"): (pytest.approx(1050 / 5450), d("47.903119266055"), "USD", "p1"),
    }
    # A model's tenant costs add up to its cost exactly.
    model_cost: dict[str, Decimal] = {}
    for r in by_deployment(worked_day).values():
        model_cost[r["model"]] = model_cost.get(r["model"], Decimal(0)) + r["cost_total"]
    for model, cost in model_cost.items():
        assert sum(r["cost"] for (m, _), r in got.items() if m == model) == cost


def test_finance_tables_are_published_as_parquet_and_csv(home: Path) -> None:
    write_day(home)
    result = materialize(DAY)  # the whole job: the day's blocking checks pass, then publish/exports runs
    assert result.success, failure_text(result)
    con = duckdb.connect()
    for table in ("cost_per_mtok_daily", "tenant_showback_daily", "cost_reconciliation_daily"):
        parquet = con.execute("SELECT count(*) FROM read_parquet($p)", {
            "p": str(home / "exports" / "finance" / table / f"day={DAY}" / "data.parquet")}).fetchone()
        csv_rows = con.execute("SELECT count(*) FROM read_csv($p)", {
            "p": str(home / "exports" / "csv" / "finance" / table / f"{table}_{DAY}.csv")}).fetchone()
        assert parquet == csv_rows and parquet[0] > 0, table
    recon = con.execute("SELECT billed_effective_cost, balanced FROM read_csv($p)", {
        "p": str(home / f"exports/csv/finance/cost_reconciliation_daily/cost_reconciliation_daily_{DAY}.csv")}
                        ).fetchone()
    assert (float(recon[0]), recon[1]) == (731.6, True)


def test_currencies_are_never_summed_together(home: Path) -> None:
    # A EUR invoice line for moe-a and an untagged EUR line (shared, spread in EUR by GPU-hours).
    write_day(home, extra_bill=[
        charge("100.00", currency="EUR", sku="p5e.48xlarge", tag="moe-a"),
        charge("9.60", currency="EUR", service="Networking", service_name="Transit"),
    ])
    result = materialize(DAY, selection=COST)
    assert result.success, failure_text(result)
    recon = {r["currency"]: r for r in rows(home, "finance", "cost_reconciliation_daily", DAY)}
    assert set(recon) == {"EUR", "USD"}
    # USD is exactly the worked day; EUR stands on its own: 109.60 billed, all of it allocated.
    assert (recon["USD"]["billed_effective_cost"], recon["USD"]["allocated_cost"]) == (d("731.6"), d("726.6"))
    assert (recon["EUR"]["billed_effective_cost"], recon["EUR"]["allocated_cost"], recon["EUR"]["unallocated_cost"],
            recon["EUR"]["rate_card_cost"], recon["EUR"]["balanced"]) == (d("109.6"), d("109.6"), d("0"), d("0"), True)
    eur = by_deployment(home, "EUR")
    # 9.60 EUR shared by GPU-hours: 4.80, 0.96, 1.92, 1.92; moe-a also has its tagged 100 EUR.
    assert {dep: (r["cost_gpu"], r["cost_network"], r["cost_total"]) for dep, r in eur.items()} == {
        "m70-h100": (d("0"), d("4.8"), d("4.8")), "m8-onprem": (d("0"), d("0.96"), d("0.96")),
        "moe-a": (d("100"), d("1.92"), d("101.92")), "moe-b": (d("0"), d("1.92"), d("1.92"))}
    assert by_deployment(home, "USD")["moe-a"]["cost_total"] == d("244.32")
    showback = {(r["tenant_id"], r["currency"]): r["cost"] for r in rows(home, "finance", "tenant_showback_daily",
                                                                         DAY, where="model = 'moe'")}
    assert showback[("team-d", "EUR")] + showback[("team-c", "EUR")] == d("103.84")
    assert showback[("team-d", "USD")] + showback[("team-c", "USD")] == d("248.64")


@pytest.mark.parametrize(("key", "network", "platform"), [
    # Requests of every status: m70 7 (the rejected one included), m8 1, moe-a 2, moe-b 2, of 12.
    ("requests", ("11.2", "1.6", "3.2", "3.2"), ("1.4", "0.2", "0.4", "0.4")),
    # Output of the requests that reached a deployment: m70 150 + 100 + 200 + 10 = 460, m8 80, moe-a 200,
    # moe-b 100, of 840. 19.20 * 80 / 840 = 1.828571428571|4..., 19.20 * 200 / 840 = 4.571428571428|57...,
    # 19.20 * 100 / 840 = 2.285714285714|28... are rounded to 1e-12; m70, the largest share, takes the rest:
    # 19.20 - 8.685714285714 = 10.514285714286. Platform 2.40 the same way.
    ("output_tokens", ("10.514285714286", "1.828571428571", "4.571428571429", "2.285714285714"),
     ("1.314285714286", "0.228571428571", "0.571428571429", "0.285714285714")),
])
def test_shared_costs_follow_the_key_the_policy_names(home: Path, key: str, network: tuple[str, ...],
                                                      platform: tuple[str, ...]) -> None:
    write_day(home)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML.replace("shared_cost_key: gpu_hours",
                                                                   f"shared_cost_key: {key}"))
    result = materialize(DAY, selection=ALL_BUT_RECONCILIATION)
    assert result.success, failure_text(result)
    shared = {(r["deployment_id"], r["category"]): r["cost"] for r in rows(
        home, "core", "cost_allocation_daily", DAY, where="placement = 'shared'")}
    deployments = ("m70-h100", "m8-onprem", "moe-a", "moe-b")
    assert shared == {**{(dep, "network"): d(v) for dep, v in zip(deployments, network, strict=True)},
                      **{(dep, "platform"): d(v) for dep, v in zip(deployments, platform, strict=True)}}
    assert sum(v for (_, c), v in shared.items() if c == "network") == d("19.2")


def test_shared_costs_with_nothing_to_spread_them_over_stay_unallocated(home: Path) -> None:
    write_day(home)
    (gateway_dir(home, DAY) / "requests.jsonl").unlink()  # no traffic: the key output_tokens totals 0
    (home / "config" / "costs.yaml").write_text(COSTS_YAML.replace("shared_cost_key: gpu_hours",
                                                                   "shared_cost_key: output_tokens"))
    result = materialize(DAY, selection=COST)
    assert result.success, failure_text(result)
    unallocated = {r["source_line"]: r["placement_reason"] for r in rows(
        home, "core", "cost_lines", DAY, where="placement = 'unallocated'")}
    assert unallocated == {
        5: "tag tokenledger:deployment = shared: shared pool, but output_tokens totals 0 on the day: "
           "nothing to spread it over",
        6: "untagged, and no deployment's resource_ids match the ResourceId: shared, but output_tokens totals 0 "
           "on the day: nothing to spread it over",
        8: "tag tokenledger:deployment = old-llama names no deployment in force on the day"}
    (recon,) = rows(home, "finance", "cost_reconciliation_daily", DAY)
    assert (recon["unallocated_cost"], recon["allocated_cost"], recon["balanced"]) == (d("26.6"), d("705"), True)
    # Without traffic nobody is shown back anything, and the cost per MTok has no denominator.
    assert rows(home, "finance", "tenant_showback_daily", DAY) == []
    assert {r["cost_per_mtok_output"] for r in rows(home, "finance", "cost_per_mtok_daily", DAY)} == {None}


def test_a_reconciliation_off_by_a_cent_blocks_publishing(home: Path) -> None:
    write_day(home)
    assert materialize(DAY, selection=ALL_BUT_RECONCILIATION).success
    # A cent goes missing from moe-b's share of the shared network cost after allocation.
    part = home / "lake/core/cost_allocation_daily" / f"day={DAY}" / "data.parquet"
    con = duckdb.connect()
    con.execute("COPY (SELECT * REPLACE (CASE WHEN deployment_id = 'moe-b' AND category = 'network' "
                "THEN cost - 0.01 ELSE cost END AS cost) FROM read_parquet($p)) TO $t (FORMAT PARQUET)",
                {"p": str(part), "t": str(part) + ".tmp"})
    Path(str(part) + ".tmp").replace(part)
    result = materialize(DAY, selection=["finance/cost_reconciliation_daily", "publish/exports"])
    assert not result.success
    evaluations = {e.event_specific_data.asset_check_key.name: e.event_specific_data for e in result.all_events
                   if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    check = evaluations["cost_reconciliation_balanced"]
    assert not check.passed
    assert check.description == ("finance.cost_reconciliation_daily does not balance: 2026-11-16 USD: billed 731.6 "
                                 "!= allocated 726.59 + unallocated 5 (difference 0.01)")
    assert not (home / "exports").exists()


def test_no_cost_policy_in_force_stops_the_day(home: Path) -> None:
    (home / "config" / "costs.yaml").write_text(COSTS_YAML.replace("valid_from: 2024-01-01",
                                                                   "valid_from: 2026-11-17"))
    result = materialize(DAY, selection=ALL_BUT_RECONCILIATION)
    assert not result.success
    assert "2026-11-16" in failure_text(result)
    assert ("costs.yaml: no cost policy version is in force on 2026-11-16 (the earliest valid_from is 2026-11-17)"
            in failure_text(result))


def test_an_on_prem_deployment_without_its_rate_card_stops_the_day(home: Path) -> None:
    (home / "config" / "costs.yaml").write_text(COSTS_YAML.replace("onprem-l40s:", "onprem-h100:"))
    result = materialize(DAY, selection=ALL_BUT_RECONCILIATION)
    assert not result.success
    assert ("cost policy p1 (in force on 2026-11-16) has no rate card for the on-premises deployment(s) m8-onprem "
            "(rate_card 'onprem-l40s', deployments.yaml line 22)") in failure_text(result)


@pytest.mark.parametrize(("pattern", "value", "matches"), [
    ("i-m70-*", "i-m70-1", True),
    ("i-m70-*", "i-m8-1", False),
    ("i-m7?-1", "i-m70-1", True),
    ("i-m7?-1", "i-m7-1", False),
    ("vol_1", "volx1", False),  # _ is a literal in a glob, not LIKE's any-character
    ("100%", "100x", False),  # and so is %
    ("a\\b*", "a\\bc", True),
])
def test_globs_translate_to_like_patterns(pattern: str, value: str, matches: bool) -> None:
    con = duckdb.connect()
    con.execute(sql_text("glob_like"))
    assert con.execute("SELECT like_escape($v, glob_like($p), '\\')", {"v": value, "p": pattern}).fetchone()[0] \
        is matches
