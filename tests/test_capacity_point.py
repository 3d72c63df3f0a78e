"""The four numbers at the capacity point, the input at capacity, raw throughput over effective requests and a bucket
too thin to judge, on hand-made days (docs/metrics.md, sections 2 and 5; docs/adr/0124-the-capacity-point.md).

The inventory is conftest's with m8-onprem on 2 L40S GPUs (on premises, so its cost is the rate card's and known
without a bill). Every expected number is worked out here from the requests written.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import DEPLOYMENTS_YAML, gateway_dir, request, rows, write_jsonl
from tests.test_capacity import (
    COSTS_WITH_LIST_PRICES,
    DAY,
    RATE_CARD_PER_GPU_HOUR,
    SEED_RUN,
    T0,
    at,
    by_deployment,
    run_day,
)
from tokenledger.report.review import Review, capacity_point_text, fmt, slo_table

# The rate card's cost of m8-onprem's 2 GPUs for 24 hours: the daily cost, the same at any load.
DAY_COST = 2 * 24 * RATE_CARD_PER_GPU_HOUR

# One verified step of 0.03 req/s from 02:00 on 2026-11-17, the run of tests/test_capacity.py's worked day.
RUN = SEED_RUN


def _two_gpus(home: Path) -> None:
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML.replace("    gpus: 4\n", "    gpus: 2\n"))
    (home / "config" / "costs.yaml").write_text(COSTS_WITH_LIST_PRICES)


def _production(home: Path, extra: list[dict] | None = None) -> None:
    """The day's m8 requests, from 12:00 one a minute: 60 compliant in bucket 0-4k (100 output tokens each, in 10
    agent sessions of 6 steps), 40 in bucket 4k+ that all miss its 2,500 ms TTFT limit (50 output tokens each),
    5 timeouts in 0-4k with 20 output tokens each and 3 cancelled with 7 each."""
    noon = T0 + timedelta(hours=12)
    minute = timedelta(minutes=1)
    records = [request(f"ok{k}", model="m8", deployment_id="m8-onprem", output_tokens=100, itl_max_ms=...,
                       e2e_ms=300.0 + 99 * 30.0, session_id=f"s{k // 6}", received_at=at(noon + k * minute))
               for k in range(60)]
    records += [request(f"slow{k}", model="m8", deployment_id="m8-onprem", input_tokens=5000, cached_input_tokens=0,
                        output_tokens=50, ttft_ms=3000.0, e2e_ms=3000.0 + 49 * 30.0, itl_max_ms=...,
                        received_at=at(noon + (60 + k) * minute)) for k in range(40)]
    records += [request(f"to{k}", model="m8", deployment_id="m8-onprem", status="timeout", output_tokens=20,
                        e2e_ms=300.0 + 19 * 30.0, itl_max_ms=..., received_at=at(noon + (100 + k) * minute))
                for k in range(5)]
    records += [request(f"c{k}", model="m8", deployment_id="m8-onprem", status="cancelled", output_tokens=7,
                        e2e_ms=300.0 + 6 * 30.0, itl_max_ms=..., received_at=at(noon + (105 + k) * minute))
                for k in range(3)]
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", records + (extra or []))


def _verified_load_test(home: Path) -> None:
    """A verified load test of m8-onprem (2 GPUs): its one step's segment [02:01, 02:31) holds 50 requests of one
    output token, 2,000 input tokens of which 1,500 cached, one every 36 s from 02:01:00; the last, received
    02:30:24, takes 36 s, so the wall time is exactly 1,800 s."""
    folder = home / "raw" / "loadtest" / "lt-m8"
    start = datetime(2026, 11, 17, 2, 1, tzinfo=UTC)
    run = [request(f"lt{k}", model="m8", deployment_id="m8-onprem", output_tokens=1, itl_max_ms=...,
                   input_tokens=2000, cached_input_tokens=1500, received_at=at(start + timedelta(seconds=36 * k)),
                   e2e_ms=36_000.0 if k == 49 else 1500.0)
           for k in range(50)]
    write_jsonl(folder / "requests.jsonl", run)
    (folder / "run.yaml").write_text(RUN)


def test_the_four_numbers_at_a_verified_capacity_point(home: Path) -> None:
    _two_gpus(home)
    _verified_load_test(home)
    _production(home)
    run_day(upto=["infra/capacity_daily", "infra/slo_daily"])
    cap = by_deployment(home, "capacity_daily")["m8-onprem"]

    # Capacity: 50 compliant tokens over 1,800 s on the 2 GPUs under test; daily capacity on the deployment's
    # 2 GPUs = 50 / 1,800 / 2 x 2 x 86,400 = 2,400 output tokens.
    assert (cap["capacity_source"], cap["capacity_verified"], cap["gpus"]) == ("loadtest", True, 2.0)
    assert cap["capacity_goodput_per_gpu"] == pytest.approx(50 / 1800 / 2)
    assert cap["daily_capacity_tokens"] == pytest.approx(2400)
    # 1. $/MTok under SLO at capacity: the day's cost over the daily capacity in millions.
    assert cap["daily_cost_at_capacity"] == pytest.approx(DAY_COST)
    assert cap["cost_per_mtok_at_capacity"] == pytest.approx(DAY_COST / (2400 / 1e6))
    # 2. Daily capacity (above). 3. Daily value = daily capacity / 1e6 x $/MTok under SLO at capacity: the day's
    # cost again; revenue at list price = 2,400 / 1e6 x 0.20 per output MTok.
    assert cap["daily_value"] == pytest.approx(2400 / 1e6 * (DAY_COST / (2400 / 1e6)))
    assert cap["daily_value"] == pytest.approx(DAY_COST)
    assert cap["revenue_at_list_price"] == pytest.approx(2400 / 1e6 * 0.20)
    # 4. Supported agent steps: 60 successful session requests made 6,000 tokens, 100 a step: 2,400 / 100 = 24.
    assert (cap["mean_output_per_step"], cap["mean_output_per_step_source"]) == (100, "measured")
    assert cap["supported_agent_steps"] == pytest.approx(24)
    # Realized, beside them: the same cost over the day's 6,000 compliant tokens.
    assert cap["cost_per_mtok_goodput"] == pytest.approx(DAY_COST / 6000 * 1e6)

    # Input at lambda_slo_max: the step's 2,000 input tokens (1,500 cached, 500 recomputed) per compliant output
    # token, at the capacity's 2,400 / 86,400 output tokens a second.
    rate = 2400 / 86_400
    assert cap["input_total_rate_at_capacity"] == pytest.approx(rate * 2000)
    assert cap["input_cached_rate_at_capacity"] == pytest.approx(rate * 1500)
    assert cap["input_recomputed_rate_at_capacity"] == pytest.approx(rate * 500)
    assert (cap["daily_input_capacity_total"], cap["daily_input_capacity_cached"],
            cap["daily_input_capacity_recomputed"]) == (pytest.approx(4_800_000), pytest.approx(3_600_000),
                                                        pytest.approx(1_200_000))

    # Raw throughput over every effective request: 60 x 100 + 40 x 50 + 5 timeouts x 20 = 8,100 tokens (the 3
    # cancelled requests' 21 left out); over successful requests alone 8,000.
    assert cap["effective_output_tokens"] == 8100
    assert cap["raw_throughput"] == pytest.approx(8100 / 86_400)
    assert cap["output_tokens"] == 8000 and cap["raw_throughput_successful"] == pytest.approx(8000 / 86_400)

    # The review says it in words, "at capacity" beside "realized", every figure the cell above.
    usd = "USD"
    assert str(capacity_point_text(cap)) == (
        f"at capacity: $/MTok under SLO {fmt(DAY_COST / 0.0024, 'money_mtok', usd)}, daily value "
        f"{fmt(DAY_COST, 'money', usd)} (daily cost at capacity {fmt(DAY_COST, 'money', usd)}), revenue at list "
        f"price 0.00 USD; realized: $/MTok under SLO {fmt(DAY_COST / 0.006, 'money_mtok', usd)}; input at capacity "
        "55.56 tok/s = 41.67 cached + 13.89 recomputed, a day 4,800,000 = 3,600,000 + 1,200,000")


def test_a_bucket_of_40_requests_is_shown_and_counted_in_the_day(home: Path) -> None:
    _two_gpus(home)
    _production(home)
    run_day(upto=["infra/slo_daily"])
    slo = {r["isl_bucket"]: r for r in rows(home, "infra", "slo_daily", DAY, where="model = 'm8'")}

    # 4k+: 40 effective requests, none compliant, under the minimum of 50: not judged, yet every figure is there.
    thin = slo["4k+"]
    assert (thin["effective_requests"], thin["judged_requests"], thin["compliant_requests"]) == (40, 40, 0)
    assert thin["attainment"] == 0.0 and thin["success_rate"] == 1.0
    assert (thin["judged"], thin["min_requests_per_bucket"], thin["attainment_met"]) == (False, 50, None)
    # 0-4k: 60 compliant and 5 timeouts = 65 judged; the day ('all') counts the thin bucket's 40 too:
    # 60 compliant of 60 + 40 + 5 = 105 judged requests (the 3 cancelled leave every denominator).
    assert (slo["0-4k"]["judged"], slo["0-4k"]["attainment"]) == (True, pytest.approx(60 / 65))
    whole = slo["all"]
    assert (whole["effective_requests"], whole["judged_requests"], whole["compliant_requests"]) == (105, 105, 60)
    assert whole["attainment"] == pytest.approx(60 / 105) and whole["judged"] is True

    # The review shows the thin bucket's figures and says why it has no verdict.
    policy = {"m8": {"attainment_target": 0.99, "success_rate_target": 0.9995, "min_requests_per_bucket": 50,
                     "isl_buckets": [{"isl_bucket": "0-4k", "ttft_limit_ms": 1000},
                                     {"isl_bucket": "4k+", "ttft_limit_ms": 2500}]}}
    review = Review(day=T0.date(), capacity=[], plan=[], load=[], slo=list(slo.values()), cost_history=[],
                    policy=policy)
    table = slo_table(review, "m8")
    shown = {row[0]: row for row in table.text_rows()}
    assert shown["4k+"][2:4] == ["40", "0.0000"]
    assert shown["4k+"][-1] == "too few requests to judge (40 of 50)"
    assert shown["0-4k"][-1] == "missed" and shown["all"][2] == "105"


def test_the_input_at_a_demonstrated_capacity_is_its_best_windows_mix(home: Path) -> None:
    # No load test: 60 compliant requests from 10:00, one every 20 s (the last 10:19:40), each 3,000 input tokens
    # of which 2,400 cached and 10 output tokens (TPOT 30 ms). The 30-min windows from 09:50, 09:55 and 10:00 hold
    # all 60; the earliest is the best: 600 compliant tokens over 1,800 s on 2 GPUs, a daily capacity of
    # 600 / 1,800 x 86,400 = 28,800 output tokens.
    _two_gpus(home)
    ten = T0 + timedelta(hours=10)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request(f"w{k}", model="m8", deployment_id="m8-onprem", input_tokens=3000, cached_input_tokens=2400,
                output_tokens=10, e2e_ms=300.0 + 9 * 30.0, received_at=at(ten + timedelta(seconds=20 * k)))
        for k in range(60)])
    run_day(upto=["infra/capacity_daily"])
    cap = by_deployment(home, "capacity_daily")["m8-onprem"]
    assert cap["capacity_source"] == "demonstrated"
    assert cap["daily_capacity_tokens"] == pytest.approx(28_800)
    best = rows(home, "core", "capacity_windows", DAY, where="deployment_id = 'm8-onprem' AND is_best")
    assert [(w["window_start"].hour, w["window_start"].minute) for w in best] == [(9, 50)]
    assert (best[0]["input_total"], best[0]["input_cached"], best[0]["input_recomputed"]) == (180_000, 144_000,
                                                                                            36_000)
    # 300 input tokens per compliant output token (240 cached, 60 recomputed) at 28,800 / 86,400 = 1/3 output
    # token a second: 100 input tokens a second, 80 cached and 20 recomputed; a day 8,640,000 = 6,912,000 +
    # 1,728,000.
    assert cap["input_total_rate_at_capacity"] == pytest.approx(100)
    assert cap["input_cached_rate_at_capacity"] == pytest.approx(80)
    assert cap["input_recomputed_rate_at_capacity"] == pytest.approx(20)
    assert cap["daily_input_capacity_total"] == pytest.approx(8_640_000)
    assert cap["daily_input_capacity_cached"] == pytest.approx(6_912_000)
    assert cap["daily_input_capacity_recomputed"] == pytest.approx(1_728_000)
    # The cost at capacity: the day's rate-card cost over 28,800 tokens; realized over the day's 600.
    assert cap["cost_per_mtok_at_capacity"] == pytest.approx(DAY_COST / 28_800 * 1e6)
    assert cap["cost_per_mtok_goodput"] == pytest.approx(DAY_COST / 600 * 1e6)
    assert cap["daily_value"] == pytest.approx(DAY_COST)
    assert cap["revenue_at_list_price"] == pytest.approx(28_800 / 1e6 * 0.20)
