"""Reconciliation on the real FOCUS 1.0 sample: every day of September 2024 balances to the bill.

The sample's costs are tagged with keys tokenledger does not know and no deployment is in force in 2024 in the
conftest inventory, so there is nothing to spread shared costs over: the whole bill lands, visibly, in
`unallocated`, and each day still reconciles.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import FOCUS_SAMPLE, SLO_YAML, failure_text, materialize, rows

SELECTION = ["core/billing_charges", "core/deployments_daily", "core/gateway_requests", "core/usage_hourly",
             "core/api_request_costs", "core/cost_lines", "core/cost_allocation_daily",
             "finance/cost_reconciliation_daily"]
SEPTEMBER = [f"2024-09-{d:02d}" for d in range(1, 31)]


@pytest.mark.skipif(not FOCUS_SAMPLE.is_file(), reason="../shared/data/public is not beside the checkout")
def test_every_day_of_the_real_focus_sample_reconciles(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / "raw" / "billing" / FOCUS_SAMPLE.name).symlink_to(FOCUS_SAMPLE)  # read in place, never copied
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")  # a bill without request logs: the days are declared idle
    # The usage cube needs an SLO version in force in 2024 (the conftest's starts in November 2026).
    (home / "config" / "slo.yaml").write_text(SLO_YAML.replace("valid_from: 2026-11-01", "valid_from: 2024-01-01"))
    result = materialize(SEPTEMBER[0], SEPTEMBER[-1], selection=SELECTION)
    assert result.success, failure_text(result)
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
              and e.event_specific_data.asset_check_key.name == "cost_reconciliation_balanced"]
    assert [(c.partition, c.passed) for c in checks] == [(day, True) for day in SEPTEMBER]  # one per day

    con = duckdb.connect()
    billed = dict(con.execute(
        "SELECT day::VARCHAR, sum(effective_cost_day) FROM read_parquet($g) GROUP BY day",
        {"g": str(home / "lake/core/billing_charges/day=*/data.parquet")}).fetchall())
    total = Decimal(0)
    for day in SEPTEMBER:
        (recon,) = rows(home, "finance", "cost_reconciliation_daily", day)
        assert recon["currency"] == "USD" and recon["balanced"], day
        assert recon["billed_effective_cost"] == billed[day], day
        assert (recon["allocated_cost"], recon["unallocated_cost"], recon["difference"]) \
            == (Decimal(0), billed[day], Decimal(0)), day
        total += recon["billed_effective_cost"]
    assert round(total, 6) == Decimal("14.976514")
    reasons = con.execute(
        "SELECT DISTINCT placement, placement_reason FROM read_parquet($g)",
        {"g": str(home / "lake/core/cost_lines/day=*/data.parquet")}).fetchall()
    assert reasons == [("unallocated", "untagged, and no deployment's resource_ids match the ResourceId: shared, "
                                       "but gpu_hours totals 0 on the day: nothing to spread it over")]
