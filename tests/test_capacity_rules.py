"""The rules of tokenledger/capacity/day.py as pure functions: which capacity figure speaks for a deployment and the
note that says why, the backlog carried over the day's hours, and a plan's edge cases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from tokenledger.capacity.day import (
    _PLAN_SCHEMA,
    _temp_table,
    backlog_rows,
    choose_capacity,
    no_window_reason,
    plan_figures,
    window_batches,
)
from tokenledger.capacity.queueing import capacity_shortfall
from tokenledger.contracts import load_contract
from tokenledger.storage.duck import register_arrow, statement, used_params

T = datetime(2026, 11, 17, 10, 5, tzinfo=UTC)


def window_row(**changes: Any) -> dict[str, Any]:
    """A deployment's row of sql/capacity/capacity_demonstrated.sql: by default one window of 283 held."""
    row = {"deployment_id": "d", "stable_window_min": 30, "min_requests_per_bucket": 50, "windows": 283,
           "windows_judged": 40, "windows_met": 1, "windows_met_other_configuration": 0, "windows_qualified": 1,
           "max_window_effective_requests": 900, "best_window_start": T,
           "best_window_end": T.replace(minute=35), "demonstrated_goodput_per_gpu": 2.5, "missed": []}
    row.update(changes)
    return row


def run_row(**changes: Any) -> dict[str, Any]:
    """A deployment's row of sql/capacity/capacity_loadtest_choice.sql: by default no run."""
    row = {"deployment_id": "d", "loadtest_run_id": None, "lambda_slo_max": None, "goodput_per_gpu_at_max": None,
           "loadtest_verified": False, "first_failing_step_rate": None, "loadtest_stable_window_min": 30,
           "lambda_step_minutes": None, "lambda_step_windows_met": None, "lambda_step_windows": None,
           "runs_other_configuration": 0}
    row.update(changes)
    return row


VERIFIED = {"loadtest_run_id": "lt-2026-11-10", "lambda_slo_max": 10.4, "goodput_per_gpu_at_max": 3.25,
            "loadtest_verified": True, "lambda_step_minutes": 30, "lambda_step_windows_met": 1,
            "lambda_step_windows": 1}
SHORT = {**VERIFIED, "loadtest_verified": False, "lambda_step_minutes": 5, "lambda_step_windows": 0,
         "lambda_step_windows_met": 0}
NO_WINDOW = {"demonstrated_goodput_per_gpu": None, "windows_met": 0, "windows_qualified": 0,
             "best_window_start": None, "best_window_end": None,
             "missed": [{"commitment": "bucket 4k-32k attainment", "kind": "min", "target": 0.99,
                         "windows_missed": 40, "best": 0.97},
                        {"commitment": "P99 queue", "kind": "max", "target": 300.0, "windows_missed": 12,
                         "best": 180.4}]}


def test_a_verified_load_test_is_the_capacity() -> None:
    choice = choose_capacity(window_row(), run_row(**VERIFIED))
    assert choice == {"deployment_id": "d", "demonstrated_goodput_per_gpu": 2.5, "capacity_goodput_per_gpu": 3.25,
                      "capacity_source": "loadtest", "capacity_verified": True, "lambda_slo_max": 10.4,
                      "loadtest_run_id": "lt-2026-11-10",
                      "capacity_note": "load test lt-2026-11-10 verified at 10.4 req/s (3.25 tok/s per GPU, held 30 "
                                       "min without degradation); production lower bound 2.5 tok/s per GPU",
                      "loadtest_slots_per_replica": None, "other_configuration_run_id": None,
                      "other_configuration_differences": None}


def test_an_unverified_load_test_gives_way_to_the_demonstrated_lower_bound() -> None:
    choice = choose_capacity(window_row(), run_row(**SHORT))
    assert (choice["capacity_source"], choice["capacity_verified"], choice["capacity_goodput_per_gpu"]) == (
        "demonstrated", False, 2.5)
    assert (choice["lambda_slo_max"], choice["loadtest_run_id"]) == (None, None)
    assert choice["capacity_note"] == (
        "lower bound: best 30-min window 10:05–10:35 UTC where every commitment held (1 of 283 windows held); "
        "load test lt-2026-11-10 held 10.4 req/s but is not verified: its step was measured for 5 min, under the "
        "30 stable minutes needed")


def test_without_a_window_an_unverified_load_test_is_a_flagged_reference_figure() -> None:
    degraded = {**VERIFIED, "loadtest_verified": False, "lambda_step_minutes": 40, "lambda_step_windows": 3,
                "lambda_step_windows_met": 2}
    choice = choose_capacity(window_row(**NO_WINDOW), run_row(**degraded))
    assert (choice["capacity_source"], choice["capacity_verified"], choice["capacity_goodput_per_gpu"]) == (
        "loadtest", False, 3.25)
    assert choice["capacity_note"] == (
        "reference figure, not verified: load test lt-2026-11-10 held 10.4 req/s but is not verified: only 2 of its "
        "3 30-min windows held every commitment; no 30-min window held every commitment (40 judged): bucket 4k-32k "
        "attainment 0.97 at best (target 0.99, missed in 40); P99 queue 180 ms at best (limit 300 ms, missed in 12)")


def test_no_figure_says_why() -> None:
    failed_run = run_row(loadtest_run_id="lt-x", first_failing_step_rate=2.0)
    choice = choose_capacity(window_row(**NO_WINDOW), failed_run)
    assert (choice["capacity_source"], choice["capacity_goodput_per_gpu"], choice["capacity_verified"]) == (
        None, None, False)
    assert choice["capacity_note"].endswith("; load test lt-x: its lowest step (2 req/s) did not hold every "
                                            "commitment")
    other = choose_capacity(window_row(**NO_WINDOW), run_row(runs_other_configuration=2))
    assert other["capacity_note"].endswith("; no load test of this configuration (2 run(s) measured another "
                                           "configuration)")


@pytest.mark.parametrize(("changes", "reason"), [
    ({"windows_judged": 0, "max_window_effective_requests": 0},
     "no demonstrated capacity: no effective request in any 30-min window of the day"),
    ({"windows_judged": 0, "max_window_effective_requests": 31},
     "no demonstrated capacity: no 30-min window had 50 effective requests in an ISL bucket to judge (at most 31 "
     "in a window)"),
    ({"windows_met": 3, "windows_met_other_configuration": 3},
     "no demonstrated capacity: the 3 30-min window(s) that held every commitment ran another configuration than "
     "the one in force at the end of the day"),
])
def test_no_window_reasons(changes: dict[str, Any], reason: str) -> None:
    assert no_window_reason(window_row(**{**NO_WINDOW, **changes})) == reason


def test_backlog_of_seed_000_with_the_peak_hours_together() -> None:
    # Capacity 100/h; 160/h from 10:00 to 15:59, 40/h otherwise: 1,680 of 2,400, and 6 hours over.
    demand = [40] * 10 + [160] * 6 + [40] * 8
    assert sum(demand) == 1680 == 0.7 * 2400
    got = backlog_rows("m", demand, 100.0)
    assert [r["hour"] for r in got] == list(range(24))
    assert [r["hour"] for r in got if r["over_capacity"]] == list(range(10, 16))
    assert [r["backlog_tokens"] for r in got] == [0] * 10 + [60, 120, 180, 240, 300, 360, 300, 240, 180, 120, 60] + [
        0] * 3
    assert capacity_shortfall(demand, 100.0).max_backlog == 360
    # An hour exactly at capacity is not over it; without a capacity there is no verdict.
    assert backlog_rows("m", [100], 100.0)[0]["over_capacity"] is False
    assert backlog_rows("m", [5, 7], None) == [
        {"model": "m", "hour": 0, "over_capacity": None, "backlog_start_tokens": None, "backlog_tokens": None},
        {"model": "m", "hour": 1, "over_capacity": None, "backlog_start_tokens": None, "backlog_tokens": None}]


def test_a_backlog_carried_in_at_midnight_is_served_first() -> None:
    # Capacity 100/h, demand 40/h, and 240 tokens left unserved at the previous midnight: the backlog drains by
    # 60 an hour, 240 + 40 - 100 = 180, then 120, 60, 0; no hour is over capacity.
    got = backlog_rows("m", [40] * 24, 100.0, carried_in=240.0)
    assert [r["backlog_start_tokens"] for r in got[:5]] == [240, 180, 120, 60, 0]
    assert [r["backlog_tokens"] for r in got[:5]] == [180, 120, 60, 0, 0]
    assert not any(r["over_capacity"] for r in got)
    assert capacity_shortfall([40] * 24, 100.0, initial=240.0).max_backlog == 180


PLAN = {"deployment_id": "d", "peak_arrival_rate": 0.2, "mean_service_time_s": 1.5, "p99_service_time_s": 2.0,
        "queue_p99_ms": 300.0, "attainment_target": 0.99, "slots_per_replica": 48, "gpus_per_replica": 8,
        "headroom_n_minus_k": 1, "headroom_scaling_lag_pct": 0.1, "headroom_forecast_error_pct": 0.1,
        "headroom_release_pct": 0.05, "headroom_jitter_pct": 0.05, "peak_requests": 60, "peak_basis": "busiest_5min",
        "peak_window_start": T, "peak_window_end": T.replace(minute=10)}


def test_a_plan_with_arrivals_but_no_successful_request_cannot_be_made() -> None:
    plan = plan_figures({**PLAN, "mean_service_time_s": None, "p99_service_time_s": None})
    assert (plan["erlang_c_slots"], plan["replicas_needed_erlang"], plan["gpus_needed_erlang_c"]) == (None, None, None)
    assert (plan["littles_law_concurrency"], plan["replicas_needed_seed_rule"]) == (None, None)
    assert (plan["gpus_needed"], plan["binding_sizing"]) == (None, None)
    assert plan["plan_note"].startswith("no successful request to measure the service time")


def test_a_plan_grows_with_the_peak() -> None:
    # 40 req/s at 1.5 s: 60 Erlangs. Erlang C needs a few slots above the load; two replicas of 48 slots.
    plan = plan_figures({**PLAN, "peak_arrival_rate": 40.0})
    assert 60 < plan["erlang_c_slots"] <= 96 and plan["replicas_needed_erlang"] == 2
    assert plan["p_wait_over_limit"] <= 0.01
    # Seed 000: 40 x (2 + 0.3) / (48 x 0.8) = 2.396: 3 replicas.
    assert plan["replicas_needed_seed_rule"] == 3
    assert plan["gpus_needed_erlang_c"] == pytest.approx(16 * 1.334025 + 8)
    assert plan["replicas_needed_erlang_c"] == 4  # 29.34 GPUs / 8, rounded up
    # No capacity figure, so no goodput sizing: GPUs needed is the Erlang C plan's.
    assert (plan["gpus_needed"], plan["binding_sizing"]) == (pytest.approx(16 * 1.334025 + 8), "erlang_c")


def test_seed_002_sizing_and_the_lag_in_gpus() -> None:
    # 10 output tok/s at the peak over 0.5 tok/s per GPU = 20 GPUs; x 1.1 x 1.1 x 1.05 x 1.05 = 26.6805, plus one
    # failure replica of 8 GPUs = 34.6805, which takes 5 replicas of 8. Erlang C at 0.2 req/s needs 3
    # slots, one replica: 8 x 1.334025 + 8 = 18.6722, so seed 002's sizing binds, 16.0083 GPUs more.
    plan = plan_figures({**PLAN, "peak_output_token_rate": 10.0, "capacity_goodput_per_gpu": 0.5,
                         "lag_minutes": 15, "lag_start_output_token_rate": 4.0})
    assert plan["goodput_sizing_base_gpus"] == pytest.approx(20.0)
    assert plan["gpus_needed_goodput"] == pytest.approx(34.6805)
    assert plan["replicas_needed_goodput"] == 5
    assert plan["gpus_needed_erlang_c"] == pytest.approx(18.6722)
    assert (plan["gpus_needed"], plan["binding_sizing"]) == (pytest.approx(34.6805), "goodput")
    assert plan["gpus_needed_difference"] == pytest.approx(34.6805 - 18.6722)
    # Lag: 4 tok/s fifteen minutes before the peak, 10 at it: 6 tok/s of growth = 12 GPUs at 0.5 tok/s each.
    assert (plan["lag_growth_token_rate"], plan["lag_gpus"]) == (pytest.approx(6.0), pytest.approx(12.0))


def test_without_inventory_slots_the_plan_uses_the_load_tests_concurrency() -> None:
    # 12 requests per replica in flight at the verified lambda_slo_max: Erlang C's 3 slots need 1 replica; seed
    # 000's rule 0.2 x (2 + 0.3) / (12 x 0.8) = 0.048, 1 replica.
    plan = plan_figures({**PLAN, "slots_per_replica": None, "loadtest_slots_per_replica": 12.0})
    assert (plan["slots_per_replica_used"], plan["slots_per_replica_source"]) == (12.0, "loadtest")
    assert (plan["erlang_c_slots"], plan["replicas_needed_erlang"], plan["replicas_needed_seed_rule"]) == (3, 1, 1)
    assert plan["rule_of_thumb_required_concurrency"] == pytest.approx(0.46)
    assert plan["plan_note"].endswith("; 12 slots per replica measured by Little's law at the verified load test's "
                                      "lambda_slo_max (the inventory has no slots_per_replica); the goodput sizing "
                                      "needs a capacity goodput per GPU, and the day has none")
    # Neither: the slots are computed, but no replicas, no GPUs needed and no seed 000 rule.
    plan = plan_figures({**PLAN, "slots_per_replica": None})
    assert (plan["slots_per_replica_source"], plan["erlang_c_slots"], plan["replicas_needed_erlang"]) == (
        None, 3, None)
    assert (plan["gpus_needed_erlang_c"], plan["replicas_needed_seed_rule"], plan["gpus_needed"]) == (None, None, None)



# The plan's inputs (sql/capacity/capacity_plan_inputs.sql) that plan_figures does not read, for the table's SQL.
PLAN_ROW = {**PLAN, "model": "m", "gpus_deployed": 24, "peak_to_mean": 3.0, "hours_over_capacity": 0,
            "max_backlog_tokens": 0.0, "requests": 70, "successful_requests": 70, "slo_version": "v1",
            "peak_output_tokens": 3000, "peak_output_token_rate": 10.0, "capacity_goodput_per_gpu": None,
            "peak_recomputed_input_token_rate": 100.0,
            "capacity_source": None, "scale_out_minutes": 12.0, "warmup_minutes": 3.0, "lag_minutes": 15,
            "loadtest_slots_per_replica": None, "lag_start_output_token_rate": 4.0}
# One deployment per branch of the plan: Erlang C binds; the goodput sizing binds; no request; no successful
# request; slots measured by a load test; no slots at all.
PLAN_ROWS = [
    PLAN_ROW,
    {**PLAN_ROW, "deployment_id": "goodput", "capacity_goodput_per_gpu": 0.5, "capacity_source": "demonstrated"},
    {**PLAN_ROW, "deployment_id": "idle", "peak_arrival_rate": 0.0, "peak_requests": 0, "requests": 0,
     "successful_requests": 0, "mean_service_time_s": None, "p99_service_time_s": None},
    {**PLAN_ROW, "deployment_id": "untimed", "mean_service_time_s": None, "p99_service_time_s": None,
     "successful_requests": 0, "capacity_goodput_per_gpu": 0.5, "capacity_source": "loadtest"},
    {**PLAN_ROW, "deployment_id": "measured", "slots_per_replica": None, "loadtest_slots_per_replica": 12.0},
    {**PLAN_ROW, "deployment_id": "no-slots", "slots_per_replica": None},
]


def plan_table(rows: list[dict[str, Any]] = PLAN_ROWS) -> list[dict[str, Any]]:
    """infra.capacity_plan_daily's rows from hand-made input rows, run straight through plan_figures and
    sql/capacity/capacity_plan_daily.sql (no Dagster), as build_capacity_plan runs them."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    register_arrow(con, "_inputs", pa.Table.from_pylist(rows))
    con.execute("CREATE TEMP TABLE capacity_plan_inputs AS SELECT * FROM _inputs")
    _temp_table(con, "capacity_plan_figures", [plan_figures(r) for r in rows], _PLAN_SCHEMA)
    text = statement("capacity_plan_daily")
    cursor = con.execute(text, used_params(text, {"day": "2026-11-17"}))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def test_the_plans_columns_are_its_contracts_and_keep_its_rules() -> None:
    table = load_contract("infra_capacity_plan_daily").table()
    rows = plan_table()
    assert list(rows[0]) == table.column_names
    plans = {r["deployment_id"]: r for r in rows}
    # One GPUs needed: the larger sizing, named by binding_sizing, with the surplus against it.
    assert (plans["d"]["binding_sizing"], plans["goodput"]["binding_sizing"]) == ("erlang_c", "goodput")
    assert plans["goodput"]["gpus_needed"] == plans["goodput"]["gpus_needed_goodput"] == pytest.approx(34.6805)
    assert plans["goodput"]["gpu_surplus"] == pytest.approx(24 - 34.6805)
    assert plans["d"]["gpus_needed"] == plans["d"]["gpus_needed_erlang_c"] == pytest.approx(18.6722)
    assert (plans["untimed"]["gpus_needed_erlang_c"], plans["untimed"]["binding_sizing"]) == (None, "goodput")
    assert (plans["no-slots"]["gpus_needed"], plans["no-slots"]["gpu_surplus"]) == (None, None)
    # Every row rule of the contract holds on every branch (the rule's condition is true on a row that breaks it).
    con = duckdb.connect()
    register_arrow(con, "_rows", pa.Table.from_pylist(rows))
    con.execute("CREATE TABLE capacity_plan_daily AS SELECT * FROM _rows")
    for rule in table.row_rules:
        broken = con.execute(f"SELECT list(deployment_id) FROM capacity_plan_daily WHERE {rule.violation}").fetchone()
        assert broken == (None,), rule.name


def test_the_windows_percentiles_are_cut_into_batches_by_successful_requests() -> None:
    # budget 10: windows 0-1 hold 5 + 5; window 2 would make 15, so a batch starts there; window 5 alone holds 20
    # (more than the budget, a batch of its own); window 6 starts the last batch, which runs to the end.
    sizes = [(0, 5), (1, 5), (2, 5), (5, 20), (6, 1)]
    assert window_batches(sizes, 10) == [(0, 1), (2, 4), (5, 5), (6, 2**31 - 1)]
    assert window_batches(sizes, 100) == [(0, 2**31 - 1)]
    assert window_batches([], 10) == [(0, 2**31 - 1)]  # a day without a successful request: one batch, all windows
