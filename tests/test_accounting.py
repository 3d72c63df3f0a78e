"""Token, SLO and goodput accounting, materialized through Dagster into a temporary home, against hand-made days.

Every expected number is worked out in the test from the requests written, never read back from the pipeline.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import failure_text, gateway_dir, materialize, request, rows, write_jsonl

DAY = "2026-11-16"
D = date(2026, 11, 16)

BUCKETS = (("0-4k", 0, 4096, 1000), ("4k-32k", 4096, 32768, 2500), ("32k-128k", 32768, 131072, 6000),
           ("128k+", 131072, None, 15000))
POLICY = {"itl_limit_ms": 100, "itl_missing": "ignore", "itl_p99_ms": 100, "queue_p99_ms": 300, "tpot_p99_ms": 40,
          "success_rate_target": 0.9995, "attainment_target": 0.99, "stable_window_min": 30, "step_min": 5,
          "min_requests_per_bucket": 50, "peak_basis": "busiest_5min", "agent_step_output_tokens": 247}


def _buckets_yaml(buckets: tuple[tuple[str, int, int | None, float], ...]) -> str:
    return "[" + ", ".join(
        f'{{isl_bucket: "{n}", min_input_tokens: {lo}, max_input_tokens: {"null" if hi is None else hi}, '
        f"ttft_limit_ms: {limit}}}" for n, lo, hi, limit in buckets) + "]"


def slo_version(name: str, valid_from: str, buckets=BUCKETS, models: dict[str, dict[str, Any]] | None = None,
                **policy: Any) -> str:
    """One version of slo.yaml in the documented format; `models` are per-model overrides."""
    lines = [f"  - slo_version: {name}", f"    valid_from: {valid_from}", "    default:",
             f"      isl_buckets: {_buckets_yaml(buckets)}"]
    lines += [f"      {k}: {v}" for k, v in {**POLICY, **policy}.items()]
    lines.append("      headroom: {n_minus_k: 1, scaling_lag_pct: 0.1, forecast_error_pct: 0.1, release_pct: 0.05, "
                 "jitter_pct: 0.05}")
    if models:
        lines.append("    models:")
        for model, keys in models.items():
            lines.append(f"      {model}:")
            lines += [f"        {k}: {_buckets_yaml(v) if k == 'isl_buckets' else v}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def write_slo(home: Path, *versions: str) -> None:
    (home / "config" / "slo.yaml").write_text("versions:\n" + "".join(versions))


def pct(values: list[float], q: float) -> float:
    """numpy's default percentile is linear interpolation, the same rule as DuckDB's quantile_cont."""
    return float(np.percentile(values, q))


def by_bucket(home: Path, day: str = DAY, model: str = "m70") -> dict[str, dict[str, Any]]:
    return {r["isl_bucket"]: r for r in rows(home, "infra", "slo_daily", day, where=f"model = '{model}'")}


# --- the 20-request fixture ----------------------------------------------------------------------------------

def _none(**fields: Any) -> dict[str, Any]:
    """Fields of a request that has no output token: no TTFT, queue or ITL."""
    return {"output_tokens": 0, "ttft_ms": ..., "queue_ms": ..., "itl_max_ms": ..., **fields}


TWENTY = [
    # bucket 0-4k (TTFT limit 1000 ms): 13 requests
    request("a01", input_tokens=1000, output_tokens=50, ttft_ms=300.0, e2e_ms=1280.0, queue_ms=20.0, itl_max_ms=40.0),
    request("a02", input_tokens=2000, output_tokens=101, ttft_ms=400.0, e2e_ms=2400.0, queue_ms=30.0, itl_max_ms=45.0),
    request("a03", input_tokens=500, cached_input_tokens=0, output_tokens=11, ttft_ms=200.0, e2e_ms=450.0,
            queue_ms=10.0, itl_max_ms=30.0),
    # TTFT exactly at the limit complies.
    request("a04", input_tokens=3000, output_tokens=21, ttft_ms=1000.0, e2e_ms=1600.0, queue_ms=250.0,
            itl_max_ms=60.0),
    # One output token: no ITL to judge, no TPOT, and not an unknown ITL.
    request("a05", input_tokens=100, cached_input_tokens=0, output_tokens=1, ttft_ms=150.0, e2e_ms=150.0,
            queue_ms=5.0, itl_max_ms=...),
    # ITL not recorded: judged by itl_missing (ignore here), counted in itl_unknown_share. ISL 4095 is in 0-4k.
    request("a06", input_tokens=4095, output_tokens=41, ttft_ms=900.0, e2e_ms=1700.0, queue_ms=100.0,
            itl_max_ms=...),
    # ITL 101 > 100: not compliant, although the set's P99 ITL still meets its 100 ms (P99 belongs to the set).
    request("a07", input_tokens=1500, output_tokens=31, ttft_ms=350.0, e2e_ms=1250.0, queue_ms=25.0,
            itl_max_ms=101.0),
    request("a09", input_tokens=1200, output_tokens=26, ttft_ms=600.0, e2e_ms=1350.0, queue_ms=40.0, itl_max_ms=85.0),
    request("a10", input_tokens=2500, output_tokens=16, ttft_ms=700.0, e2e_ms=1150.0, queue_ms=60.0, itl_max_ms=70.0),
    request("a11", input_tokens=3500, output_tokens=51, ttft_ms=800.0, e2e_ms=2300.0, queue_ms=80.0, itl_max_ms=80.0),
    request("a12", status="rejected", **_none(input_tokens=1000, e2e_ms=..., http_status=429)),
    # Cancelled: out of every denominator and every percentile, however slow.
    request("a13", status="cancelled", input_tokens=2000, output_tokens=5, ttft_ms=5000.0, e2e_ms=6000.0,
            queue_ms=4000.0, itl_max_ms=500.0),
    request("a14", status="error", **_none(input_tokens=1000, e2e_ms=500.0, http_status=500)),
    # bucket 4k-32k (TTFT limit 2500 ms): 5 requests; ISL 4096 is the bucket's first value.
    request("b01", input_tokens=4096, output_tokens=101, ttft_ms=1200.0, e2e_ms=3200.0, queue_ms=50.0,
            itl_max_ms=60.0),
    request("b02", input_tokens=8000, output_tokens=201, ttft_ms=3000.0, e2e_ms=8000.0, queue_ms=200.0,
            itl_max_ms=70.0),
    request("b03", input_tokens=16000, output_tokens=81, ttft_ms=2000.0, e2e_ms=4400.0, queue_ms=150.0,
            itl_max_ms=65.0),
    request("b04", input_tokens=30000, output_tokens=41, ttft_ms=2500.0, e2e_ms=3700.0, queue_ms=120.0,
            itl_max_ms=75.0),
    request("b05", input_tokens=20000, output_tokens=2, ttft_ms=2600.0, e2e_ms=2630.0, queue_ms=100.0,
            itl_max_ms=30.0),
    # bucket 32k-128k (TTFT limit 6000 ms): 2 requests, one effective: too few to judge attainment.
    request("c01", input_tokens=50000, output_tokens=101, ttft_ms=4000.0, e2e_ms=6500.0, queue_ms=200.0,
            itl_max_ms=55.0),
    request("c02", status="cancelled", **_none(input_tokens=40000, e2e_ms=3000.0)),
    # bucket 128k+: no requests.
]

# The fixture's policy: attainment 0.70 and success rate 0.80, so that 20 requests can show a bucket missing its
# target while the whole model meets it (at 0.99 a single miss among 20 already fails the whole model).
FIXTURE_SLO = slo_version("fx-1", "2026-11-01", attainment_target=0.7, success_rate_target=0.8,
                          min_requests_per_bucket=4)


def test_slo_daily_of_twenty_requests_worked_by_hand(home: Path) -> None:
    assert len(TWENTY) == 20
    write_slo(home, FIXTURE_SLO)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", TWENTY)
    result = materialize(DAY)
    assert result.success, failure_text(result)
    got = by_bucket(home)
    assert list(got) == ["0-4k", "4k-32k", "32k-128k", "128k+", "all"]

    # Successful requests' values, per bucket (cancelled a13, c02 and failed a12, a14 are left out).
    ttft_a = [300, 400, 200, 1000, 150, 900, 350, 600, 700, 800]
    queue_a = [20, 30, 10, 250, 5, 100, 25, 40, 60, 80]
    itl_a = [40, 45, 30, 60, 101, 85, 70, 80]                # a05 (1 token) and a06 (not recorded) have none
    # TPOT = (e2e - ttft) / (output - 1): a01 980/49, a02 2000/100, a03 250/10, a04 600/20, a06 800/40,
    # a07 900/30, a09 750/25, a10 450/15, a11 1500/50; a05 has one token and no TPOT.
    tpot_a = [20, 20, 25, 30, 20, 30, 30, 30, 30]
    e2e_a = [1280, 2400, 450, 1600, 150, 1700, 1250, 1350, 1150, 2300]
    ttft_b, queue_b, itl_b = [1200, 3000, 2000, 2500, 2600], [50, 200, 150, 120, 100], [60, 70, 65, 75, 30]
    tpot_b = [20, 25, 30, 30, 30]                             # 2000/100, 5000/200, 2400/80, 1200/40, 30/1
    e2e_b = [3200, 8000, 4400, 3700, 2630]

    common = {"day": D, "model": "m70", "attainment_target": 0.7, "success_rate_target": 0.8, "slo_version": "fx-1",
              "min_requests_per_bucket": 4}
    expected = {
        # 13 requests: 1 cancelled (a13) -> 12 effective; 10 ok, 2 failed (a12 rejected, a14 error).
        # Compliant: the 10 ok but a07 (ITL 101) = 9. Attainment 9/12 = 0.75 >= 0.70, judged (12 >= 4).
        # Unknown ITL: a06 only (a12 and a14 have no output) -> 1/12.
        "0-4k": {"isl_bucket": "0-4k", "effective_requests": 12, "successful_requests": 10, "failed_requests": 2,
                 "cancelled_requests": 1, "compliant_requests": 9, "success_rate": 10 / 12, "attainment": 9 / 12,
                 "ttft_p50_ms": pct(ttft_a, 50),   # sorted 150..1000, mid pair (400, 600) -> 500
                 "ttft_p90_ms": pct(ttft_a, 90),   # position 8.1: 900 + 0.1 * (1000 - 900) = 910
                 "ttft_p99_ms": pct(ttft_a, 99),   # position 8.91: 900 + 0.91 * 100 = 991
                 "queue_p99_ms": pct(queue_a, 99),  # position 8.91 of 5..250: 100 + 0.91 * 150 = 236.5
                 "itl_p99_ms": pct(itl_a, 99),     # position 6.93 of 30..101: 85 + 0.93 * 16 = 99.88 <= 100
                 "tpot_p50_ms": 30.0,                # sorted 20, 20, 20, 25, [30], 30, 30, 30, 30
                 "tpot_p99_ms": 30.0, "e2e_p99_ms": pct(e2e_a, 99),
                 "itl_unknown_share": 1 / 12, "attainment_met": True, "success_rate_met": True,
                 "queue_p99_met": True, "itl_p99_met": True, "tpot_p99_met": True, "all_met": True,
                 # The 2 failures by kind: a12 rejected, a14 an error.
                 "error_requests": 1, "timeout_requests": 0, "disconnected_requests": 0, "rejected_requests": 1,
                 "judged": True},
        # 5 requests, all ok; b02 (3000) and b05 (2600) exceed 2500 ms, b04 is exactly 2500 and complies.
        # Attainment 3/5 = 0.6 < 0.70: the bucket misses its target.
        "4k-32k": {"isl_bucket": "4k-32k", "effective_requests": 5, "successful_requests": 5, "failed_requests": 0,
                   "cancelled_requests": 0, "compliant_requests": 3, "success_rate": 1.0, "attainment": 0.6,
                   "ttft_p50_ms": 2500.0, "ttft_p90_ms": pct(ttft_b, 90),  # 2600 + 0.6 * 400 = 2840
                   "ttft_p99_ms": pct(ttft_b, 99), "queue_p99_ms": pct(queue_b, 99),  # 150 + 0.96 * 50 = 198
                   "itl_p99_ms": pct(itl_b, 99), "tpot_p50_ms": 30.0, "tpot_p99_ms": 30.0,
                   "e2e_p99_ms": pct(e2e_b, 99), "itl_unknown_share": 0.0, "attainment_met": False,
                   "success_rate_met": True, "queue_p99_met": True, "itl_p99_met": True, "tpot_p99_met": True,
                   "all_met": False, "error_requests": 0, "timeout_requests": 0, "disconnected_requests": 0,
                   "rejected_requests": 0, "judged": True},
        # c01 ok and compliant, c02 cancelled: 1 effective < 4, so attainment is shown but not judged.
        "32k-128k": {"isl_bucket": "32k-128k", "effective_requests": 1, "successful_requests": 1,
                     "failed_requests": 0, "cancelled_requests": 1, "compliant_requests": 1, "success_rate": 1.0,
                     "attainment": 1.0, "ttft_p50_ms": 4000.0, "ttft_p90_ms": 4000.0, "ttft_p99_ms": 4000.0,
                     "queue_p99_ms": 200.0, "itl_p99_ms": 55.0, "tpot_p50_ms": 25.0, "tpot_p99_ms": 25.0,
                     "e2e_p99_ms": 6500.0, "itl_unknown_share": 0.0, "attainment_met": None,
                     "success_rate_met": True, "queue_p99_met": True, "itl_p99_met": True, "tpot_p99_met": True,
                     "all_met": True, "error_requests": 0, "timeout_requests": 0, "disconnected_requests": 0,
                     "rejected_requests": 0, "judged": False},
        # No requests: a row all the same, with zero counts and nothing judged.
        "128k+": {"isl_bucket": "128k+", "effective_requests": 0, "successful_requests": 0, "failed_requests": 0,
                  "cancelled_requests": 0, "compliant_requests": 0, "success_rate": None, "attainment": None,
                  "ttft_p50_ms": None, "ttft_p90_ms": None, "ttft_p99_ms": None, "queue_p99_ms": None,
                  "itl_p99_ms": None, "tpot_p50_ms": None, "tpot_p99_ms": None, "e2e_p99_ms": None,
                  "itl_unknown_share": None, "attainment_met": None, "success_rate_met": None,
                  "queue_p99_met": None, "itl_p99_met": None, "tpot_p99_met": None, "all_met": None,
                  "error_requests": 0, "timeout_requests": 0, "disconnected_requests": 0, "rejected_requests": 0,
                  "judged": False},
        # Whole model: 18 effective, 16 ok, 2 failed, 2 cancelled, 9 + 3 + 1 = 13 compliant.
        # Attainment 13/18 = 0.722 >= 0.70 and success 16/18 = 0.889 >= 0.80 pass, every P99 passes
        # (ITL: position 12.87 of 14 values, 85 + 0.87 * 16 = 98.92), yet all_met is false: bucket 4k-32k fails.
        "all": {"isl_bucket": "all", "effective_requests": 18, "successful_requests": 16, "failed_requests": 2,
                "cancelled_requests": 2, "compliant_requests": 13, "success_rate": 16 / 18, "attainment": 13 / 18,
                "ttft_p50_ms": pct(ttft_a + ttft_b + [4000], 50), "ttft_p90_ms": pct(ttft_a + ttft_b + [4000], 90),
                "ttft_p99_ms": pct(ttft_a + ttft_b + [4000], 99),
                "queue_p99_ms": pct(queue_a + queue_b + [200], 99),   # 200 + 0.85 * 50 = 242.5
                "itl_p99_ms": pct(itl_a + itl_b + [55], 99),
                "tpot_p50_ms": pct(tpot_a + tpot_b + [25], 50), "tpot_p99_ms": 30.0,
                "e2e_p99_ms": pct(e2e_a + e2e_b + [6500], 99), "itl_unknown_share": 1 / 18,
                "attainment_met": True, "success_rate_met": True, "queue_p99_met": True, "itl_p99_met": True,
                "tpot_p99_met": True, "all_met": False,
                "error_requests": 1, "timeout_requests": 0, "disconnected_requests": 0, "rejected_requests": 1,
                "judged": True},
    }
    # The hand arithmetic in the comments, checked against numpy's linear interpolation.
    assert (expected["0-4k"]["ttft_p90_ms"], expected["0-4k"]["queue_p99_ms"]) == pytest.approx((910, 236.5))
    assert (expected["0-4k"]["itl_p99_ms"], expected["all"]["itl_p99_ms"]) == pytest.approx((99.88, 98.92))
    assert expected["all"]["queue_p99_ms"] == pytest.approx(242.5)
    for bucket, want in expected.items():
        # every request of the fixture measures latency, so the judged requests are the effective ones
        want = {**want, "judged_requests": want["effective_requests"]}
        assert got[bucket] == pytest.approx({**common, **want}), bucket

    # Models in force without requests get every bucket and an 'all' row, nothing judged.
    for model in ("m8", "moe"):
        for r in by_bucket(home, model=model).values():
            assert r == {**common, **expected["128k+"], "judged_requests": 0, "model": model,
                         "isl_bucket": r["isl_bucket"]}

    # The usage cube counts the same requests, and the day was published.
    usage = rows(home, "core", "usage_hourly", DAY)
    assert sum(u["compliant_requests"] for u in usage) == 13 and sum(u["requests"] for u in usage) == 20
    assert (home / "exports" / "infra" / "slo_daily" / f"day={DAY}" / "data.parquet").is_file()


# --- tokens ---------------------------------------------------------------------------------------------------

def test_a_96_percent_hit_day_overstates_input_25_times(home: Path) -> None:
    # Three requests reach the model (a cancelled one still costs its prefill): 3 x 49,000 = 147,000 input,
    # 96% of it cached (3 x 47,040 = 141,120), 5,880 recomputed; output 200 + 100 + 200 = 500.
    # 147,000 / 5,880 = 25 exactly; 147,000 / 500 = 294 (seed 003's 294:1). The rejected request never reached
    # the model, so its 100,000 uncached tokens are in `requests` only.
    agent = {"model": "moe", "deployment_id": "moe-a", "input_tokens": 49_000, "cached_input_tokens": 47_040}
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request("s1", **agent, output_tokens=200, received_at="2026-11-16T09:10:00Z"),
        request("s2", **agent, status="cancelled", output_tokens=100, received_at="2026-11-16T09:50:00Z"),
        request("s3", **agent, output_tokens=200, received_at="2026-11-16T14:00:00Z"),
        request("s4", **{**agent, "cached_input_tokens": 0, "input_tokens": 100_000}, status="rejected",
                **_none(e2e_ms=..., received_at="2026-11-16T14:01:00Z")),
    ])
    result = materialize(DAY, upto=["infra/token_split_daily", "infra/token_split_hourly", "infra/slo_daily"])
    assert result.success, failure_text(result)
    daily = {r["model"]: r for r in rows(home, "infra", "token_split_daily", DAY)}
    # The workload (ISL and OSL distributions) is over the two requests served in full, s1 and s3: 49,000 in and
    # 200 out each; with no spread there is no correlation.
    same = {"workload_requests": 2, "isl_mean": 49_000.0, "isl_max": 49_000, "osl_mean": 200.0, "osl_max": 200,
            "isl_osl_correlation": None, **{f"isl_p{q}": 49_000.0 for q in (10, 50, 90, 99)},
            **{f"osl_p{q}": 200.0 for q in (10, 50, 90, 99)}}
    assert daily["moe"] == {"day": D, "model": "moe", "requests": 4, "input_total": 147_000,
                            "input_cached": 141_120, "input_recomputed": 5_880, "cache_hit_ratio": pytest.approx(0.96),
                            "input_overstatement": 25.0, "output_tokens": 500, "input_output_ratio": 294.0,
                            "input_cache_write": 0, "reasoning_tokens": None, **same}  # no source reports it
    # Models in force without requests: zeros and no ratios.
    none = {"workload_requests": 0, **{k: None for k in same if k != "workload_requests"}}
    assert daily["m8"] == {"day": D, "model": "m8", "requests": 0, "input_total": 0, "input_cached": 0,
                           "input_recomputed": 0, "cache_hit_ratio": None, "input_overstatement": None,
                           "output_tokens": 0, "input_output_ratio": None, "input_cache_write": 0,
                           "reasoning_tokens": None, **none}

    hourly = {(r["model"], r["hour"]): r for r in rows(home, "infra", "token_split_hourly", DAY)}
    assert len(hourly) == 3 * 24  # m70, m8, moe: every hour
    # 09:00: s1 and s2 (98,000 input, 94,080 cached, 3,920 recomputed, 300 output).
    assert hourly[("moe", 9)] == {"day": D, "hour": 9, "model": "moe", "requests": 2, "input_total": 98_000,
                                  "input_cached": 94_080, "input_recomputed": 3_920,
                                  "cache_hit_ratio": pytest.approx(0.96), "input_overstatement": 25.0,
                                  "output_tokens": 300, "input_output_ratio": 98_000 / 300, "reasoning_tokens": None}
    # 14:00: s3, and the rejected s4 counted as a request only.
    assert (hourly[("moe", 14)]["requests"], hourly[("moe", 14)]["input_total"],
            hourly[("moe", 14)]["input_output_ratio"]) == (2, 49_000, 245.0)
    assert hourly[("moe", 3)]["requests"] == 0 and hourly[("moe", 3)]["cache_hit_ratio"] is None

    # The cancelled s2 leaves the SLO denominators; the rejected s4 stays in them as a failure.
    slo = by_bucket(home, model="moe")
    assert (slo["0-4k"]["effective_requests"], slo["4k+"]["effective_requests"]) == (0, 3)
    assert {k: slo["all"][k] for k in ("effective_requests", "successful_requests", "failed_requests",
                                       "cancelled_requests", "compliant_requests", "attainment")} == {
        "effective_requests": 3, "successful_requests": 2, "failed_requests": 1, "cancelled_requests": 1,
        "compliant_requests": 2, "attainment": 2 / 3}


def test_cancelled_requests_leave_the_denominators(home: Path) -> None:
    # Two fast requests and three slow cancelled ones: attainment and success rate are 2/2, not 2/5.
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request("ok-1"), request("ok-2"),
        *[request(f"c{i}", status="cancelled", ttft_ms=9000.0, e2e_ms=9500.0, queue_ms=8000.0, itl_max_ms=900.0)
          for i in range(3)],
    ])
    assert materialize(DAY, upto=["infra/slo_daily", "infra/token_split_daily"]).success
    r = by_bucket(home)["all"]
    assert (r["effective_requests"], r["cancelled_requests"], r["attainment"], r["success_rate"]) == (2, 3, 1.0, 1.0)
    assert (r["ttft_p99_ms"], r["queue_p99_ms"], r["itl_p99_ms"]) == (300.0, 20.0, 40.0)
    # Their tokens reached the model all the same: 5 x 1,000 input, 5 x 50 output.
    split = rows(home, "infra", "token_split_daily", DAY, where="model = 'm70'")[0]
    assert (split["requests"], split["input_total"], split["output_tokens"]) == (5, 5000, 250)


# --- the policy -----------------------------------------------------------------------------------------------

ITL_DAY = [
    request("i1"),                                                     # ITL 40: compliant
    request("i2", itl_max_ms=...),                                     # 50 tokens, ITL unknown
    request("i3", output_tokens=1, itl_max_ms=...),                    # one token: no ITL needed
    request("i4", status="cancelled", itl_max_ms=...),                 # cancelled: not effective, not counted
    request("i5", status="error", output_tokens=10, itl_max_ms=...),  # effective, unknown ITL, failed anyway
]


@pytest.mark.parametrize(("itl_missing", "compliant"), [("ignore", 3), ("fail", 2)])
def test_itl_missing_policy(home: Path, itl_missing: str, compliant: int) -> None:
    # Effective: i1, i2, i3, i5 = 4; unknown ITL with >= 2 tokens: i2, i5 -> share 2/4 whatever the policy.
    # ignore: i1, i2, i3 comply (3/4); fail: i2 does not (2/4).
    write_slo(home, slo_version("v1", "2026-11-01", itl_missing=itl_missing))
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", ITL_DAY)
    assert materialize(DAY, upto=["infra/slo_daily"]).success
    r = by_bucket(home)["0-4k"]
    assert (r["effective_requests"], r["compliant_requests"], r["attainment"], r["itl_unknown_share"]) == (
        4, compliant, compliant / 4, 0.5)


def test_a_model_override_changes_one_model_only(home: Path) -> None:
    # m8 overrides its buckets: 0-4k allows 500 ms. The same 700 ms TTFT complies on m70 and moe, not on m8.
    write_slo(home, slo_version("v1", "2026-11-01", models={
        "m8": {"isl_buckets": (("0-4k", 0, 4096, 500), ("4k+", 4096, None, 2500)), "tpot_p99_ms": 10}}))
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request("m70-1", ttft_ms=700.0),
        request("m8-1", model="m8", deployment_id="m8-onprem", ttft_ms=700.0),
        request("moe-1", model="moe", deployment_id="moe-b", ttft_ms=700.0),
    ])
    assert materialize(DAY, upto=["infra/slo_daily"]).success
    m70, m8, moe = by_bucket(home), by_bucket(home, model="m8"), by_bucket(home, model="moe")
    assert list(m8) == ["0-4k", "4k+", "all"] and list(m70) == ["0-4k", "4k-32k", "32k-128k", "128k+", "all"]
    assert (m70["0-4k"]["compliant_requests"], m8["0-4k"]["compliant_requests"],
            moe["0-4k"]["compliant_requests"]) == (1, 0, 1)
    # TPOT (1500 - 700) / 49 = 16.3 ms: within the default 40, over m8's 10.
    assert (m70["all"]["tpot_p99_met"], m8["all"]["tpot_p99_met"]) == (True, False)
    assert {r["slo_version"] for r in (m70["all"], m8["all"], moe["all"])} == {"v1"}


def test_an_effective_dated_version_applies_from_its_day_and_a_backfill_keeps_the_old_one(home: Path) -> None:
    # v1 (from 11-01) allows 1000 ms in 0-4k; v2 (from 11-17) allows 250 ms. A 300 ms request complies under v1
    # only.
    v1 = slo_version("v1", "2026-11-01")
    v2 = slo_version("v2", "2026-11-17", buckets=(("0-4k", 0, 4096, 250), ("4k+", 4096, None, 2500)))
    for day in ("2026-11-16", "2026-11-17"):
        write_jsonl(gateway_dir(home, day) / "a.jsonl", [request("r1", received_at=f"{day}T10:00:00Z")])
    write_slo(home, v1)
    assert materialize("2026-11-16", upto=["infra/slo_daily", "infra/capacity_daily", "infra/goodput_hourly",
                                           "core/usage_hourly"]).success
    write_slo(home, v1, v2)
    assert materialize("2026-11-16", "2026-11-17",  # backfill 16, run 17
                       upto=["infra/slo_daily", "infra/capacity_daily", "infra/goodput_hourly",
                             "core/usage_hourly"]).success

    old, new = by_bucket(home, "2026-11-16")["all"], by_bucket(home, "2026-11-17")["all"]
    assert (old["slo_version"], old["compliant_requests"]) == ("v1", 1)
    assert (new["slo_version"], new["compliant_requests"]) == ("v2", 0)
    assert list(by_bucket(home, "2026-11-17")) == ["0-4k", "4k+", "all"]
    for day, version in (("2026-11-16", "v1"), ("2026-11-17", "v2")):
        for table in ("capacity_daily", "goodput_hourly"):
            assert {r["slo_version"] for r in rows(home, "infra", table, day)} == {version}
        assert {r["slo_version"] for r in rows(home, "core", "usage_hourly", day)} == {version}


def test_a_day_before_any_version_fails_naming_the_day_and_the_earliest_version(home: Path) -> None:
    result = materialize("2026-10-31", upto=["infra/slo_daily"])  # infra/slo_daily's step raises it
    assert not result.success
    assert ("no SLO version is in force on 2026-10-31 (the earliest valid_from is 2026-11-01)"
            in failure_text(result))


# --- vLLM's goodput rule --------------------------------------------------------------------------------------

def vllm_good_requests(outputs: list[dict[str, Any]], ttft_slo_ms: list[float], itl_slo_ms: float) -> int:
    """The good-request count of vLLM's benchmark (vllm/benchmarks/serve.py, `calculate_metrics` with
    `--goodput`): metrics are collected for successful outputs only, and a request is good when each of its
    own values is within its limit, `all(s >= r for s, r in zip(slo_values, req_metric))`, limits in seconds.
    Here the metrics are TTFT (with the limit of the request's ISL bucket) and ITL (every inter-token gap of the
    request, so its longest one); TPOT is not part of compliance (docs/metrics.md)."""
    ms = 1000.0
    ttfts, itls, slo_values = [], [], []
    for output, ttft_slo in zip(outputs, ttft_slo_ms, strict=True):
        if output["status"] != "ok":
            continue
        ttfts.append(output["ttft_ms"] / ms)
        itls.append(max(output["itls_ms"], default=0.0) / ms)
        slo_values.append((ttft_slo / ms, itl_slo_ms / ms))
    good_completed = 0
    for req_metric, slos in zip(zip(ttfts, itls, strict=True), slo_values, strict=True):
        if all(s >= r for s, r in zip(slos, req_metric, strict=True)):
            good_completed += 1
    return good_completed


def test_compliance_agrees_with_vllms_goodput_rule(home: Path) -> None:
    write_slo(home, slo_version("v1", "2026-11-01"))
    rng = np.random.default_rng(2026)
    limits = {name: (lo, hi, limit) for name, lo, hi, limit in BUCKETS}
    outputs, bucket_of = [], []
    for i in range(400):
        name = ("0-4k", "4k-32k", "32k-128k", "128k+")[i % 4]
        lo, hi, limit = limits[name]
        isl = int(rng.choice([lo, (hi or 2 * lo) - 1, rng.integers(lo, hi or 2 * lo)]))
        n_out = int(rng.choice([1, 2, int(rng.integers(3, 300))]))
        # TTFT around the limit, some exactly on it; inter-token gaps, now and then a stall, some exactly 100 ms.
        ttft = float(rng.choice([limit, round(limit * rng.uniform(0.3, 1.4), 1)]))
        gaps = np.round(rng.exponential(25.0, n_out - 1), 1)
        if n_out > 1 and rng.random() < 0.3:
            gaps[rng.integers(0, n_out - 1)] = rng.choice([100.0, 100.1, round(rng.uniform(80, 400), 1)])
        status = str(rng.choice(["ok", "ok", "ok", "ok", "error", "timeout", "disconnected"]))
        e2e = ttft + float(gaps.sum()) + 1.0
        outputs.append({"status": status, "ttft_ms": ttft, "itls_ms": gaps.tolist()})
        bucket_of.append(name)
        itl = float(gaps.max()) if n_out > 1 else ...
        write_fields = {"input_tokens": isl, "cached_input_tokens": 0, "output_tokens": n_out, "ttft_ms": ttft,
                        "e2e_ms": e2e, "queue_ms": 0.0, "itl_max_ms": itl, "status": status}
        outputs[-1]["record"] = request(f"v{i:03d}", **write_fields)
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [o["record"] for o in outputs])
    assert materialize(DAY, upto=["infra/slo_daily"]).success

    got = by_bucket(home)
    ttft_slos = [limits[b][2] for b in bucket_of]
    assert got["all"]["compliant_requests"] == vllm_good_requests(outputs, ttft_slos, 100.0)
    for name in limits:
        picked = [i for i, b in enumerate(bucket_of) if b == name]
        assert got[name]["compliant_requests"] == vllm_good_requests(
            [outputs[i] for i in picked], [ttft_slos[i] for i in picked], 100.0), name
    # Not a trivial agreement: the fixture has both kinds in every bucket.
    assert all(0 < got[name]["compliant_requests"] < got[name]["successful_requests"] for name in limits)


# --- goodput --------------------------------------------------------------------------------------------------

def test_goodput_with_a_mid_day_scale_up(home: Path) -> None:
    # m70 goes 16 -> 24 GPUs at 12:00 on 11-16 (conftest), then, added here, 24 -> 32 GPUs at 12:30 on 11-17 with
    # a new quantization.
    path = home / "config" / "deployments.yaml"
    text = path.read_text()
    m70_24 = text[text.index("  - <<: *m70"):text.index("  - deployment_id: m8-onprem")]
    path.write_text(text.replace(m70_24, m70_24.replace("valid_to: null", "valid_to: 2026-11-17T12:30:00Z")
                                 + "  - <<: *m70\n    gpus: 32\n    quantization: int4\n"
                                   "    valid_from: 2026-11-17T12:30:00Z\n    valid_to: null\n"))
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [
        request("g1", received_at="2026-11-16T10:00:00Z", output_tokens=100),
        request("g2", received_at="2026-11-16T14:00:00Z", output_tokens=300),
        request("g3", received_at="2026-11-16T14:30:00Z", output_tokens=200, ttft_ms=1500.0, e2e_ms=3000.0),
        request("g4", received_at="2026-11-16T14:40:00Z", status="error", output_tokens=40),
        request("g5", received_at="2026-11-16T15:00:00Z", status="rejected", **_none(e2e_ms=...)),
    ])
    write_jsonl(gateway_dir(home, "2026-11-17") / "a.jsonl", [
        request("h1", received_at="2026-11-17T12:45:00Z", output_tokens=720)])
    result = materialize("2026-11-16", "2026-11-17", upto=["infra/capacity_daily", "infra/goodput_hourly"])
    assert result.success, failure_text(result)

    # The throughput columns (the capacity columns that follow them are tests/test_capacity.py's).
    throughput = ["day", "model", "deployment_id", "gpu_type", "gpus", "tp", "pp", "quantization", "gpu_power_w",
                  "wall_time_s", "output_tokens", "compliant_output_tokens", "raw_throughput", "slo_goodput",
                  "goodput_per_gpu", "goodput_per_watt", "slo_version"]
    cap = {r["deployment_id"]: {k: r[k] for k in throughput} for r in rows(home, "infra", "capacity_daily", DAY)}
    assert set(cap) == {"m70-h100", "m8-onprem", "moe-a", "moe-b"}
    # Produced: g1 + g2 + g3 = 600 (g4 failed); compliant: g1 + g2 = 400 (g3's TTFT 1500 > 1000). Raw throughput
    # counts every effective request's output: 600 + g4's 40 = 640 (g5 was rejected with none).
    # GPUs: (16 x 12 h + 24 x 12 h) / 24 h = 20; power 20 x 700 W = 14,000 W.
    goodput = 400 / 86_400
    assert cap["m70-h100"] == pytest.approx({
        "day": D, "model": "m70", "deployment_id": "m70-h100", "gpu_type": "H100", "gpus": 20.0, "tp": 8, "pp": 1,
        "quantization": "fp8", "gpu_power_w": 700.0, "wall_time_s": 86_400.0, "output_tokens": 600,
        "compliant_output_tokens": 400, "raw_throughput": 640 / 86_400, "slo_goodput": goodput,
        "goodput_per_gpu": goodput / 20, "goodput_per_watt": goodput / 14_000, "slo_version": "v1"})
    # A deployment in force without requests: 0 tokens, its own GPUs and power.
    assert cap["m8-onprem"] == pytest.approx({
        "day": D, "model": "m8", "deployment_id": "m8-onprem", "gpu_type": "L40S", "gpus": 4.0, "tp": 1, "pp": 1,
        "quantization": "bf16", "gpu_power_w": 350.0, "wall_time_s": 86_400.0, "output_tokens": 0,
        "compliant_output_tokens": 0, "raw_throughput": 0.0, "slo_goodput": 0.0, "goodput_per_gpu": 0.0,
        "goodput_per_watt": 0.0, "slo_version": "v1"})

    hourly = {(r["deployment_id"], r["hour"]): r for r in rows(home, "infra", "goodput_hourly", DAY)}
    assert len(hourly) == 4 * 24
    assert [hourly[("m70-h100", h)]["gpus"] for h in (0, 11, 12, 23)] == [16.0, 16.0, 24.0, 24.0]
    # 14:00-15:00: g2, g3 and g4 effective; produced 300 + 200, compliant 300.
    assert hourly[("m70-h100", 14)] == pytest.approx({
        "day": D, "hour": 14, "model": "m70", "deployment_id": "m70-h100", "gpus": 24.0, "output_tokens": 500,
        "compliant_output_tokens": 300, "raw_throughput": 500 / 3600, "slo_goodput": 300 / 3600,
        "goodput_per_gpu": 300 / 3600 / 24, "effective_requests": 3, "compliant_requests": 1,
        "attainment": 1 / 3, "slo_version": "v1",
        # 13:00 produced nothing: at 14:00 raw throughput and goodput both rose, so not the capacity-top sign.
        "capacity_top": False})
    # 15:00: the rejected g5 is effective and failed; 16:00: nothing.
    assert (hourly[("m70-h100", 15)]["effective_requests"], hourly[("m70-h100", 15)]["attainment"]) == (1, 0.0)
    assert hourly[("m70-h100", 16)]["effective_requests"] == 0 and hourly[("m70-h100", 16)]["attainment"] is None

    # 11-17: 24 GPUs for 12.5 h and 32 for 11.5 h = 300 + 368 = 668 GPU-hours -> 27.833 GPUs; the 12:00 hour
    # is half and half, 28 GPUs. The configuration reported is the one in force at the end of the day.
    nxt = rows(home, "infra", "capacity_daily", "2026-11-17", where="deployment_id = 'm70-h100'")[0]
    assert (nxt["gpus"], nxt["quantization"]) == (pytest.approx(668 / 24), "int4")
    assert nxt["goodput_per_gpu"] == pytest.approx(720 / 86_400 / (668 / 24))
    h12 = rows(home, "infra", "goodput_hourly", "2026-11-17", where="deployment_id = 'm70-h100' AND hour = 12")[0]
    assert (h12["gpus"], h12["goodput_per_gpu"]) == (28.0, pytest.approx(720 / 3600 / 28))
