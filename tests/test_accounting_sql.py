"""Accounting formulas on small hand-made tables, run straight through their SQL files (no Dagster): attainment per
ISL bucket per hour (sql/accounting/slo_hourly.sql; seed 003: never only the whole-model mean), the capacity-top signal
(sql/accounting/goodput_hourly.sql: raw throughput up, SLO goodput down) and the workload's ISL/OSL distribution
(sql/accounting/token_split_daily.sql)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pytest

from tokenledger.storage.duck import statement, used_params

DAY = datetime(2026, 11, 17, tzinfo=UTC)
PARAMS = {"day": "2026-11-17", "day_start": DAY.isoformat(), "day_end": (DAY + timedelta(days=1)).isoformat(),
          "slo_version": "v1"}


def _table(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict[str, Any]]) -> None:
    cols = list(rows[0])
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM (VALUES "
                + ", ".join("(" + ", ".join("?" for _ in cols) + ")" for _ in rows) + f") AS t({', '.join(cols)})",
                [r[c] for r in rows for c in cols])


def _usage(hour: int, bucket: str, effective: int, compliant: int, produced: int = 0, compliant_output: int = 0,
           tenant: str = "t") -> dict[str, Any]:
    return {"model": "m", "deployment_id": "d", "tenant_id": tenant, "hour": hour, "isl_bucket": bucket,
            "effective_requests": effective, "compliant_requests": compliant, "judged_requests": effective,
            "output_produced": produced,
            "compliant_output_tokens": compliant_output}


def _run(name: str, usage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    _table(con, "day_usage", usage)
    con.execute("CREATE TABLE day_slo_policy AS SELECT 'm' AS model, 0.99 AS attainment_target, "
                "10 AS min_requests_per_bucket, 'v1' AS slo_version")
    con.execute("CREATE TABLE day_slo_isl_bucket AS SELECT * FROM (VALUES ('m', '0-4k', 1), ('m', '4k+', 2)) "
                "AS t(model, isl_bucket, bucket_order)")
    _table(con, "day_deployments", [{"model": "m", "deployment_id": "d", "gpus": 2, "in_force_from": DAY,
                                     "in_force_to": DAY + timedelta(days=1)}])
    text = statement(name)
    cursor = con.execute(text, used_params(text, PARAMS))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def test_hourly_attainment_per_bucket_shows_the_hour_the_day_hides() -> None:
    got = {(r["hour"], r["isl_bucket"]): r for r in _run("slo_hourly", [
        _usage(9, "0-4k", 100, 100), _usage(9, "4k+", 2000, 2000),
        # Hour 10: bucket 0-4k over two tenants, 120 of 120 and 79 of 80; bucket 4k+ 36 of 40.
        _usage(10, "0-4k", 120, 120), _usage(10, "0-4k", 80, 79, tenant="u"), _usage(10, "4k+", 40, 36),
        _usage(11, "4k+", 5, 5),
    ])}
    assert len(got) == 24 * 3
    # Hour 10: 199 / 200 = 0.995 meets 0.99; 4k+ attains 36 / 40 = 0.90 and misses; the model's 235 / 240 = 0.979.
    assert (got[10, "0-4k"]["attainment"], got[10, "0-4k"]["attainment_met"]) == (pytest.approx(0.995), True)
    assert (got[10, "4k+"]["attainment"], got[10, "4k+"]["attainment_met"]) == (pytest.approx(0.9), False)
    assert (got[10, "all"]["effective_requests"], got[10, "all"]["compliant_requests"]) == (240, 235)
    assert got[10, "all"]["attainment_met"] is False
    # The day's 4k+ figure, (2,000 + 36 + 5) / (2,000 + 40 + 5) = 0.998, meets the commitment: only the hour shows
    # that the 10:00 peak sank the long prompts.
    day_4k = sum(got[h, "4k+"]["compliant_requests"] for h in range(24)) / sum(
        got[h, "4k+"]["effective_requests"] for h in range(24))
    assert day_4k == pytest.approx(2041 / 2045) and day_4k >= 0.99
    # Hour 11: 5 requests in 4k+ are too few to judge (10 needed); an hour without requests has no figure.
    assert (got[11, "4k+"]["judged"], got[11, "4k+"]["attainment_met"], got[11, "4k+"]["attainment"]) == (
        False, None, 1.0)
    assert (got[3, "0-4k"]["effective_requests"], got[3, "0-4k"]["attainment"], got[3, "0-4k"]["judged"]) == (
        0, None, False)


def test_raw_throughput_up_while_goodput_down_is_flagged() -> None:
    got = {r["hour"]: r for r in _run("goodput_hourly", [
        _usage(9, "0-4k", 10, 10, produced=1000, compliant_output=1000),
        # 10:00: 1,500 tokens produced (more than 1,000) but 900 compliant (fewer than 1,000): the capacity top.
        _usage(10, "0-4k", 15, 9, produced=1500, compliant_output=900),
        # 11:00 both fall; 12:00 both rise: neither is the signal.
        _usage(11, "0-4k", 14, 8, produced=1400, compliant_output=800),
        _usage(12, "0-4k", 16, 15, produced=1600, compliant_output=1500),
    ])}
    assert [h for h, r in got.items() if r["capacity_top"]] == [10]
    assert got[0]["capacity_top"] is None and got[1]["capacity_top"] is False
    assert got[10]["raw_throughput"] == pytest.approx(1500 / 3600)
    assert got[10]["slo_goodput"] == pytest.approx(900 / 3600)


def test_the_workload_distribution_of_served_requests() -> None:
    """Seed 002's Workload: ISL and OSL quantiles (linear interpolation) and their correlation over the requests
    served in full, on infra.token_split_daily's SQL."""
    con = duckdb.connect()
    served = [(100, 10), (200, 20), (300, 30), (400, 40), (1000, 100)]
    _table(con, "day_requests", [{"model": "m", "status": "ok", "input_tokens": i, "output_tokens": o}
                                 for i, o in served]
           + [{"model": "m", "status": "cancelled", "input_tokens": 50_000, "output_tokens": 1}])
    con.execute("CREATE TABLE day_deployments AS SELECT 'm' AS model")
    con.execute("CREATE TABLE day_usage AS SELECT 'm' AS model, 6 AS requests, 52_000 AS input_total, "
                "0 AS input_cached, 52_000 AS input_recomputed, 0 AS input_cache_write, 201 AS output_tokens, "
                "NULL::BIGINT AS reasoning_tokens")
    text = statement("token_split_daily")
    cursor = con.execute(text, used_params(text, PARAMS))
    row = dict(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))
    # ISL 100, 200, 300, 400, 1,000 (the cancelled 50,000 is left out): p10 at position 0.4 = 140, median 300,
    # p90 at 3.6 = 400 + 0.6 x 600 = 760, p99 at 3.96 = 976; mean 400. OSL is ISL / 10 throughout: r = 1.
    assert row["workload_requests"] == 5
    assert [row[f"isl_p{q}"] for q in (10, 50, 90, 99)] == pytest.approx([140, 300, 760, 976])
    assert [row[f"osl_p{q}"] for q in (10, 50, 90, 99)] == pytest.approx([14, 30, 76, 97.6])
    assert (row["isl_mean"], row["isl_max"], row["osl_mean"], row["osl_max"]) == (400.0, 1000, 40.0, 100)
    assert row["isl_osl_correlation"] == pytest.approx(1.0)
