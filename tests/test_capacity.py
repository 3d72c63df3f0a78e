"""Capacity, load against capacity and the capacity plan on hand-made days, materialized through Dagster into a
temporary home (tests/conftest.py's inventory: m70 on 24 H100 from 2026-11-16 noon, m8 on 4 L40S, moe on two
8-GPU deployments).

Every expected number is worked out here from the requests written, never read back from the pipeline.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    DEPLOYMENTS_YAML,
    SLO_YAML,
    failure_text,
    gateway_dir,
    materialize,
    request,
    rows,
    write_jsonl,
)
from tokenledger.capacity import day as capacity

DAY = "2026-11-17"
T0 = datetime(2026, 11, 17, tzinfo=UTC)
RATE_CARD_PER_GPU_HOUR = 11000 / 35040 + 0.35 * 1.35 * 0.11 + 0.12  # conftest's onprem-l40s rate card

COSTS_WITH_LIST_PRICES = """\
versions:
  - price_version: p1
    valid_from: 2024-01-01
    currency: USD
    deployment_tag_keys: ["tokenledger:deployment"]
    shared_tag_value: shared
    shared_cost_key: gpu_hours
    category_rules:
      - {category: gpu, service_category: Compute, sku_id: "p5*"}
      - {category: platform}
    token_class_weights: {cached: 0.1, recomputed: 1.0, output: 5.0}
    list_prices:
      m8: {output_per_mtok: 0.20}
      m70: {output_per_mtok: 0.80}
    rate_cards:
      onprem-l40s: {capex_per_gpu: 11000, lifetime_hours: 35040, power_kw_per_gpu: 0.35, pue: 1.35,
                    price_per_kwh: 0.11, opex_per_gpu_hour: 0.12}
"""


def at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def slo(home: Path, **changes: Any) -> None:
    """conftest's SLO policy with some default keys changed."""
    text = SLO_YAML
    for key, value in changes.items():
        start = text.index(f"      {key}: ")
        end = text.index("\n", start)
        text = text[:start] + f"      {key}: {value}" + text[end:]
    (home / "config" / "slo.yaml").write_text(text)


def by_deployment(home: Path, table: str, day: str = DAY) -> dict[str, dict[str, Any]]:
    return {r["deployment_id"]: r for r in rows(home, "infra", table, day)}


def run_day(day: str = DAY, **kwargs: Any) -> None:
    result = materialize(day, **kwargs)
    assert result.success, failure_text(result)


# What infra.capacity_plan_daily is computed from, without the publishing, review and other accounting tables.
CAPACITY_CHAIN = ["core/deployments_daily", "core/gateway_requests", "core/usage_hourly", "core/billing_charges",
                  "core/api_request_costs", "core/cost_lines", "core/cost_allocation_daily", "core/gpu_samples",
                  "infra/goodput_hourly", "infra/gpu_usage_hourly", "infra/gpu_usage_daily",
                  "finance/cost_per_mtok_daily", "core/loadtest_steps", "core/capacity_windows", "infra/capacity_daily",
                  "infra/load_hourly", "infra/capacity_model_daily", "infra/capacity_plan_daily"]


# --- seed 000: 1,680 of 2,400 a day, yet 6 hours over capacity -------------------------------------------------

SEED_RUN = """\
run_id: lt-m8
model: m8
deployment_id: m8-onprem
start: 2026-11-17T02:00:00Z
warmup_min: 1
steps:
  - {arrival_rate: 0.03, start: 2026-11-17T02:00:00Z, end: 2026-11-17T02:31:00Z}
"""


def _seed_000_day(home: Path) -> None:
    """m8 (4 GPUs) with a capacity of exactly 100 output tokens an hour, and seed 000's demand.

    The capacity comes from a verified load test: its one step's segment [02:01, 02:31) holds 50 requests of one
    output token each, one every 36 s from 02:01:00; the last, received 02:30:24, takes 36 s, so the wall time is
    exactly 1,800 s. Goodput per GPU = 50 / 1,800 / 4, and daily capacity = 50 / 1,800 * 86,400 = 2,400 tokens,
    100 an hour. Production: one request an hour, 160 output tokens from 10:00 to 15:59 and 40 otherwise.
    """
    folder = home / "raw" / "loadtest" / "lt-m8"
    start = datetime(2026, 11, 17, 2, 1, tzinfo=UTC)
    run = [request(f"lt{k}", model="m8", deployment_id="m8-onprem", output_tokens=1, itl_max_ms=...,
                   received_at=at(start + timedelta(seconds=36 * k)), e2e_ms=36_000.0 if k == 49 else 1500.0)
           for k in range(50)]
    write_jsonl(folder / "requests.jsonl", run)
    (folder / "run.yaml").write_text(SEED_RUN)
    demand = [request(f"p{h}", model="m8", deployment_id="m8-onprem", output_tokens=160 if 10 <= h <= 15 else 40,
                      received_at=at(T0 + timedelta(hours=h, minutes=10))) for h in range(24)]
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", demand)
    (home / "config" / "costs.yaml").write_text(COSTS_WITH_LIST_PRICES)


def test_seed_000_a_day_at_70_percent_still_has_6_hours_over_capacity(home: Path) -> None:
    _seed_000_day(home)
    run_day(upto=["infra/capacity_daily", "infra/load_hourly", "infra/capacity_plan_daily"])

    cap = by_deployment(home, "capacity_daily")["m8-onprem"]
    assert (cap["capacity_source"], cap["capacity_verified"], cap["loadtest_run_id"]) == ("loadtest", True, "lt-m8")
    assert cap["capacity_goodput_per_gpu"] == pytest.approx(50 / 1800 / 4)
    assert cap["lambda_slo_max"] == 0.03
    assert cap["daily_capacity_tokens"] == pytest.approx(2400)
    # Daily demand 18 x 40 + 6 x 160 = 1,680 = 70% of 2,400.
    assert cap["output_tokens"] == 18 * 40 + 6 * 160 == 1680
    assert cap["utilization"] == pytest.approx(0.70)
    assert cap["capacity_note"].startswith(
        "load test lt-m8 verified at 0.03 req/s (0.006944 tok/s per GPU, held 30 min")

    load = {r["hour"]: r for r in rows(home, "infra", "load_hourly", DAY, where="model = 'm8'")}
    assert sorted(load) == list(range(24))
    assert sum(r["output_token_rate"] * 3600 for r in load.values()) == pytest.approx(1680)
    assert {round(r["capacity_token_rate"] * 3600, 9) for r in load.values()} == {100.0}
    assert [h for h, r in load.items() if r["over_capacity"]] == [10, 11, 12, 13, 14, 15]
    # The backlog builds 60 an hour through the six peak hours, then drains 60 an hour from 16:00: zero by 21:00.
    expected = [0] * 10 + [60, 120, 180, 240, 300, 360, 300, 240, 180, 120, 60, 0, 0, 0]
    assert [load[h]["backlog_tokens"] for h in range(24)] == pytest.approx(expected)
    assert load[10]["requests"] == 1 and load[10]["arrival_rate"] == pytest.approx(1 / 3600)
    assert load[10]["peak_minute_arrival_rate"] == pytest.approx(1 / 60)
    # The other models have no capacity figure: no verdict and no backlog.
    other = rows(home, "infra", "load_hourly", DAY, where="model = 'm70'")
    assert len(other) == 24 and {(r["over_capacity"], r["backlog_tokens"]) for r in other} == {(None, None)}

    plan = by_deployment(home, "capacity_plan_daily")["m8-onprem"]
    assert (plan["hours_over_capacity"], plan["max_backlog_tokens"]) == (6, pytest.approx(360))
    # Peak hour 1 request against a mean of 1 an hour.
    assert plan["peak_to_mean"] == pytest.approx(1.0)

    # The realized $/MTok under SLO: the rate card's cost of 4 GPUs x 24 h over the 1,680 compliant tokens. At the
    # capacity point the same day's cost buys 2,400 tokens: $/MTok under SLO at capacity = cost / 2,400 x 1e6, daily
    # value = 2,400 / 1e6 x that = the day's cost (the daily cost at capacity); revenue at the list price 0.20 per
    # output MTok = 2,400 / 1e6 x 0.20.
    cost_total = 4 * 24 * RATE_CARD_PER_GPU_HOUR
    assert cap["cost_per_mtok_goodput"] == pytest.approx(cost_total / 1680 * 1e6)
    assert cap["cost_per_mtok_at_capacity"] == pytest.approx(cost_total / 2400 * 1e6)
    assert cap["daily_value"] == pytest.approx(cost_total)
    assert cap["daily_cost_at_capacity"] == pytest.approx(cost_total)
    assert cap["revenue_at_list_price"] == pytest.approx(2400 / 1e6 * 0.20)
    assert cap["currency"] == "USD" and cap["price_version"] == "p1"
    # No request carries a session: the policy's 247 output tokens per agent step.
    assert (cap["mean_output_per_step"], cap["mean_output_per_step_source"]) == (247, "policy")
    assert cap["supported_agent_steps"] == pytest.approx(2400 / 247)
    assert (cap["sessions"], cap["task_attainment"], cap["expected_task_attainment"]) == (0, None, None)


def test_a_backlog_left_at_midnight_is_served_the_next_morning(home: Path) -> None:
    # The seed 000 capacity of 100 output tokens an hour (the same verified load test), run over two days as one
    # range. 2026-11-17: 40 tokens an hour, 160 from 20:00 to 23:59, so 4 x 60 = 240 tokens are unserved at
    # midnight. 2026-11-18: 40 an hour all day. The backlog carries over: 240 + 40 - 100 = 180 at the end of hour 0,
    # then 120, 60, 0; the second day has no hour over capacity, yet a backlog in its first three hours.
    _seed_000_day(home)
    evening = [request(f"p{h}", model="m8", deployment_id="m8-onprem", output_tokens=160 if h >= 20 else 40,
                       received_at=at(T0 + timedelta(hours=h, minutes=10))) for h in range(24)]
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", evening)
    next_day = T0 + timedelta(days=1)
    write_jsonl(gateway_dir(home, "2026-11-18") / "a.jsonl", [
        request(f"q{h}", model="m8", deployment_id="m8-onprem", output_tokens=40,
                received_at=at(next_day + timedelta(hours=h, minutes=10))) for h in range(24)])
    result = materialize(DAY, "2026-11-18", selection=CAPACITY_CHAIN)
    assert result.success, failure_text(result)

    first = {r["hour"]: r for r in rows(home, "infra", "load_hourly", DAY, where="model = 'm8'")}
    assert [h for h, r in first.items() if r["over_capacity"]] == [20, 21, 22, 23]
    assert [first[h]["backlog_tokens"] for h in (19, 20, 21, 22, 23)] == pytest.approx([0, 60, 120, 180, 240])
    # 2026-11-16 was never materialized: the first day starts from nothing.
    assert (first[0]["backlog_start_tokens"], first[0]["backlog_carried_from_day"]) == (0.0, None)

    second = {r["hour"]: r for r in rows(home, "infra", "load_hourly", "2026-11-18", where="model = 'm8'")}
    assert str(second[0]["backlog_carried_from_day"]) == DAY
    assert [second[h]["backlog_start_tokens"] for h in range(5)] == pytest.approx([240, 180, 120, 60, 0])
    assert [second[h]["backlog_tokens"] for h in range(5)] == pytest.approx([180, 120, 60, 0, 0])
    assert not any(r["over_capacity"] for r in second.values())
    plan = by_deployment(home, "capacity_plan_daily", "2026-11-18")["m8-onprem"]
    assert (plan["hours_over_capacity"], plan["max_backlog_tokens"]) == (0, pytest.approx(180))


# --- demonstrated capacity ---------------------------------------------------------------------------------------

def _clustered(prefix: str, start: datetime, n: int, every: timedelta, **fields: Any) -> list[dict[str, Any]]:
    return [request(f"{prefix}{k}", received_at=at(start + k * every), **fields) for k in range(n)]


def _demonstrated_day(home: Path) -> None:
    slo(home, min_requests_per_bucket=10)
    three_min = timedelta(minutes=3)
    m8 = {"model": "m8", "deployment_id": "m8-onprem"}
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        # m70, 10:00-10:27: 10 compliant requests of 100 output tokens in bucket 0-4k. Only the window
        # [10:00, 10:30) holds all 10 (any other holds fewer than min_requests_per_bucket, so judges nothing).
        *_clustered("a", T0 + timedelta(hours=10), 10, three_min, output_tokens=100),
        # m70, 14:00-14:28: 10 compliant requests of 200 tokens in 0-4k and 10 in 4k+ of which 5 miss their TTFT
        # limit (3,000 > 2,500 ms). More compliant output than at 10:00, but bucket 4k+ attains 0.5.
        *_clustered("b", T0 + timedelta(hours=14), 10, three_min, output_tokens=200),
        *_clustered("c", T0 + timedelta(hours=14, minutes=1, seconds=30), 5, 2 * three_min, input_tokens=5000),
        *_clustered("d", T0 + timedelta(hours=14, minutes=4, seconds=30), 5, 2 * three_min, input_tokens=5000,
                    ttft_ms=3000.0, e2e_ms=4000.0),
        # m8, 12:00:00-12:01:50: 12 requests, 6 over the 1,000 ms TTFT limit: every window that judges them fails.
        *_clustered("e", T0 + timedelta(hours=12), 6, timedelta(seconds=20), **m8),
        *_clustered("f", T0 + timedelta(hours=12, seconds=10), 6, timedelta(seconds=20), ttft_ms=1200.0, **m8),
    ])


def test_demonstrated_capacity_is_the_best_window_where_every_commitment_held(home: Path) -> None:
    _demonstrated_day(home)
    run_day(upto=["infra/capacity_daily", "core/capacity_windows"])

    cap = by_deployment(home, "capacity_daily")
    m70 = cap["m70-h100"]
    # 10 x 100 compliant tokens over 1,800 s on 24 GPUs; a lower bound, never verified.
    assert (m70["capacity_source"], m70["capacity_verified"]) == ("demonstrated", False)
    assert m70["capacity_goodput_per_gpu"] == pytest.approx(1000 / 1800 / 24)
    assert m70["demonstrated_goodput_per_gpu"] == m70["capacity_goodput_per_gpu"]
    assert m70["daily_capacity_tokens"] == pytest.approx(1000 / 1800 * 86_400)
    assert m70["capacity_note"] == ("lower bound: best 30-min window 10:00–10:30 UTC where every commitment held "
                                    "(1 of 283 windows held); no load test of this configuration")
    assert (m70["lambda_slo_max"], m70["loadtest_run_id"]) == (None, None)
    # Produced: 1,000 + 2,000 + 10 x 50 (the 4k+ requests, compliant or not) = 3,500 tokens.
    assert m70["output_tokens"] == 3500
    assert m70["utilization"] == pytest.approx(3500 / (1000 / 1800 * 86_400))
    assert m70["revenue_at_list_price"] is None  # conftest's costs.yaml lists no price
    assert m70["daily_value"] is None  # and the bill is empty: no cost

    # m8: the windows that judge its cluster start from 11:35 to 12:00 (6 of them), each at attainment 0.5.
    m8_row = cap["m8-onprem"]
    assert (m8_row["capacity_source"], m8_row["capacity_goodput_per_gpu"], m8_row["daily_capacity_tokens"]) == (
        None, None, None)
    assert m8_row["capacity_verified"] is False
    assert m8_row["capacity_note"] == ("no 30-min window held every commitment (6 judged): bucket 0-4k attainment "
                                       "0.5 at best (target 0.99, missed in 6); no load test of this configuration")
    assert cap["moe-a"]["capacity_note"] == ("no demonstrated capacity: no effective request in any 30-min window of "
                                             "the day; no load test of this configuration")

    windows = rows(home, "core", "capacity_windows", DAY, where="deployment_id = 'm70-h100'", order="window_index")
    # 30-min windows every 5 minutes, the last starting 23:30: 283 a day.
    assert len(windows) == 283 and windows[-1]["window_start"] == T0 + timedelta(hours=23, minutes=30)
    held = [w for w in windows if w["qualifies"]]
    assert [(w["window_start"], w["is_best"]) for w in held] == [(T0 + timedelta(hours=10), True)]
    failed = next(w for w in windows if w["window_start"] == T0 + timedelta(hours=14))
    assert (failed["buckets_failed"], failed["all_met"], failed["compliant_output_tokens"]) == (["4k+"], False, 2250)
    assert [(b["isl_bucket"], b["effective_requests"], b["attainment"]) for b in failed["buckets"]] == [
        ("0-4k", 10, 1.0), ("4k+", 10, 0.5)]
    # The window after it sees only 8 of the 0-4k requests and 5 of the 4k+: nothing judged, nothing held.
    after = next(w for w in windows if w["window_start"] == T0 + timedelta(hours=14, minutes=5))
    assert (after["buckets_judged"], after["all_met"]) == (0, False)
    assert sum(w["buckets_judged"] > 0 for w in windows) == 2
    # The time-weighted GPUs of every window: 24 all day.
    assert {w["gpus"] for w in windows} == {24.0}


def test_two_hour_windows_every_two_hours(home: Path) -> None:
    # A step of 2 hours (7.2e9 us) is allowed (step_min up to 1440): the windows' arithmetic must not overflow.
    slo(home, stable_window_min=120, step_min=120)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", _clustered("a", T0 + timedelta(hours=10), 10,
                                                                timedelta(minutes=3), output_tokens=100))
    run_day(upto=["core/capacity_windows"])
    windows = rows(home, "core", "capacity_windows", DAY, where="deployment_id = 'm70-h100'", order="window_index")
    # 12 windows, 00:00-02:00 to 22:00-24:00; the ten requests of 10:00-10:27 are all in the sixth
    assert [w["requests"] for w in windows] == [0] * 5 + [10] + [0] * 6


def test_windows_taken_in_batches_are_the_windows_taken_at_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The windows' P99s are taken a batch of windows at a time (tokenledger/capacity/day.py); batches of one window
    give the same table as the whole day in one batch."""
    _demonstrated_day(home)
    run_day(upto=["core/capacity_windows"])
    whole = rows(home, "core", "capacity_windows", DAY, order="deployment_id, window_index")
    # a budget of one successful request (the least), so every window holding one starts a batch of its own
    monkeypatch.setattr(capacity, "PERCENTILE_MEMORY_SHARE", 1e-12)
    result = materialize(DAY, selection=["core/capacity_windows"])
    assert result.success, failure_text(result)
    [materialization] = result.asset_materializations_for_node("core__capacity_windows")
    # Windows start every 5 minutes and last 30: the m70 requests of 10:00-10:27 are in the 11 windows starting
    # 09:35-10:25, those of 14:00-14:28:30 in 13:35-14:25 (11), the m8 ones of 12:00-12:01:50 in 11:35-12:00 (6).
    assert materialization.metadata["percentile_batches"].value == 28
    assert rows(home, "core", "capacity_windows", DAY, order="deployment_id, window_index") == whole


# --- task attainment -------------------------------------------------------------------------------------------

def test_task_attainment_beside_attainment_to_the_mean_steps(home: Path) -> None:
    slo(home, min_requests_per_bucket=1)
    (home / "config" / "costs.yaml").write_text(COSTS_WITH_LIST_PRICES)
    minute = timedelta(minutes=1)
    t10 = T0 + timedelta(hours=10)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        # s1: 3 steps, all compliant. s2: 3 steps, the last one (at 16:00) over its TTFT limit. s3: a cancelled step
        # and 2 compliant ones. s4: only a cancelled step, so no effective request: not a task.
        *[request(f"s1-{k}", session_id="s1", output_tokens=100, received_at=at(t10 + k * minute)) for k in range(3)],
        *[request(f"s2-{k}", session_id="s2", output_tokens=100, received_at=at(t10 + (3 + k) * minute))
          for k in range(2)],
        request("s2-2", session_id="s2", output_tokens=100, ttft_ms=1200.0,
                received_at=at(T0 + timedelta(hours=16))),
        request("s3-0", session_id="s3", status="cancelled", output_tokens=5, received_at=at(t10 + 5 * minute)),
        *[request(f"s3-{k}", session_id="s3", output_tokens=100, received_at=at(t10 + (5 + k) * minute))
          for k in (1, 2)],
        request("s4-0", session_id="s4", status="cancelled", output_tokens=5, received_at=at(t10 + 8 * minute)),
        # 4 compliant requests outside any session.
        *[request(f"n{k}", output_tokens=50, received_at=at(t10 + (9 + k) * minute)) for k in range(4)],
    ])
    run_day(upto=["infra/capacity_daily"])
    m70 = by_deployment(home, "capacity_daily")["m70-h100"]

    # Effective: 3 + 3 + 2 + 0 + 4 = 12, compliant 11: the model attains 11/12 over the day.
    assert m70["model_attainment"] == pytest.approx(11 / 12)
    # Tasks s1, s2, s3: s1 and s3 had every step compliant; 8 effective steps over 3 tasks.
    assert (m70["sessions"], m70["task_attainment"]) == (3, pytest.approx(2 / 3))
    assert m70["mean_steps_per_session"] == pytest.approx(8 / 3)
    assert m70["expected_task_attainment"] == pytest.approx((11 / 12) ** (8 / 3))
    # Mean output per agent step: the 8 successful session requests (s2's late step succeeded) made 800 tokens.
    assert (m70["mean_output_per_step"], m70["mean_output_per_step_source"]) == (100, "measured")
    # Capacity: every window that judged the 16:00 step failed; the best held window holds all of 10:00-10:12,
    # 900 compliant tokens (s1 300, s2 200, s3 200, the others 200) over 1,800 s on 24 GPUs: 43,200 a day.
    assert m70["daily_capacity_tokens"] == pytest.approx(43_200)
    assert m70["supported_agent_steps"] == pytest.approx(432)
    assert m70["revenue_at_list_price"] == pytest.approx(43_200 / 1e6 * 0.80)
    # m70 is a cloud deployment and the bill is empty: no cost, so no $/MTok under SLO realized or at capacity, no
    # daily cost at capacity and no daily value (daily capacity x $/MTok under SLO at capacity).
    assert (m70["cost_per_mtok_goodput"], m70["daily_cost_at_capacity"]) == (None, None)
    assert (m70["cost_per_mtok_at_capacity"], m70["daily_value"]) == (None, None)


# --- the capacity plan -------------------------------------------------------------------------------------------

def erlang_c_textbook(c: int, a: float) -> float:
    """(a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a)), written out independently of queueing.py."""
    top = a ** c / math.factorial(c) * c / (c - a)
    return top / (sum(a ** k / math.factorial(k) for k in range(c)) + top)


def test_capacity_plan_worked_by_hand(home: Path) -> None:
    # m70 declares a scale-out of 12 minutes and a warm-up of 3: a Lag of 15 minutes.
    inventory = home / "config" / "deployments.yaml"
    inventory.write_text(DEPLOYMENTS_YAML.replace("    model: m70\n", "    model: m70\n    scale_out_minutes: 12\n"
                                                  "    warmup_minutes: 3\n", 1))
    five_s = timedelta(seconds=5)
    t10 = T0 + timedelta(hours=10)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        # 60 requests from 10:00:00 to 10:04:55, E2E alternating 1 s and 2 s, and 10 at 03:00-03:09 of 1.5 s.
        *[request(f"p{k}", received_at=at(t10 + k * five_s), e2e_ms=1000.0 if k % 2 else 2000.0) for k in range(60)],
        *[request(f"q{k}", received_at=at(T0 + timedelta(hours=3, minutes=k))) for k in range(10)],
    ])
    run_day(upto=["infra/capacity_plan_daily", "infra/load_hourly"])
    plan = by_deployment(home, "capacity_plan_daily")["m70-h100"]

    # Busiest 5 minutes [10:00, 10:05): 60 requests = 0.2 req/s. Mean E2E (30 x 1 + 30 x 2 + 10 x 1.5) / 70 = 1.5 s;
    # P99 E2E 2 s (the top 30 values are all 2 s).
    assert (plan["peak_basis"], plan["peak_requests"]) == ("busiest_5min", 60)
    assert (plan["peak_window_start"], plan["peak_window_end"]) == (t10, t10 + timedelta(minutes=5))
    assert plan["peak_arrival_rate"] == pytest.approx(0.2)
    assert plan["mean_service_time_s"] == pytest.approx(1.5)
    assert plan["p99_service_time_s"] == pytest.approx(2.0)
    # Little's law: 0.2 x 1.5 = 0.3 requests in flight, an offered load of 0.3 Erlangs.
    assert plan["littles_law_concurrency"] == pytest.approx(0.3) == plan["offered_load"]

    # Erlang C: the least c with C(c, 0.3) exp(-(c - 0.3) 0.3 / 1.5) <= 1 - 0.99. By hand: c = 2 gives
    # 0.0391 x 0.712 = 0.0279 (too likely to wait over 300 ms); c = 3 gives 0.00370 x 0.583 = 0.00216.
    def p_wait(c: int) -> float:
        return erlang_c_textbook(c, 0.3) * math.exp(-(c - 0.3) * 0.3 / 1.5)

    assert p_wait(2) == pytest.approx(0.02785, abs=1e-5) and p_wait(3) == pytest.approx(0.002158, abs=1e-6)
    assert plan["erlang_c_slots"] == 3
    assert plan["p_wait_over_limit"] == pytest.approx(p_wait(3))
    # 3 slots of 48 per replica: 1 replica. The rule of thumb: 0.2 x (2 + 0.3) / (48 x 0.8) = 0.012: 1 replica.
    assert (plan["replicas_needed_erlang"], plan["replicas_needed_seed_rule"]) == (1, 1)
    assert plan["rule_of_thumb_required_concurrency"] == pytest.approx(0.46)
    assert plan["rule_of_thumb_redundancy"] == 0.8

    # Headroom: 8 GPUs x 1.1 (scaling lag) x 1.1 (forecast error) x 1.05 (release) x 1.05 (jitter), each part on
    # top of the ones before, plus 1 failure replica of 8 GPUs.
    assert plan["base_gpus"] == 8.0
    assert plan["headroom_scaling_lag_gpus"] == pytest.approx(0.8)
    assert plan["headroom_forecast_error_gpus"] == pytest.approx(0.88)
    assert plan["headroom_release_gpus"] == pytest.approx(0.484)
    assert plan["headroom_jitter_gpus"] == pytest.approx(0.5082)
    assert (plan["headroom_failure_replicas"], plan["headroom_failure_gpus"]) == (1, 8.0)
    assert plan["headroom_pct_total"] == pytest.approx(1.1 * 1.1 * 1.05 * 1.05 - 1)
    assert plan["gpus_needed_erlang_c"] == pytest.approx(8 * 1.334025 + 8) == 18.6722
    assert plan["replicas_needed_erlang_c"] == 3
    # 24 GPUs deployed (3 replicas since 2026-11-16 noon): Erlang C's plan alone would leave 5.33 to spare.
    assert plan["gpus_deployed"] == 24.0

    # The model's load: 60 requests at 10:00 against a mean of 70 / 24 an hour. The window [09:35 .. 10:00, +30 min)
    # holding the 60 requests qualifies (60 >= 50 in 0-4k), 3,000 compliant tokens / 1,800 s: 6,000 tokens an
    # hour of capacity against 3,000 demanded at 10:00, so no hour is over capacity.
    assert plan["peak_to_mean"] == pytest.approx(60 / (70 / 24))
    assert (plan["hours_over_capacity"], plan["max_backlog_tokens"]) == (0, 0.0)
    load = {r["hour"]: r for r in rows(home, "infra", "load_hourly", DAY, where="model = 'm70'")}
    assert load[10]["peak_minute_arrival_rate"] == pytest.approx(12 / 60)
    assert load[10]["capacity_token_rate"] == pytest.approx(3000 / 1800)
    assert (plan["slots_per_replica_used"], plan["slots_per_replica_source"]) == (48.0, "inventory")

    # Seed 002's sizing beside it: the peak window's 60 requests of 50 output tokens = 3,000 tokens / 300 s = 10 tok/s,
    # over the day's capacity of 3,000 / 1,800 / 24 tok/s per GPU (the demonstrated window above) = 144 GPUs before
    # headroom; x 1.334025 + 8 failure GPUs = 200.10. It binds: 181.43 more than Erlang C's 18.67, a deficit of
    # 176.10 against the 24 deployed (the day's capacity was only demonstrated on 60 requests).
    per_gpu = 3000 / 1800 / 24
    assert plan["peak_output_tokens"] == 3000 and plan["peak_output_token_rate"] == pytest.approx(10.0)
    assert (plan["capacity_goodput_per_gpu"], plan["capacity_source"]) == (pytest.approx(per_gpu), "demonstrated")
    assert plan["goodput_sizing_base_gpus"] == pytest.approx(144.0)
    assert plan["gpus_needed_goodput"] == pytest.approx(144 * 1.334025 + 8) == 200.0996
    assert plan["replicas_needed_goodput"] == 26  # 200.10 / 8, rounded up
    assert plan["gpus_needed_difference"] == pytest.approx(200.0996 - 18.6722)
    # GPUs needed is the larger sizing, the one figure the verdict uses; the surplus is against it.
    assert (plan["gpus_needed"], plan["binding_sizing"]) == (pytest.approx(200.0996), "goodput")
    assert plan["gpu_surplus"] == pytest.approx(24 - 200.0996)
    # Lag: 12 + 3 = 15 minutes. The 5 minutes from 09:45, 15 minutes before the peak, had no request: the output
    # rate grows by the whole 10 tok/s while a scale-out is under way, 10 / per_gpu = 144 GPUs.
    assert (plan["scale_out_minutes"], plan["warmup_minutes"], plan["lag_minutes"]) == (12.0, 3.0, 15)
    assert plan["lag_growth_token_rate"] == pytest.approx(10.0)
    assert plan["lag_gpus"] == pytest.approx(144.0)
    assert plan["plan_note"] == ("60 requests in the busiest 5 minutes (10:00–10:05 UTC) at 1.5 s each: 0.3 Erlangs; "
                                 "3 slots give P(wait > 300 ms) = 0.00216 <= 0.01; goodput sizing: 10 output tok/s "
                                 "at the peak / 0.06944 tok/s per GPU = 144 GPUs before headroom, 200 with it")

    # A deployment without requests needs no slot, and keeps its failure headroom.
    idle = by_deployment(home, "capacity_plan_daily")["m8-onprem"]
    assert (idle["peak_arrival_rate"], idle["erlang_c_slots"], idle["replicas_needed_erlang"]) == (0.0, 0, 0)
    assert (idle["gpus_needed"], idle["gpus_deployed"], idle["gpu_surplus"]) == (1.0, 4.0, 3.0)
    # m8 has no capacity figure, so no goodput sizing: GPUs needed are Erlang C's.
    assert (idle["gpus_needed_goodput"], idle["gpus_needed_erlang_c"], idle["binding_sizing"]) == (None, 1.0,
                                                                                                   "erlang_c")
    assert idle["lag_minutes"] is None and idle["lag_gpus"] is None


# --- a load test of another day -------------------------------------------------------------------------------

HAND_RUN = """\
run_id: hand
model: m70
deployment_id: m70-h100
start: 2026-11-16T10:00:00Z
warmup_min: 1
steps:
  - {arrival_rate: 0.03, start: 2026-11-16T10:00:00Z, end: 2026-11-16T10:31:00Z}
"""


def test_a_load_test_of_an_earlier_day_and_configuration_carries_over_until_an_engine_upgrade(home: Path) -> None:
    # One step at 16 GPUs before the 2026-11-16 noon scale-up: segment [10:01, 10:31), one compliant request of 50
    # tokens every 30 s, the last finishing at 10:30:31.5 - wall time 1,771.5 s (tests/test_loadtest.py).
    folder = home / "raw" / "loadtest" / "hand"
    start = datetime(2026, 11, 16, 10, 1, tzinfo=UTC)
    write_jsonl(folder / "requests.jsonl", [request(f"a{k}", received_at=at(start + timedelta(seconds=30 * k)))
                                            for k in range(60)])
    (folder / "run.yaml").write_text(HAND_RUN)
    # The inventory declares m70's engine: vLLM 0.6.3 in both versions (the scale-up does not change it).
    inventory = home / "config" / "deployments.yaml"
    inventory.write_text(DEPLOYMENTS_YAML.replace("    model: m70\n", "    model: m70\n    engine: vllm\n"
                                                  "    engine_version: 0.6.3\n", 1))
    # Production on 2026-11-17: 60 compliant requests of 50 tokens, one every 5 s from 10:00, so the 6 windows
    # starting 09:35 to 10:00 hold all 60 (>= 50 in bucket 0-4k): a demonstrated 3,000 / 1,800 / 24 tok/s per GPU.
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request(f"p{k}", received_at=at(T0 + timedelta(hours=10, seconds=5 * k))) for k in range(60)])

    # 2026-11-17 alone: the run started on 2026-11-16, whose core.loadtest_steps was never materialized.
    result = materialize(DAY, upto=["infra/capacity_daily"])  # infra/capacity_daily's step raises it
    assert not result.success
    assert ("load-test run hand" in failure_text(result)
            and "started on 2026-11-16 but core.loadtest_steps has no rows for it" in failure_text(result))

    run_day("2026-11-16", selection=["core/deployments_daily", "core/loadtest_steps"])
    run_day(upto=["infra/capacity_daily"])
    m70 = by_deployment(home, "capacity_daily")["m70-h100"]
    # Same GPU type, GPUs per replica, TP, PP and quantization at 24 GPUs as at 16: goodput per GPU carries over.
    assert (m70["capacity_source"], m70["capacity_verified"], m70["loadtest_run_id"]) == ("loadtest", True, "hand")
    assert m70["capacity_goodput_per_gpu"] == pytest.approx(3000 / 1771.5 / 16)
    assert m70["daily_capacity_tokens"] == pytest.approx(3000 / 1771.5 / 16 * 24 * 86_400)
    assert m70["capacity_note"].startswith("load test hand verified at 0.03 req/s")
    assert (m70["engine"], m70["engine_version"], m70["cache_policy"]) == ("vllm", "0.6.3", "prefix-cache")
    # The load test measured m70-h100 only.
    assert by_deployment(home, "capacity_daily")["m8-onprem"]["loadtest_run_id"] is None

    # vLLM is upgraded to 0.7.0 at midnight: the run measured another engine, so it no longer speaks for m70-h100,
    # and the capacity falls back to the day's demonstrated lower bound, saying why.
    inventory.write_text(inventory.read_text().replace(
        "  - <<: *m70\n    gpus: 24\n    valid_from: 2026-11-16T12:00:00Z\n    valid_to: null\n",
        "  - <<: *m70\n    gpus: 24\n    valid_from: 2026-11-16T12:00:00Z\n    valid_to: 2026-11-17T00:00:00Z\n"
        "  - <<: *m70\n    gpus: 24\n    engine_version: 0.7.0\n    valid_from: 2026-11-17T00:00:00Z\n"
        "    valid_to: null\n"))
    run_day(selection=["core/deployments_daily", "core/capacity_windows", "infra/capacity_daily"])
    m70 = by_deployment(home, "capacity_daily")["m70-h100"]
    assert (m70["capacity_source"], m70["capacity_verified"], m70["loadtest_run_id"]) == ("demonstrated", False, None)
    assert m70["capacity_goodput_per_gpu"] == pytest.approx(3000 / 1800 / 24)
    assert (m70["engine_version"], m70["other_configuration_run_id"]) == ("0.7.0", "hand")
    assert m70["other_configuration_differences"] == "engine_version 0.6.3 → 0.7.0"
    assert m70["capacity_note"] == (
        "lower bound: best 30-min window 09:35–10:05 UTC where every commitment held (6 of 283 windows held); no "
        "load test of this configuration: load test hand (2026-11-16 10:00 UTC) measured another configuration "
        "(engine_version 0.6.3 → 0.7.0) and is not carried over")
