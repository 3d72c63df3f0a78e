"""The verdict as data (infra.capacity_verdict_daily, sql/capacity/capacity_verdict_daily.sql) on small hand-made
tables run straight through the SQL (no Dagster): ok, policy, short, slo_missed, a hosted-API model, a bucket not
judged, GPUs needed not known, and the gap's three parts adding up. Then one day of a small home through Dagster:
the table is written, passes its contract, is published, and its GPUs needed is the plan's gpus_needed (the larger
sizing).

The headroom policy is conftest's: 1 failure replica, and 10% + 10% + 5% + 5% applied in turn, a factor of
1.1 x 1.1 x 1.05 x 1.05 = 1.334025 (33.4%).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DEPLOYMENTS_YAML, failure_text, gateway_dir, materialize, request, rows, write_jsonl
from tests.verdict_sql import verdict_rows

PCT = 1.1 * 1.1 * 1.05 * 1.05  # 1.334025


def _slo(model: str, bucket: str, **changes: Any) -> dict[str, Any]:
    """A row of infra.slo_daily meeting every commitment."""
    row = {"model": model, "isl_bucket": bucket, "attainment": 0.995, "attainment_target": 0.99,
           "attainment_met": True, "success_rate": 0.9998, "success_rate_target": 0.9995, "success_rate_met": True,
           "queue_p99_ms": 120.0, "queue_p99_met": True, "itl_p99_ms": 60.0, "itl_p99_met": True,
           "tpot_p99_ms": 25.0, "tpot_p99_met": True, "all_met": True}
    row.update(changes)
    return row


def _met(model: str) -> list[dict[str, Any]]:
    return [_slo(model, "0-4k"), _slo(model, "4k+"), _slo(model, "all")]


def _plan(model: str, in_force: float, base: float, rule: str = "erlang_c", per_replica: int = 8,
          **changes: Any) -> dict[str, Any]:
    """A row of infra.capacity_plan_daily whose binding sizing needs `base` GPUs before headroom."""
    row = {"model": model, "deployment_id": f"{model}-a", "gpus_needed": base * PCT + per_replica,
           "binding_sizing": rule, "gpus_deployed": in_force, "gpus_per_replica": per_replica,
           "headroom_failure_replicas": 1, "headroom_n_minus_k": 1, "headroom_failure_domain": "replica",
           "base_gpus": base if rule == "erlang_c" else 8.0,
           "goodput_sizing_base_gpus": base if rule == "goodput" else 1.0, "headroom_scaling_lag_pct": 0.1,
           "headroom_forecast_error_pct": 0.1, "headroom_release_pct": 0.05, "headroom_jitter_pct": 0.05,
           "hours_over_capacity": 0}
    row.update(changes)
    return row


def _cap(model: str, source: str | None = "loadtest", verified: bool | None = True, **changes: Any
         ) -> dict[str, Any]:
    row = {"model": model, "deployment_id": f"{model}-a", "capacity_source": source, "capacity_verified": verified,
           "loadtest_run_id": "lt-1" if source == "loadtest" else None, "other_configuration_run_id": None,
           "other_configuration_differences": None}
    row.update(changes)
    return row


def _run(tables: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The verdict's rows by deployment_id, from the hand-made day's tables."""
    got = verdict_rows(tables)
    # The row rule of the contract: the three parts of the gap add up to gpus_needed - gpus_in_force.
    for r in got:
        if r["gpus_needed"] is not None:
            assert r["gap_slo_capacity"] + r["gap_headroom"] + r["gap_redundancy"] == pytest.approx(
                r["gpus_needed"] - r["gpus_in_force"], abs=1e-9)
    return {r["deployment_id"]: r for r in got}


def _day(models: list[str], slo: list[dict[str, Any]], plans: list[dict[str, Any]], caps: list[dict[str, Any]],
         **more: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    policy = [{"model": m, "attainment_target": 0.99, "success_rate_target": 0.9995, "queue_p99_ms": 300.0,
               "itl_p99_ms": 100.0, "tpot_p99_ms": 40.0} for m in models]
    buckets = [{"model": m, "isl_bucket": b, "bucket_order": k} for m in models
               for k, b in enumerate(("0-4k", "4k-32k", "4k+", "32k+"))]
    return {"day_slo_policy": policy, "day_slo_isl_bucket": buckets, "day_slo_daily": slo,
            "day_capacity_plan": plans, "day_capacity": caps, **more}


def test_a_fleet_that_holds_its_peak_with_the_policy_is_ok_and_a_bucket_not_judged_is_never_missed() -> None:
    # 1 replica of 8 GPUs at the peak: 8 x 1.334025 + 8 = 18.6722 needed against 24 in force. Bucket 4k+ had too
    # few requests to be judged (attainment_met NULL); its success rate 0.98 is below 0.9995 and its own all_met is
    # false, but the model's 'all' row, which counts judged buckets only, is met: nothing is missed.
    slo = [_slo("m", "0-4k"), _slo("m", "4k+", attainment=0.5, attainment_met=None, success_rate=0.98,
                                   success_rate_met=False, queue_p99_ms=900.0, queue_p99_met=False, all_met=False),
           _slo("m", "all")]
    got = _run(_day(["m"], slo, [_plan("m", 24.0, 8.0)], [_cap("m")],
                    day_cost_per_mtok=[{"model": "m", "deployment_id": "m-a", "currency": "USD",
                                        "cost_per_mtok_output": 1.5, "cost_per_mtok_goodput": 2.0}]))["m-a"]
    assert (got["slo_met"], got["missed_figures"], got["verdict"]) == (True, None, "ok")
    assert (got["gpus_needed"], got["gpus_needed_rule"], got["gpus_in_force"]) == (
        pytest.approx(18.6722), "erlang_c", 24.0)
    # Gap 18.6722 - 24 = -5.3278: 8 - 24 = -16 at the peak, + 2.6722 of percentages, + 8 for N+1.
    assert (got["gap_slo_capacity"], got["gap_headroom"], got["gap_redundancy"]) == (
        -16.0, pytest.approx(8 * 0.334025), 8.0)
    assert got["verdict_text"] == ("SLO met; the 24.00 GPUs in force hold the peak with the headroom policy "
                                   "(18.67 needed)")
    assert (got["cost_per_mtok_delivered"], got["cost_per_mtok_goodput"], got["currency"]) == (1.5, 2.0, "USD")
    assert got["capacity_basis"] == "verified load test lt-1"
    assert (got["hours_over_capacity"], got["replicas_to_add"], got["gpus_needed_at_most"]) == (0, None, False)


def test_short_only_of_the_redundancy_and_headroom_policy_reads_policy_not_deficit() -> None:
    # One replica of 8 GPUs at the peak and 16 in force: the peak fits with 8 to spare, but 18.6722 are needed with
    # 33.4% headroom and N+1, 2.6722 more than in force: one more replica of 8 GPUs closes it.
    got = _run(_day(["m"], _met("m"), [_plan("m", 16.0, 8.0)], [_cap("m")]))["m-a"]
    assert got["verdict"] == "policy"
    assert (got["gap_slo_capacity"], got["gap_headroom"], got["gap_redundancy"]) == (
        -8.0, pytest.approx(2.6722), 8.0)
    assert got["replicas_to_add"] == 1
    assert got["verdict_text"] == "SLO met; policy: 1 more replica (8 GPUs) for N+1 and 33.4% headroom"
    # Without failure headroom, only the percentages: 8 x 1.334025 = 10.6722 against 8 in force, 1 replica more.
    no_n1 = _plan("m", 8.0, 8.0, headroom_failure_replicas=0, gpus_needed=8 * PCT)
    got = _run(_day(["m"], _met("m"), [no_n1], [_cap("m")]))["m-a"]
    assert (got["verdict"], got["gap_redundancy"], got["gap_slo_capacity"]) == ("policy", 0.0, 0.0)
    assert got["verdict_text"] == "SLO met; policy: 1 more replica (8 GPUs) for 33.4% headroom"


def test_a_peak_that_needs_more_than_runs_is_short_at_most_on_a_lower_bound() -> None:
    # The peak sizing: 4.1 GPUs before headroom against 2 in force (replicas of 2): short by 2.1 at the peak.
    # 4.1 x 1.334025 + 2 = 7.4695 needed: 2.1 + 1.3695 (33.4% of 4.1) + 2 (N+1) = 5.4695 more than in force.
    plan = _plan("m", 2.0, 4.1, rule="goodput", per_replica=2)
    got = _run(_day(["m"], _met("m"), [plan], [_cap("m", "demonstrated", False)]))["m-a"]
    assert (got["verdict"], got["gpus_needed_rule"], got["gpus_needed"]) == ("short", "goodput", pytest.approx(7.4695))
    assert (got["gap_slo_capacity"], got["gap_headroom"], got["gap_redundancy"]) == (
        pytest.approx(2.1), pytest.approx(4.1 * 0.334025), 2.0)
    assert (got["replicas_to_add"], got["gpus_needed_at_most"]) == (3, True)
    assert got["verdict_text"] == ("short: the peak needs 2.10 more GPUs than the 2.00 in force (at most: "
                                   "demonstrated capacity is a lower bound); SLO met")
    assert got["capacity_basis"] == "demonstrated lower bound"
    # The Erlang C plan does not divide by the capacity figure: no bound.
    erlang = _plan("m", 2.0, 4.0, per_replica=2)
    got = _run(_day(["m"], _met("m"), [erlang], [_cap("m", "demonstrated", False)]))["m-a"]
    assert (got["verdict"], got["gpus_needed_at_most"]) == ("short", False)
    assert got["verdict_text"] == "short: the peak needs 2.00 more GPUs than the 2.00 in force; SLO met"


def test_a_missed_slo_names_each_judged_figure_against_its_commitment() -> None:
    # Bucket 4k-32k attains 0.982 < 0.99; the model's success rate 0.99948 misses 0.9995 (printed to 5 places: to 4
    # it would read 0.9995 < 0.9995); bucket 0-4k's P99 queue 412 ms misses 300 ms while the model's 250 ms meets
    # it. Bucket 32k+ was not judged: its misses are never named.
    slo = [_slo("m", "0-4k", queue_p99_ms=412.4, queue_p99_met=False, all_met=False),
           _slo("m", "4k-32k", attainment=0.982, attainment_met=False, all_met=False),
           _slo("m", "32k+", attainment=0.4, attainment_met=None, success_rate=0.9, success_rate_met=False,
                all_met=False),
           _slo("m", "all", success_rate=0.99948, success_rate_met=False, queue_p99_ms=250.0, all_met=False)]
    got = _run(_day(["m"], slo, [_plan("m", 8.0, 8.0)], [_cap("m")]))["m-a"]
    figures = ("bucket 4k-32k attainment 0.9820 < 0.99; success rate 0.99948 < 0.9995; "
               "bucket 0-4k P99 queue 412 ms > 300 ms")
    assert (got["slo_met"], got["verdict"], got["missed_figures"]) == (False, "slo_missed", figures)
    assert got["verdict_text"] == f"SLO missed: {figures}; policy: 2 more replicas (16 GPUs) for N+1 and 33.4% headroom"
    # Every bucket too small to judge, the model as a whole missing attainment: named as such.
    small = [_slo("m", "0-4k", attainment_met=None), _slo("m", "4k+", attainment_met=None),
             _slo("m", "all", attainment=0.95, attainment_met=False, all_met=False)]
    got = _run(_day(["m"], small, [_plan("m", 24.0, 8.0)], [_cap("m")]))["m-a"]
    assert (got["verdict"], got["missed_figures"]) == ("slo_missed", "attainment 0.9500 < 0.99 (buckets too small "
                                                                     "to judge)")


def test_hosted_models_have_no_gpus_and_are_ok_or_slo_missed() -> None:
    slo = [_slo("h", "all", attainment=None, attainment_met=None), _slo("h2", "all", success_rate=0.99,
                                                                         success_rate_met=False, all_met=False)]
    deployments = [{"model": "h", "deployment_id": "h-api", "kind": "api"},
                   {"model": "h2", "deployment_id": "h2-api", "kind": "api"},
                   {"model": "h2", "deployment_id": "h2-api", "kind": "api"},  # two versions in the day: one row
                   {"model": "m", "deployment_id": "m-a", "kind": "gpu"}]
    got = _run(_day(["h", "h2", "m"], slo + _met("m"), [_plan("m", 24.0, 8.0)], [_cap("m")],
                    day_deployments=deployments,
                    day_cost_per_mtok=[{"model": "h", "deployment_id": "h-api", "currency": "USD",
                                        "cost_per_mtok_output": 0.5, "cost_per_mtok_goodput": None}]))
    assert sorted(got) == ["h-api", "h2-api", "m-a"]
    h, h2 = got["h-api"], got["h2-api"]
    assert (h["verdict"], h["verdict_text"]) == ("ok", "SLO met; provider-managed: no GPUs of ours")
    assert all(h[k] is None for k in ("gpus_needed", "gpus_needed_rule", "gpus_in_force", "gap_slo_capacity",
                                      "gap_headroom", "gap_redundancy", "hours_over_capacity"))
    assert (h["capacity_basis"], h["cost_per_mtok_delivered"], h["cost_per_mtok_goodput"], h["currency"]) == (
        "provider-managed", 0.5, None, "USD")
    assert (h2["verdict"], h2["missed_figures"]) == ("slo_missed", "success rate 0.9900 < 0.9995")
    assert h2["verdict_text"] == "SLO missed: success rate 0.9900 < 0.9995; provider-managed: no GPUs of ours"


def test_without_gpus_needed_the_verdict_rests_on_the_slo_and_says_so() -> None:
    plan = _plan("m", 8.0, 8.0, gpus_needed=None, binding_sizing=None)
    got = _run(_day(["m"], [_slo("m", "all", all_met=None, success_rate=None, success_rate_met=None,
                                 attainment=None, attainment_met=None)], [plan], [_cap("m", None, None)]))["m-a"]
    assert (got["verdict"], got["slo_met"], got["gap_slo_capacity"], got["capacity_basis"]) == (
        "ok", None, None, "no capacity figure")
    assert got["verdict_text"] == ("SLO not judged; GPUs needed not known (infra.capacity_plan_daily.plan_note says "
                                   "why)")


# --- one day through Dagster ---------------------------------------------------------------------------------------

DAY = "2026-11-17"
HOSTED = """\
  - deployment_id: claude-api
    model: claude
    kind: api
    provider: anthropic
    valid_from: 2026-11-01
"""


def test_the_day_publishes_one_verdict_per_deployment_with_the_plans_gpus_needed(home: Path) -> None:
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML + HOSTED)
    t10 = datetime(2026, 11, 17, 10, tzinfo=UTC)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request(f"p{k}", received_at=(t10 + timedelta(seconds=5 * k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                e2e_ms=1000.0 if k % 2 else 2000.0) for k in range(60)])
    result = materialize(DAY)
    assert result.success, failure_text(result)

    verdicts = {r["deployment_id"]: r for r in rows(home, "infra", "capacity_verdict_daily", DAY)}
    plans = {r["deployment_id"]: r for r in rows(home, "infra", "capacity_plan_daily", DAY)}
    # Every GPU deployment of the plan and the hosted one, which has no GPU figure.
    assert sorted(verdicts) == sorted([*plans, "claude-api"])
    for dep, plan in plans.items():
        got = verdicts[dep]
        assert (got["kind"], got["gpus_needed"], got["gpus_needed_rule"], got["gpus_in_force"]) == (
            "gpu", plan["gpus_needed"], plan["binding_sizing"], plan["gpus_deployed"])
        assert got["gap_slo_capacity"] + got["gap_headroom"] + got["gap_redundancy"] == pytest.approx(
            got["gpus_needed"] - got["gpus_in_force"], abs=1e-9)
    hosted = verdicts["claude-api"]
    assert (hosted["kind"], hosted["gpus_needed"], hosted["capacity_basis"]) == ("api", None, "provider-managed")
    # m70 served 60 requests, all within SLO; the other models had none: not judged.
    assert (verdicts["m70-h100"]["slo_met"], verdicts["m8-onprem"]["slo_met"], hosted["slo_met"]) == (
        True, None, None)
    # m8 had no request: 0 slots, so only the failure replica of 1 GPU against 4 in force.
    m8 = verdicts["m8-onprem"]
    assert (m8["gpus_needed"], m8["gap_slo_capacity"], m8["gap_headroom"], m8["gap_redundancy"], m8["verdict"]) == (
        1.0, -4.0, 0.0, 1.0, "ok")
    # Published with the day, beside the other infra tables.
    assert (home / "exports" / "infra" / "capacity_verdict_daily" / f"day={DAY}" / "data.parquet").is_file()
