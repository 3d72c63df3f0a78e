"""Effective-dated prices: a second costs.yaml version in the middle of a range, then a backfill of the range.

Days before the change keep their figures and price_version; days from it on are costed with the new rate card
and weights. The on-premises deployment m8-onprem (4 L40S, 96 GPU-hours a day) makes the rate card visible.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import failure_text, gateway_dir, materialize, request, rows, write_jsonl
from tests.test_cost import COST, COSTS_YAML

DAYS = ["2026-11-16", "2026-11-17", "2026-11-18"]

# From the 17th: electricity doubles to $0.22/kWh and output is weighted 4 instead of 5.
P2 = (COSTS_YAML.replace("versions:\n", "")
      .replace("price_version: p1", "price_version: p2").replace("valid_from: 2024-01-01", "valid_from: 2026-11-17")
      .replace("price_per_kwh: 0.11", "price_per_kwh: 0.22").replace("output: 5.0", "output: 4.0"))

# By hand. p1: 11,000 / 35,040 + 0.35 * 1.35 * 0.11 + 0.12 = $0.485901940639.../GPU-hour, * 96 = 46.646586301370.
# p2: 11,000 / 35,040 + 0.35 * 1.35 * 0.22 + 0.12 = $0.537876940639.../GPU-hour, * 96 = 51.636186301370.
P1_COST, P2_COST = Decimal("46.646586301370"), Decimal("51.636186301370")


def _m8(home: Path, day: str) -> dict:
    (row,) = rows(home, "finance", "cost_per_mtok_daily", day, where="deployment_id = 'm8-onprem'")
    return row


@pytest.fixture
def three_days(home: Path) -> Path:
    (home / "config" / "costs.yaml").write_text(COSTS_YAML)
    for day in DAYS:  # one m8 request a day: 800 recomputed input tokens, 80 output
        write_jsonl(gateway_dir(home, day) / "r.jsonl", [request(
            f"m8-{day}", received_at=f"{day}T10:00:00Z", model="m8", deployment_id="m8-onprem",
            input_tokens=800, cached_input_tokens=0, output_tokens=80)])
    result = materialize(DAYS[0], DAYS[-1], selection=COST)
    assert result.success, failure_text(result)
    return home


def test_a_new_price_version_reprices_only_the_days_from_its_date(three_days: Path) -> None:
    home = three_days
    before = {day: _m8(home, day) for day in DAYS}
    assert {(b["price_version"], b["cost_total"], b["weight_output"]) for b in before.values()} == {
        ("p1", P1_COST, 5.0)}

    (home / "config" / "costs.yaml").write_text(COSTS_YAML + P2)
    result = materialize(DAYS[0], DAYS[-1], selection=COST)  # the backfill: one run over the range
    assert result.success, failure_text(result)

    # The 16th is reproduced exactly; the 17th and 18th are costed by p2.
    assert _m8(home, DAYS[0]) == before[DAYS[0]]
    for day in DAYS[1:]:
        after = _m8(home, day)
        assert (after["price_version"], after["cost_gpu"], after["cost_total"]) == ("p2", P2_COST, P2_COST)
        assert (after["weight_cached"], after["weight_recomputed"], after["weight_output"]) == (0.1, 1.0, 4.0)
        # weighted tokens 800 * 1 + 80 * 4 = 1,120 (were 800 + 80 * 5 = 1,200 under p1)
        assert after["unit_cost_output_per_mtok"] == pytest.approx(float(P2_COST) / 1120 * 4e6, rel=1e-12)
        assert before[day]["unit_cost_output_per_mtok"] == pytest.approx(float(P1_COST) / 1200 * 5e6, rel=1e-12)
        assert after["cost_per_mtok_output"] == pytest.approx(float(P2_COST) / 80 * 1e6, rel=1e-12)
        (tenant,) = rows(home, "finance", "tenant_showback_daily", day)
        assert (tenant["price_version"], tenant["weighted_tokens"], tenant["cost"]) == ("p2", 1120.0, P2_COST)
        (recon,) = rows(home, "finance", "cost_reconciliation_daily", day)
        assert (recon["price_version"], recon["rate_card_cost"], recon["billed_effective_cost"], recon["balanced"]) \
            == ("p2", P2_COST, Decimal(0), True)
    lines = rows(home, "core", "cost_lines", DAYS[0])
    assert [(r["source"], r["price_version"], r["effective_cost_day"]) for r in lines] == [
        ("rate_card", "p1", P1_COST)]
