"""Which load test speaks for a deployment (sql/capacity/capacity_loadtest_choice.sql) on small hand-made tables: only a
run of the same configuration identity (model and version, engine and version, GPU type, parallelism, quantization,
cache policy) carries over, and a newer run of another identity is named with what differs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import duckdb
import pytest

from tokenledger.capacity.day import choose_capacity
from tokenledger.storage.duck import statement, used_params

T = datetime(2026, 11, 10, 2, tzinfo=UTC)

VERSION = {"model": "m70", "kind": "gpu", "model_version": "3.1", "engine": "vllm", "engine_version": "0.6.3",
           "gpu_type": "H100",
           "gpus": 16, "gpus_per_replica": 8, "tp": 8, "pp": 1, "quantization": "fp8",
           "cache_policy": "prefix-cache", "max_num_seqs": 256, "max_num_batched_tokens": 8192,
           "chunked_prefill": True}
# The batching settings a run ran with, as core.loadtest_steps carries them (run.yaml's, else the inventory's).
BATCHING = {k: VERSION[k] for k in ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill")}


def _table(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict[str, Any]]) -> None:
    cols = list(rows[0])
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM (VALUES "
                + ", ".join("(" + ", ".join("?" for _ in cols) + ")" for _ in rows) + f") AS t({', '.join(cols)})",
                [r[c] for r in rows for c in cols])


def _step(run_id: str, start: datetime, **changes: Any) -> dict[str, Any]:
    """The lambda_slo_max step row of a verified run of deployment d on 16 GPUs."""
    row = {"run_id": run_id, "deployment_id": "d", "step_start": start, "gpus": 16, "lambda_slo_max": 2.0,
           "goodput_per_gpu_at_max": 300.0, "verified": True, "first_failing_step_rate": 2.5,
           "stable_window_min": 30, "segment_minutes": 31.0, "is_lambda_slo_max_step": True,
           "stable_windows_met": 1, "stable_windows": 1, "arrival_rate_measured": 2.0, "e2e_mean_ms": 12_000.0,
           **BATCHING}
    row.update(changes)
    return row


def _choice(runs: list[dict[str, Any]], versions: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the statement for 2026-11-17 with `versions` (valid_from, valid_to and fields) as the inventory of d;
    the last one is in force at the end of the day."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    _table(con, "loadtest_history", runs)
    inventory = [{"deployment_id": "d", **VERSION, **v} for v in versions]
    _table(con, "cfg_deployments", inventory)
    end = datetime(2026, 11, 18, tzinfo=UTC)
    _table(con, "day_deployments", [{**inventory[-1], "in_force_to": end}])
    text = statement("capacity_loadtest_choice")
    cursor = con.execute(text, used_params(text, {"day_end": end.isoformat()}))
    names = [d[0] for d in cursor.description]
    (row,) = cursor.fetchall()
    return dict(zip(names, row, strict=True))


UPGRADE = datetime(2026, 11, 15, tzinfo=UTC)
BEFORE = {"valid_from": datetime(2026, 11, 1, tzinfo=UTC), "valid_to": UPGRADE}


def test_an_engine_upgrade_stops_a_load_test_carrying_over() -> None:
    got = _choice([_step("old", T)], [BEFORE, {"valid_from": UPGRADE, "valid_to": None, "engine_version": "0.7.0"}])
    assert (got["loadtest_run_id"], got["lambda_slo_max"], got["loadtest_verified"]) == (None, None, False)
    assert (got["runs_other_configuration"], got["other_configuration_run_id"]) == (1, "old")
    assert got["other_configuration_run_start"] == T
    assert got["other_configuration_differences"] == "engine_version 0.6.3 → 0.7.0"
    assert got["slots_at_lambda_slo_max"] is None


def test_a_scale_up_keeps_the_identity_and_each_changed_field_is_named() -> None:
    # 16 -> 24 GPUs is not a change of identity: the run carries over. Little's law on its lambda step:
    # 2.0 req/s x 12 s = 24 requests in flight over 16 / 8 = 2 replicas = 12 per replica.
    got = _choice([_step("old", T)], [BEFORE, {"valid_from": UPGRADE, "valid_to": None, "gpus": 24}])
    assert (got["loadtest_run_id"], got["loadtest_verified"], got["runs_other_configuration"]) == ("old", True, 0)
    assert got["other_configuration_run_id"] is None
    assert got["slots_at_lambda_slo_max"] == pytest.approx(2.0 * 12.0 / 2)
    # A new model version, a cache policy turned off and TP 8 -> 4 on 4-GPU replicas: every field named, in order.
    changed = {"valid_from": UPGRADE, "valid_to": None, "model_version": "3.3", "cache_policy": "none", "tp": 4,
               "gpus_per_replica": 4}
    got = _choice([_step("old", T)], [BEFORE, changed])
    assert got["other_configuration_differences"] == ("model_version 3.1 → 3.3, gpus_per_replica 8 → 4, tp 8 → 4, "
                                                      "cache_policy prefix-cache → none")
    # An undeclared engine equals an undeclared one; declaring it later is a change.
    undeclared = {**BEFORE, "engine": None, "engine_version": None}
    got = _choice([_step("old", T)], [undeclared, {"valid_from": UPGRADE, "valid_to": None, "engine": None,
                                                   "engine_version": None}])
    assert got["loadtest_run_id"] == "old"
    got = _choice([_step("old", T)], [undeclared, {"valid_from": UPGRADE, "valid_to": None}])
    assert got["other_configuration_differences"] == "engine not declared → vllm, engine_version not declared → 0.6.3"


def test_a_run_after_the_upgrade_speaks_and_the_older_one_is_history() -> None:
    after = datetime(2026, 11, 16, 1, tzinfo=UTC)
    runs = [_step("old", T), _step("new", after, arrival_rate_measured=1.5, e2e_mean_ms=8_000.0, gpus=8)]
    got = _choice(runs, [BEFORE, {"valid_from": UPGRADE, "valid_to": None, "engine_version": "0.7.0", "gpus": 8}])
    assert (got["loadtest_run_id"], got["runs_other_configuration"]) == ("new", 1)
    # The older run of the old engine is not newer than the chosen one: not named.
    assert got["other_configuration_run_id"] is None
    # 1.5 req/s x 8 s = 12 in flight on 8 / 8 = 1 replica.
    assert got["slots_at_lambda_slo_max"] == pytest.approx(12.0)


def test_the_capacity_note_says_why_the_figure_fell_back() -> None:
    got = _choice([_step("old", T)], [BEFORE, {"valid_from": UPGRADE, "valid_to": None, "engine_version": "0.7.0"}])
    demo = {"deployment_id": "d", "stable_window_min": 30, "min_requests_per_bucket": 50, "windows": 283,
            "windows_judged": 6, "windows_met": 6, "windows_met_other_configuration": 0, "windows_qualified": 6,
            "max_window_effective_requests": 60, "best_window_start": datetime(2026, 11, 17, 9, 35, tzinfo=UTC),
            "best_window_end": datetime(2026, 11, 17, 10, 5, tzinfo=UTC), "demonstrated_goodput_per_gpu": 2.5,
            "missed": []}
    choice = choose_capacity(demo, {**got, "deployment_id": "d"})
    assert (choice["capacity_source"], choice["capacity_goodput_per_gpu"], choice["capacity_verified"]) == (
        "demonstrated", 2.5, False)
    assert choice["capacity_note"] == (
        "lower bound: best 30-min window 09:35–10:05 UTC where every commitment held (6 of 283 windows held); "
        "no load test of this configuration: load test old (2026-11-10 02:00 UTC) measured another configuration "
        "(engine_version 0.6.3 → 0.7.0) and is not carried over")
    assert (choice["other_configuration_run_id"], choice["loadtest_slots_per_replica"]) == ("old", None)
