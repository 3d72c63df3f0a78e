"""Peaks beyond the minute and seed 000's observability in infra.load_hourly, on a small hand-made day run straight
through sql/capacity/load_hourly_demand.sql and sql/capacity/load_hourly.sql (no Dagster): the busiest second, bursts of
known length above the planning rate, the busiest minute's token rates, failures by kind and the mean queue length."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pytest

from tokenledger.storage.duck import statement, used_params

DAY = datetime(2026, 11, 17, tzinfo=UTC)


def _request(minute: int, second: int, **fields: Any) -> dict[str, Any]:
    row = {"model": "m", "received_at": DAY + timedelta(minutes=minute, seconds=second), "status": "ok",
           "queue_ms": 120.0, "input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 10}
    row.update(fields)
    return row


def _day() -> list[dict[str, Any]]:
    """Hour 10: one request a minute at :30 (input 1,000 with 400 cached, 10 output tokens, 120 ms queued), and a
    burst at 10:20-10:22 of 10 more requests a minute (3 of them in the minute's first second), each 2,000 input
    tokens, none cached, 100 output, 600 ms queued. Six of the hourly requests end otherwise: a timeout and a
    rejection (no queue_ms), an error, a disconnect, a cancellation and a second timeout. Hour 14: bursts of 11
    requests a minute at 14:00-14:01 and at 14:59-15:00 (the second runs into hour 15)."""
    rows = [_request(600 + k, 30) for k in range(60)]
    for k, status in ((1, "timeout"), (2, "error"), (3, "disconnected"), (4, "rejected"), (5, "cancelled"),
                      (6, "timeout")):
        rows[k] = _request(600 + k, 30, status=status,
                           queue_ms=None if status in ("timeout", "rejected") else 120.0)
    burst = {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 100, "queue_ms": 600.0}
    for minute in (620, 621, 622):
        rows += [_request(minute, 0, **burst) for _ in range(3)]
        rows += [_request(minute, 10 + k, **burst) for k in range(7)]
    for minute in (840, 841, 899, 900):
        rows += [_request(minute, 2 * k, queue_ms=None) for k in range(11)]
    return rows


def _table(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict[str, Any]]) -> None:
    cols = list(rows[0])
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM (VALUES "
                + ", ".join("(" + ", ".join("?" for _ in cols) + ")" for _ in rows) + f") AS t({', '.join(cols)})",
                [r[c] for r in rows for c in cols])


@pytest.fixture(scope="module")
def hours() -> dict[int, dict[str, Any]]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    requests = _day()
    _table(con, "day_requests", requests)
    con.execute("CREATE TABLE day_deployments AS SELECT 'm' AS model, 'd' AS deployment_id, 'gpu' AS kind, "
                "NULL::BIGINT AS rate_limit_rpm, NULL::BIGINT AS rate_limit_tpm, "
                "TIMESTAMPTZ '2026-11-17' AS in_force_to")
    con.execute("CREATE TABLE day_slo_policy AS SELECT 'm' AS model, 'busiest_5min' AS peak_basis")
    con.execute("CREATE TABLE day_capacity AS SELECT 'm' AS model, NULL::DOUBLE AS daily_capacity_tokens")
    # core.usage_hourly's figures per hour, over the requests that reached the model (all but the rejected one).
    con.execute("""CREATE TABLE day_usage AS SELECT model, hour(received_at)::INTEGER AS hour, count(*) AS requests,
                   sum(output_tokens) FILTER (WHERE status <> 'rejected') AS output_tokens,
                   sum(input_tokens) FILTER (WHERE status <> 'rejected') AS input_total,
                   sum(input_tokens - cached_input_tokens) FILTER (WHERE status <> 'rejected') AS input_recomputed
                   FROM day_requests GROUP BY ALL""")
    params = {"day": DAY.date().isoformat(), "day_start": DAY.isoformat(),
              "day_end": (DAY + timedelta(days=1)).isoformat()}
    text = "CREATE TABLE load_hourly_demand AS " + statement("load_hourly_demand")
    con.execute(text, used_params(text, params))
    con.execute("CREATE TABLE load_backlog AS SELECT model, hour, NULL::BOOLEAN AS over_capacity, "
                "NULL::DOUBLE AS backlog_start_tokens, NULL::DOUBLE AS backlog_tokens, "
                "NULL::DATE AS backlog_carried_from_day FROM load_hourly_demand")
    text = statement("load_hourly")
    cursor = con.execute(text, used_params(text, params))
    names = [d[0] for d in cursor.description]
    return {r[names.index("hour")]: dict(zip(names, r, strict=True)) for r in cursor.fetchall()}


def test_a_burst_of_known_length_above_the_planning_rate(hours: dict[int, dict[str, Any]]) -> None:
    # Busiest 5 minutes: 10:20-10:24 = 11 + 11 + 11 + 1 + 1 = 35 requests / 300 s. Only the three burst minutes
    # (11 / 60 = 0.183 req/s) are above it; the hourly minutes (1 / 60) are not.
    rate = 35 / 300
    assert [r["planning_arrival_rate"] for r in hours.values()] == [pytest.approx(rate)] * 24
    assert (hours[10]["minutes_above_planning_rate"], hours[10]["burst_seconds"]) == (3, 180)
    # Hour 14: two 2-minute bursts (14:00-14:01 and 14:59-15:00); the second starts in hour 14 and runs into 15,
    # so hour 15 has a minute above the rate but no burst of its own.
    assert (hours[14]["minutes_above_planning_rate"], hours[14]["burst_seconds"]) == (3, 120)
    assert (hours[15]["minutes_above_planning_rate"], hours[15]["burst_seconds"]) == (1, 0)
    assert hours[11]["burst_seconds"] == hours[11]["minutes_above_planning_rate"] == 0
    # The busiest second: 10:2x:00 holds the three burst requests (the hourly one is at :30).
    assert hours[10]["peak_second_arrival_rate"] == 3.0
    assert hours[14]["peak_second_arrival_rate"] == 1.0
    # The busiest minute of hour 10 (a burst minute): 10 x 100 + 10 output tokens; 10 x 2,000 + 1,000 input of
    # which 10 x 2,000 + 600 recomputed, each over 60 s.
    assert hours[10]["peak_minute_arrival_rate"] == pytest.approx(11 / 60)
    assert hours[10]["peak_minute_output_token_rate"] == pytest.approx(1010 / 60)
    assert hours[10]["peak_minute_input_token_rate"] == pytest.approx(21_000 / 60)
    assert hours[10]["peak_minute_recomputed_input_token_rate"] == pytest.approx(20_600 / 60)
    # The hour's mean: 90 requests / 3,600 s; the rejected request's tokens are not demand (59 x 10 + 30 x 100).
    assert hours[10]["arrival_rate"] == pytest.approx(90 / 3600)
    assert hours[10]["output_token_rate"] == pytest.approx((59 * 10 + 30 * 100) / 3600)
    assert hours[10]["input_token_rate"] == pytest.approx((59 * 1000 + 30 * 2000) / 3600)


def test_timeouts_and_disconnects_apart_from_errors_and_the_queue_by_littles_law(
        hours: dict[int, dict[str, Any]]) -> None:
    h = hours[10]
    assert (h["error_requests"], h["timeout_requests"], h["disconnected_requests"], h["rejected_requests"],
            h["cancelled_requests"]) == (1, 2, 1, 1, 1)
    # Queue: 57 hourly requests x 120 ms + 30 burst requests x 600 ms = 24,840 ms waited in the hour (the two
    # timeouts and the rejection recorded none). L_q = 24.84 s / 3,600 s: 0.0069 requests waiting on average.
    assert h["mean_queue_length"] == pytest.approx(24.84 / 3600)
    assert h["mean_queue_ms"] == pytest.approx(24_840 / 87)
    assert (hours[14]["mean_queue_length"], hours[14]["mean_queue_ms"]) == (0.0, None)
    assert hours[3]["requests"] == hours[3]["timeout_requests"] == 0
