"""The capacity math of tokenledger.capacity.queueing against textbook values, brute force and the seeds' own
examples."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from tokenledger.capacity.queueing import (
    Headroom,
    capacity_shortfall,
    erlang_b,
    erlang_c,
    fluid_backlog,
    gpus_needed,
    least_slots,
    littles_law_concurrency,
    p_wait_longer_than,
    seed_rule_replicas,
)


def _erlang_c_textbook(c: int, a: Fraction) -> Fraction:
    """C(c, a) = (a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a)), in exact rational arithmetic."""
    top = a**c / math.factorial(c) * Fraction(c) / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def _erlang_c_log_space(c: int, a: float) -> float:
    """The same formula with every term as a logarithm (lgamma for k!), so that it holds for c in the thousands."""
    log_terms = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)]
    log_top = c * math.log(a) - math.lgamma(c + 1) + math.log(c / (c - a))
    peak = max(*log_terms, log_top)
    total = sum(math.exp(t - peak) for t in log_terms) + math.exp(log_top - peak)
    return math.exp(log_top - peak) / total


def test_erlang_c_by_hand() -> None:
    # c = 2, a = 1: sum_{k<2} a^k/k! = 1 + 1 = 2; a^2/2! * 2/(2-1) = 1/2 * 2 = 1; C = 1 / (2 + 1) = 1/3.
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3, rel=1e-12)
    # c = 3, a = 2: 1 + 2 + 2 = 5; 8/6 * 3/1 = 4; C = 4 / 9.
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9, rel=1e-12)
    # Erlang B by hand, c = 2, a = 1: B(1) = 1/(1+1) = 1/2, B(2) = (1/2)/(2 + 1/2) = 1/5.
    assert erlang_b(2, 1.0) == pytest.approx(0.2, rel=1e-12)


@pytest.mark.parametrize(("c", "load", "expected"), [(5, 4.0, 0.5541), (10, 8.0, 0.4092)])
def test_erlang_c_textbook_tables(c: int, load: float, expected: float) -> None:
    assert round(erlang_c(c, load), 4) == expected


@pytest.mark.parametrize("c", [1, 2, 3, 7, 12, 30])
def test_erlang_c_matches_the_textbook_formula_exactly(c: int) -> None:
    for a in (Fraction(1, 10), Fraction(c, 2), Fraction(9 * c, 10), Fraction(99 * c, 100)):
        assert erlang_c(c, float(a)) == pytest.approx(float(_erlang_c_textbook(c, a)), rel=1e-12)


def test_erlang_c_is_monotone() -> None:
    # More slots, less waiting; more load, more waiting.
    by_slots = [erlang_c(c, 8.0) for c in range(9, 40)]
    assert all(x > y for x, y in zip(by_slots, by_slots[1:], strict=False))
    by_load = [erlang_c(10, a / 10) for a in range(1, 100)]
    assert all(x < y for x, y in zip(by_load, by_load[1:], strict=False))


def test_erlang_c_is_one_when_the_queue_never_empties() -> None:
    assert erlang_c(4, 4.0) == 1.0
    assert erlang_c(4, 9.5) == 1.0
    assert p_wait_longer_than(4, 4.0, 10.0, 1.0) == 1.0
    assert erlang_c(4, 0.0) == 0.0


@pytest.mark.parametrize(("c", "load"), [(1000, 950.0), (3000, 2950.0), (5000, 4800.0), (8000, 7990.0)])
def test_erlang_c_for_thousands_of_slots(c: int, load: float) -> None:
    value = erlang_c(c, load)
    assert 0.0 < value < 1.0 and math.isfinite(value)
    assert value == pytest.approx(_erlang_c_log_space(c, load), rel=1e-9)


def test_erlang_c_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        erlang_c(0, 1.0)
    with pytest.raises(ValueError):
        erlang_c(3, -1.0)
    with pytest.raises(ValueError):
        erlang_c(3, float("nan"))


def test_p_wait_longer_than() -> None:
    # c = 2, a = 1, s = 1 s: P(wait > 0.5 s) = 1/3 * exp(-(2 - 1) * 0.5 / 1).
    assert p_wait_longer_than(2, 1.0, 0.5, 1.0) == pytest.approx(math.exp(-0.5) / 3, rel=1e-12)
    assert p_wait_longer_than(2, 1.0, 0.0, 1.0) == pytest.approx(1 / 3, rel=1e-12)


def _least_slots_brute_force(arrival_rate: float, service_time: float, wait_limit_s: float, target: float) -> int:
    load = arrival_rate * service_time
    for c in range(1, 100_000):
        if c > load and p_wait_longer_than(c, load, wait_limit_s, service_time) <= target:
            return c
    raise AssertionError("no c found")


@pytest.mark.parametrize(("arrival_rate", "service_time", "wait_limit_s", "target"), [
    (10.0, 2.0, 0.3, 0.01),     # the plan's shape: queue_p99_ms = 300, attainment_target = 0.99
    (0.05, 4.0, 0.3, 0.01),     # a trickle still needs one slot
    (100.0, 2.0, 0.3, 0.01),
    (12.4, 6.5, 0.3, 0.001),
    (350.0, 3.0, 1.0, 0.05),
    (3.0, 1.0, 0.0, 0.2),       # t = 0: P(wait at all) <= 0.2
    (5.0, 1.0, 0.3, 1.0),       # any stable c meets a target of 1: the least c above the load
])
def test_least_slots_matches_a_brute_force_scan(arrival_rate: float, service_time: float, wait_limit_s: float,
                                                 target: float) -> None:
    expected = _least_slots_brute_force(arrival_rate, service_time, wait_limit_s, target)
    assert least_slots(arrival_rate, service_time, wait_limit_s, target) == expected


def test_least_slots_edges() -> None:
    assert least_slots(0.0, 2.0, 0.3, 0.01) == 0
    assert least_slots(5.0, 1.0, 0.3, 1.0) == 6
    with pytest.raises(ValueError):
        least_slots(1.0, 1.0, 0.3, 0.0)


def test_littles_law() -> None:
    # 10 requests/s each in flight for 2.5 s on average: 25 in flight.
    assert littles_law_concurrency(10.0, 2.5) == 25.0
    assert littles_law_concurrency(0.0, 3.0) == 0.0


def test_seed_000_rule_on_its_own_numbers() -> None:
    # Seed 000's demand curve, in requests per hour: 18 hours at 40, 6 hours at 160. The rule takes the peak hour.
    hourly = [40] * 18 + [160] * 6
    peak_qps = max(hourly) / 3600
    # P99 service time 20 s and an SLA wait of 25 s: required = 160/3600 * 45 = 2.0 concurrent requests;
    # one request per replica at the seed's redundancy 0.8: ceil(2.0 / 0.8) = ceil(2.5) = 3 replicas.
    required, replicas = seed_rule_replicas(peak_qps, 20.0, 25.0, 1, 0.8)
    assert required == pytest.approx(2.0)
    assert replicas == 3
    # The daily mean (1,680 / 24 = 70 per hour) would have planned 0.875 -> ceil(1.09375) = 2: too few at the peak.
    mean_qps = sum(hourly) / 24 / 3600
    assert seed_rule_replicas(mean_qps, 20.0, 25.0, 1, 0.8) == (pytest.approx(0.875), 2)


def test_seed_rule_ignores_float_noise() -> None:
    # 10 * (0.2 + 0.1) is 3.0000000000000004 in floating point: still exactly one replica of 3.
    assert seed_rule_replicas(10.0, 0.2, 0.1, 3, 1.0) == (pytest.approx(3.0), 1)


def test_seed_000_backlog_with_the_peak_at_the_end() -> None:
    demand = [40.0] * 18 + [160.0] * 6
    assert sum(demand) == 1680 and sum(demand) / (100 * 24) == pytest.approx(0.70)
    shortfall = capacity_shortfall(demand, 100.0)
    assert shortfall.hours_over_capacity == 6
    assert shortfall.backlog[17] == 0.0
    assert shortfall.backlog[18:] == [60.0, 120.0, 180.0, 240.0, 300.0, 360.0]
    assert shortfall.max_backlog == 360.0


def test_seed_000_backlog_with_the_peak_in_the_middle() -> None:
    demand = [40.0] * 9 + [160.0] * 6 + [40.0] * 9
    backlog = fluid_backlog(demand, [100.0] * 24)
    assert capacity_shortfall(demand, 100.0).hours_over_capacity == 6
    assert max(backlog) == 360.0 and backlog[14] == 360.0
    # After the peak the quiet hours drain 60 an hour: 300, 240, ..., 0 six hours later, then nothing is carried.
    assert backlog[15:21] == [300.0, 240.0, 180.0, 120.0, 60.0, 0.0]
    assert backlog[21:] == [0.0, 0.0, 0.0]


def test_backlog_of_scattered_peaks() -> None:
    # The same 1,680 with the six peak hours apart: each quiet hour drains the last peak's 60 before the next.
    demand = [160.0 if h % 4 == 0 else 40.0 for h in range(24)]
    shortfall = capacity_shortfall(demand, 100.0)
    assert sum(demand) == 1680 and shortfall.hours_over_capacity == 6 and shortfall.max_backlog == 60.0


def test_backlog_capacity_must_cover_every_hour() -> None:
    with pytest.raises(ValueError):
        fluid_backlog([1.0, 2.0], [1.0])


def test_gpus_needed_worked_example() -> None:
    # 4 replicas of 8 GPUs = 32. Percentages applied in turn: 32 * 1.10 = 35.2 (+3.2 scaling lag),
    # * 1.10 = 38.72 (+3.52 forecast error), * 1.05 = 40.656 (+1.936 release), * 1.05 = 42.6888 (+2.0328 jitter);
    # 32 * 1.1 * 1.1 * 1.05 * 1.05 = 32 * 1.334025. One failure replica adds 8: 50.6888 GPUs, 7 whole replicas.
    need = gpus_needed(4, 8, Headroom(n_minus_k=1, scaling_lag_pct=0.10, forecast_error_pct=0.10,
                                      release_pct=0.05, jitter_pct=0.05))
    assert need.base_gpus == 32.0
    assert need.pct_factor == pytest.approx(1.334025)
    assert need.pct_gpus == pytest.approx({"scaling_lag": 3.2, "forecast_error": 3.52, "release": 1.936,
                                           "jitter": 2.0328})
    assert need.failure_replicas == 1 and need.failure_gpus == 8.0
    assert need.gpus_needed == pytest.approx(32 * 1.334025 + 8) == pytest.approx(50.6888)
    assert need.base_gpus + sum(need.pct_gpus.values()) + need.failure_gpus == pytest.approx(need.gpus_needed)
    assert need.headroom_gpus == pytest.approx(18.6888)
    assert need.replicas_needed == 7
    assert need.surplus(48) == pytest.approx(-2.6888)  # 6 replicas deployed: a deficit
    assert need.surplus(56) == pytest.approx(5.3112)


def test_gpus_needed_without_headroom_is_the_replicas() -> None:
    need = gpus_needed(3, 8, Headroom())
    assert need.gpus_needed == 24.0 and need.replicas_needed == 3 and need.pct_factor == 1.0
