"""infra.capacity_trend: rolling 7- and 28-day figures over published days, correct across gaps."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from tokenledger.capacity.trend import rebuild_trend
from tokenledger.storage import lake
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.layout import HomeLayout

START = date(2026, 11, 1)


def _publish(home: Path, schema: str, table: str, day: date, select: str) -> None:
    target = lake.day_file(home / "exports", schema, table, day)
    target.parent.mkdir(parents=True, exist_ok=True)
    # As published: the day only in the folder name.
    duckdb.connect().execute(f"COPY (SELECT * EXCLUDE (day) FROM ({select})) TO '{target}' (FORMAT PARQUET)")


def _day(home: Path, day: date, cost: float, compliant: int, output: int, gpus: float, capacity: float | None,
         effective: int, compliant_requests: int, judged: int | None = None) -> None:
    cap = "NULL::DOUBLE" if capacity is None else repr(float(capacity))
    _publish(home, "infra", "capacity_daily", day,
             f"SELECT DATE '{day}' AS day, 'm' AS model, 'm-a' AS deployment_id, {gpus}::DOUBLE AS gpus, "
             f"{output}::BIGINT AS output_tokens, {compliant}::BIGINT AS compliant_output_tokens, "
             f"{cap} AS daily_capacity_tokens")
    _publish(home, "finance", "cost_per_mtok_daily", day,
             f"SELECT DATE '{day}' AS day, 'm' AS model, 'm-a' AS deployment_id, 'USD' AS currency, "
             f"{cost}::DECIMAL(38,12) AS cost_total, {compliant}::BIGINT AS compliant_output_tokens")
    _publish(home, "infra", "slo_daily", day,
             f"SELECT DATE '{day}' AS day, 'm' AS model, 'all' AS isl_bucket, {effective}::BIGINT AS "
             f"effective_requests, {compliant_requests}::BIGINT AS compliant_requests"
             # judged_requests: only in days published since usage logs without latency are read
             + ("" if judged is None else f", {judged}::BIGINT AS judged_requests")
             + f" UNION ALL SELECT DATE '{day}', 'm', '0-4k', 1, 0" + ("" if judged is None else ", 1"))


@pytest.fixture
def trend(tmp_path: Path):
    home = tmp_path / "home"
    # Days 1-3 and 10 published; 4-9 missing (a gap of six days, not six zero days).
    _day(home, START, cost=100.0, compliant=1_000_000, output=1_100_000, gpus=8, capacity=2_000_000,
         effective=1000, compliant_requests=990)
    _day(home, START + timedelta(days=1), cost=100.0, compliant=2_000_000, output=2_000_000, gpus=8,
         capacity=4_000_000, effective=1000, compliant_requests=1000)
    _day(home, START + timedelta(days=2), cost=200.0, compliant=1_000_000, output=1_000_000, gpus=16,
         capacity=None, effective=2000, compliant_requests=1900)
    _day(home, START + timedelta(days=9), cost=50.0, compliant=500_000, output=600_000, gpus=8,
         capacity=1_200_000, effective=500, compliant_requests=500)
    layout = HomeLayout.of(home)
    with compute_connection(tmp_path / "spill") as con:
        outcome = rebuild_trend(con, layout)
    rows = duckdb.connect().execute(
        "SELECT * FROM read_parquet($p) ORDER BY day", {"p": str(home / "exports/infra/capacity_trend/data.parquet")})
    names = [d[0] for d in rows.description]
    return outcome, {r[0]: dict(zip(names, r, strict=True)) for r in rows.fetchall()}


def test_rolling_windows_are_ratios_of_sums_over_the_days_that_exist(trend) -> None:
    outcome, by_day = trend
    assert not outcome.validation.findings
    assert sorted(by_day) == [START, START + timedelta(days=1), START + timedelta(days=2), START + timedelta(days=9)]
    third = by_day[START + timedelta(days=2)]
    assert (third["days_7d"], third["days_28d"]) == (3, 3)
    # 7-day cost per MTok under SLO: (100 + 100 + 200) / (1M + 2M + 1M) * 1e6 = 100, not the mean of 100, 50, 200.
    assert third["cost_per_mtok_goodput_7d"] == pytest.approx(100.0)
    # Goodput per GPU: 4M compliant tokens / ((8 + 8 + 16) GPU-days * 86,400 s).
    assert third["goodput_per_gpu_7d"] == pytest.approx(4_000_000 / (32 * 86_400))
    # Capacity and utilization only over days with a capacity: mean(2M, 4M) = 3M; (1.1M + 2M) / 6M.
    assert third["daily_capacity_tokens_7d"] == pytest.approx(3_000_000)
    assert third["utilization_7d"] == pytest.approx(3_100_000 / 6_000_000)
    # Attainment: (990 + 1000 + 1900) / (1000 + 1000 + 2000).
    assert third["attainment_7d"] == pytest.approx(3890 / 4000)


def test_a_gap_is_not_counted_as_zero_days(trend) -> None:
    _, by_day = trend
    tenth = by_day[START + timedelta(days=9)]
    # Day 10's 7-day window is days 4-10: only day 10 was published; the gap neither dilutes nor zeroes it.
    assert tenth["days_7d"] == 1
    assert tenth["cost_per_mtok_goodput_7d"] == pytest.approx(50.0 / 500_000 * 1e6)
    assert tenth["attainment_7d"] == pytest.approx(1.0)
    # Its 28-day window holds all four published days: (100 + 100 + 200 + 50) / 4.5M tokens.
    assert tenth["days_28d"] == 4
    assert tenth["cost_per_mtok_goodput_28d"] == pytest.approx(450.0 / 4_500_000 * 1e6)
    assert tenth["daily_capacity_tokens_28d"] == pytest.approx((2_000_000 + 4_000_000 + 1_200_000) / 3)


def test_nothing_published_yet_gives_an_empty_trend(tmp_path: Path) -> None:
    layout = HomeLayout.of(tmp_path / "home")
    with compute_connection(tmp_path / "spill") as con:
        outcome = rebuild_trend(con, layout)
    assert outcome.rows == 0 and not outcome.validation.findings
    assert (tmp_path / "home/exports/infra/capacity_trend/data.parquet").is_file()


def test_attainment_is_over_judged_requests_and_older_days_judged_every_effective_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # Published before judged_requests existed: every effective request was judged.
    _day(home, START, cost=1.0, compliant=1, output=1, gpus=1, capacity=None, effective=1000,
         compliant_requests=990)
    # Since: 100 of 500 requests came from a usage log without latency, so 400 were judged, 380 compliant.
    _day(home, START + timedelta(days=1), cost=1.0, compliant=1, output=1, gpus=1, capacity=None, effective=500,
         compliant_requests=380, judged=400)
    with compute_connection(tmp_path / "spill") as con:
        outcome = rebuild_trend(con, HomeLayout.of(home))
    assert not outcome.validation.findings
    rows = dict(duckdb.connect().execute(
        "SELECT day, attainment_7d FROM read_parquet($p)",
        {"p": str(home / "exports/infra/capacity_trend/data.parquet")}).fetchall())
    assert rows[START] == pytest.approx(990 / 1000)
    assert rows[START + timedelta(days=1)] == pytest.approx((990 + 380) / (1000 + 400))  # not / (1000 + 500)
