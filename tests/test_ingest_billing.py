"""Billing ingest: FOCUS rows prorated to UTC days, on hand-made rows and on the real FOCUS 1.0 sample."""

from __future__ import annotations

import csv
import shutil
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.conftest import FOCUS_SAMPLE, failure_text, lenient, materialize, rows

COLUMNS = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "EffectiveCost", "BilledCost",
           "BillingCurrency", "ChargeCategory", "ServiceCategory", "ServiceName", "ResourceId", "SkuId", "Tags"]


def _focus_csv(path: Path, records: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(f'"{c}"' for c in COLUMNS)] + [",".join(r) for r in records]
    path.write_text("\n".join(lines) + "\n")


TAG = '"{""tokenledger:deployment"": ""m70-h100""}"'
ROWS = [
    # line 2: an hour of GPU on the 16th
    ['"2026-11-16 10:00:00"', '"2026-11-16 11:00:00"', '"2026-11-01 00:00:00"', "55.0", "98.32", '"USD"',
     '"Usage"', '"Compute"', '"Amazon EC2"', '"i-m70-1"', '"p5.48xlarge"', TAG],
    # line 3: a credit over three days, 15th to 17th: a third each
    ['"2026-11-15 00:00:00"', '"2026-11-18 00:00:00"', '"2026-11-01 00:00:00"', "-30.0", "-30.0", '"USD"',
     '"Credit"', '"Compute"', '"Amazon EC2"', "NULL", "NULL", "NULL"],
    # line 4: six hours of storage across midnight: 3 h on the 16th, 3 h on the 17th
    ['"2026-11-16 21:00:00"', '"2026-11-17 03:00:00"', '"2026-11-01 00:00:00"', "6.0", "6.0", '"USD"',
     '"Usage"', '"Storage"', '"Amazon S3"', '"bucket-weights"', '"TimedStorage"', ""],
    # lines 5 and 6: the same charge twice within one file: both are kept
    ['"2026-11-16 00:00:00"', '"2026-11-17 00:00:00"', '"2026-11-01 00:00:00"', "1.0", "1.0", '"USD"',
     '"Usage"', '"Management and Governance"', '"Amazon EKS"', "NULL", "NULL", "NULL"],
    ['"2026-11-16 00:00:00"', '"2026-11-17 00:00:00"', '"2026-11-01 00:00:00"', "1.0", "1.0", '"USD"',
     '"Usage"', '"Management and Governance"', '"Amazon EKS"', "NULL", "NULL", "NULL"],
    # line 7: a cost that is not a number
    ['"2026-11-16 05:00:00"', '"2026-11-16 06:00:00"', '"2026-11-01 00:00:00"', '"abc"', "1.0", '"USD"',
     '"Usage"', '"Compute"', '"Amazon EC2"', "NULL", "NULL", "NULL"],
    # line 8: a period that ends before it starts
    ['"2026-11-16 07:00:00"', '"2026-11-16 06:00:00"', '"2026-11-01 00:00:00"', "2.0", "2.0", '"USD"',
     '"Usage"', '"Compute"', '"Amazon EC2"', "NULL", "NULL", "NULL"],
    # line 9: a charge on another day entirely
    ['"2026-11-20 07:00:00"', '"2026-11-20 08:00:00"', '"2026-11-01 00:00:00"', "9.0", "9.0", '"USD"',
     '"Usage"', '"Compute"', '"Amazon EC2"', "NULL", "NULL", "NULL"],
]


def test_rows_are_prorated_to_the_day_and_bad_rows_quarantined(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _focus_csv(home / "raw" / "billing" / "2026-11.csv", ROWS)
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")  # a bill without request logs: the days are declared idle
    result = materialize("2026-11-16", "2026-11-17", run_config=lenient(),  # 2 of 7 rows quarantined on purpose
                         upto=["core/billing_charges", "quality/quarantine", "quality/ingest_reconciliation_daily"])
    assert result.success, failure_text(result)

    day16 = rows(home, "core", "billing_charges", "2026-11-16", order="source_line")
    assert [(r["source_line"], float(r["day_fraction"]), r["effective_cost_day"]) for r in day16] == [
        (2, 1.0, Decimal("55.000000000000")),
        (3, 1 / 3, Decimal("-10.000000000000")),
        (4, 0.5, Decimal("3.000000000000")),
        (5, 1.0, Decimal("1.000000000000")),
        (6, 1.0, Decimal("1.000000000000")),
    ]
    assert day16[0]["Tags"] is not None and day16[1]["ResourceId"] is None and day16[2]["Tags"] is None
    day17 = rows(home, "core", "billing_charges", "2026-11-17", order="source_line")
    assert sum(r["effective_cost_day"] for r in day17) == Decimal("-7")  # a third of the credit, half the storage
    quarantined = {r["line"]: r["reason"] for r in rows(home, "quality", "quarantine", "2026-11-16",
                                                        where="source = 'billing'")}
    assert quarantined == {
        7: "EffectiveCost: abc is not a valid number",
        8: "charge_period_ordered: ChargePeriodEnd must not be before ChargePeriodStart "
           "(ChargePeriodEnd=2026-11-16 06:00:00+00, ChargePeriodStart=2026-11-16 07:00:00+00)",
    }
    recon = rows(home, "quality", "ingest_reconciliation_daily", "2026-11-16", where="source = 'billing'")[0]
    assert (recon["rows_read"], recon["rows_accepted"], recon["rows_quarantined"], recon["duplicates_merged"],
            recon["balanced"]) == (7, 5, 2, 0, True)


def test_an_export_delivered_twice_is_counted_once(home: Path) -> None:
    _focus_csv(home / "raw" / "billing" / "2026-11.csv", ROWS)
    shutil.copy(home / "raw" / "billing" / "2026-11.csv", home / "raw" / "billing" / "2026-11.resent.csv")
    assert materialize("2026-11-16", selection=["core/billing_charges", "core/deployments_daily",
                                                "core/gateway_requests", "quality/ingest_reconciliation_daily",
                                                "quality/quarantine"], run_config=lenient()).success
    day16 = rows(home, "core", "billing_charges", "2026-11-16")
    assert sum(r["effective_cost_day"] for r in day16) == Decimal("50")  # 55 - 10 + 3 + 1 + 1, once
    assert {Path(r["source_file"]).name for r in day16} == {"2026-11.csv"}  # the first read, by name
    recon = rows(home, "quality", "ingest_reconciliation_daily", "2026-11-16", where="source = 'billing'")[0]
    # 14 rows read; the second file's 5 valid rows are merged; both copies of the 2 bad rows are quarantined.
    assert (recon["rows_read"], recon["rows_accepted"], recon["rows_quarantined"], recon["duplicates_merged"]) \
        == (14, 5, 4, 5)


def _expected_from_csv(path: Path) -> tuple[dict[str, Decimal], dict[str, Decimal], dict[str, int]]:
    """Per-day EffectiveCost, BilledCost and row counts, prorated here with Python's csv and Decimal only."""
    effective: dict[str, Decimal] = defaultdict(Decimal)
    billed: dict[str, Decimal] = defaultdict(Decimal)
    count: dict[str, int] = defaultdict(int)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            start = datetime.fromisoformat(row["ChargePeriodStart"]).replace(tzinfo=UTC)
            end = datetime.fromisoformat(row["ChargePeriodEnd"]).replace(tzinfo=UTC)
            day = start.replace(hour=0, minute=0, second=0)
            while day < end:
                nxt = day + timedelta(days=1)
                share = Decimal((min(end, nxt) - max(start, day)).total_seconds()) / Decimal(
                    (end - start).total_seconds())
                key = day.date().isoformat()
                effective[key] += Decimal(row["EffectiveCost"]) * share
                billed[key] += Decimal(row["BilledCost"]) * share
                count[key] += 1
                day = nxt
    return effective, billed, count


@pytest.mark.skipif(not FOCUS_SAMPLE.is_file(), reason="../shared/data/public is not beside the checkout")
def test_real_focus_sample_totals_split_by_day(home: Path) -> None:
    (home / "raw" / "billing" / FOCUS_SAMPLE.name).symlink_to(FOCUS_SAMPLE)  # read in place, never copied
    result = materialize("2024-09-01", "2024-09-30", selection=["core/billing_charges"])
    assert result.success, failure_text(result)

    effective, billed, count = _expected_from_csv(FOCUS_SAMPLE)
    assert set(effective) == {f"2024-09-{d:02d}" for d in range(1, 31)}
    con = duckdb.connect()
    per_day = dict(con.execute(
        "SELECT day::VARCHAR, (sum(effective_cost_day), sum(billed_cost_day), count(*)) "
        "FROM read_parquet($g) GROUP BY day", {"g": str(home / "lake/core/billing_charges/day=*/data.parquet")}
    ).fetchall())
    for day, (eff, bil, n) in per_day.items():
        assert abs(eff - effective[day]) < Decimal("1e-9"), day
        assert abs(bil - billed[day]) < Decimal("1e-9"), day
        assert n == count[day], day
    total_effective = sum(v[0] for v in per_day.values())
    total_billed = sum(v[1] for v in per_day.values())
    assert round(total_effective, 6) == Decimal("14.976514")
    assert round(total_billed, 6) == Decimal("20.520227")
    assert sum(count.values()) >= 1000  # rows whose period spans days appear in each of them


@pytest.mark.skipif(not FOCUS_SAMPLE.is_file(), reason="../shared/data/public is not beside the checkout")
@pytest.mark.parametrize("kind", ["parquet", "csv.gz"])
def test_focus_as_parquet_or_gzip_csv_gives_the_same_days(home: Path, tmp_path: Path, kind: str) -> None:
    con = duckdb.connect()
    target = home / "raw" / "billing" / f"focus.{kind}"
    if kind == "parquet":  # typed columns, as a provider's Parquet export has them
        con.execute("COPY (SELECT * FROM read_csv($s, nullstr = ['NULL', ''])) TO $t (FORMAT PARQUET)",
                    {"s": str(FOCUS_SAMPLE), "t": str(target)})
    else:
        import gzip

        target.write_bytes(gzip.compress(FOCUS_SAMPLE.read_bytes()))
    assert materialize("2024-09-01", "2024-09-30", selection=["core/billing_charges"]).success
    effective, billed, _ = _expected_from_csv(FOCUS_SAMPLE)
    per_day = dict(con.execute(
        "SELECT day::VARCHAR, sum(effective_cost_day) FROM read_parquet($g) GROUP BY day",
        {"g": str(home / "lake/core/billing_charges/day=*/data.parquet")}).fetchall())
    assert per_day.keys() == effective.keys()
    assert all(abs(per_day[d] - effective[d]) < Decimal("1e-9") for d in per_day)
