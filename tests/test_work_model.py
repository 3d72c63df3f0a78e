"""The work model and load tests checked against production (docs/metrics.md, section 6; ADR 0121), worked by hand
on small inputs: the coefficients of a three-step load test, a same-mix test that cannot be fitted, a day whose
input mix doubles, an unrepresentative test rescaled and a stale one labelled."""

from __future__ import annotations

from typing import Any

import pytest

from tokenledger.capacity.day import goodput_sizing
from tokenledger.capacity.work import (
    fit_work_model,
    model_figures,
    representativeness,
    work_per_output_token,
    work_sizing,
)

# A load test of three steps (x1 recomputed input tok/s, x2 output tok/s, y busy GPUs) made from C_prefill = 2e-5
# and C_decode = 1e-3 GPU-s per token:
#   10,000 x 2e-5 +   500 x 1e-3 = 0.2 + 0.5 = 0.7
#   20,000 x 2e-5 +   500 x 1e-3 = 0.4 + 0.5 = 0.9
#   20,000 x 2e-5 + 1,000 x 1e-3 = 0.4 + 1.0 = 1.4
THREE_STEPS = [(10_000.0, 500.0, 0.7), (20_000.0, 500.0, 0.9), (20_000.0, 1_000.0, 1.4)]


def test_three_load_test_steps_give_both_coefficients() -> None:
    fit = fit_work_model(THREE_STEPS, "steps")
    # The points lie on the plane, so least squares finds it exactly and explains all the busy time.
    assert fit.c_prefill == pytest.approx(2e-5) and fit.c_decode == pytest.approx(1e-3)
    assert (fit.points, fit.r2) == (3, pytest.approx(1.0))
    assert fit.note == "least squares through the origin over 3 steps, R² 1.000"


def test_steps_of_one_mix_give_no_fit() -> None:
    # Every step at 20 recomputed input tokens per output token (only the rate grows): the work could be all prefill
    # (C_prefill = 0.0012 / 20 = 6e-5) or all decode (C_decode = 0.0012), or any mix of the two.
    same_mix = [(10_000.0, 500.0, 0.6), (20_000.0, 1_000.0, 1.2), (30_000.0, 1_500.0, 1.8)]
    fit = fit_work_model(same_mix, "steps")
    assert (fit.c_prefill, fit.c_decode, fit.points, fit.r2) == (None, None, 3, None)
    assert fit.note == ("no fit: the 3 steps share one mix (recomputed input per output token 20 to 20, less than "
                        "10% apart), so C_prefill and C_decode cannot be told apart")
    assert fit_work_model(THREE_STEPS[:2], "steps").note == (
        "no fit: 2 steps with output and GPU telemetry, 3 needed")


def test_a_negative_coefficient_is_dropped_and_the_other_refitted() -> None:
    # y falls as the input rises at the same output: C_prefill comes out negative; decode alone through the origin
    # is sum(x2 y) / sum(x2^2) = (1,000 x 1.0 + 1,000 x 0.9 + 2,000 x 2.0) / (1e6 + 1e6 + 4e6) = 5,900 / 6e6.
    fit = fit_work_model([(1_000.0, 1_000.0, 1.0), (4_000.0, 1_000.0, 0.9), (2_000.0, 2_000.0, 2.0)], "steps")
    assert fit.c_prefill == 0.0 and fit.c_decode == pytest.approx(5_900 / 6e6)
    assert "C_prefill came out negative: set to 0 and the other refitted alone" in fit.note


def _plan_inputs(**work: Any) -> dict[str, Any]:
    """A plan row with no headroom (one-GPU replicas, no failure replica) so that GPUs needed is the base."""
    return {"deployment_id": "d", "capacity_goodput_per_gpu": 500.0, "peak_output_token_rate": 3_000.0,
            "gpus_per_replica": 1, "headroom_n_minus_k": 0, "headroom_scaling_lag_pct": 0.0,
            "headroom_forecast_error_pct": 0.0, "headroom_release_pct": 0.0, "headroom_jitter_pct": 0.0,
            "headroom_failure_domain": "replica", **work}


def test_a_day_whose_input_mix_doubles_needs_more_gpus_at_the_same_output_rate() -> None:
    # Capacity 500 output tok/s per GPU measured at 10 recomputed input tokens per output token:
    #   w(capacity) = 2e-5 x 10 + 1e-3 = 0.0012 GPU-s per output token; sustainable = 500 x 0.0012 = 0.6 per GPU.
    # A peak of 3,000 output tok/s at the same mix (30,000 recomputed tok/s): work = 0.6 + 3.0 = 3.6 -> 6 GPUs,
    # what output alone says (3,000 / 500). At twice the input (60,000 tok/s): work = 1.2 + 3.0 = 4.2 -> 7 GPUs.
    same = work_sizing(2e-5, 1e-3, 3_000.0, 30_000.0, 500.0, 10.0)
    doubled = work_sizing(2e-5, 1e-3, 3_000.0, 60_000.0, 500.0, 10.0)
    assert (same.sustainable_work_per_gpu, same.peak_work_rate) == (pytest.approx(0.6), pytest.approx(3.6))
    assert (same.base_gpus, doubled.base_gpus) == (pytest.approx(6.0), pytest.approx(7.0))
    # Through the plan's goodput sizing: the work model where the model table gives its figures, else output only.
    by_work = goodput_sizing(_plan_inputs(peak_work_rate=doubled.peak_work_rate,
                                          sustainable_work_per_gpu=doubled.sustainable_work_per_gpu))
    output_only = goodput_sizing(_plan_inputs())
    assert (by_work["goodput_sizing_basis"], by_work["gpus_needed_goodput"]) == ("work_model", pytest.approx(7.0))
    assert (output_only["goodput_sizing_basis"], output_only["gpus_needed_goodput"]) == ("output_only",
                                                                                         pytest.approx(6.0))


def _model_inputs(**changes: Any) -> dict[str, Any]:
    """One deployment's row of sql/capacity/capacity_model_inputs.sql: production at 2,000 recomputed input tokens
    and 200 output tokens per request (10 per output token), P90 ISL 8,000; its load test at 1,000 and 200 (5 per
    output token), P90 ISL 6,000, 30 days old; capacity 500 tok/s per GPU from the test."""
    return {"deployment_id": "d", "requests": 100, "recomputed_input_per_request": 2_000.0, "isl_p90": 8_000.0,
            "recomputed_per_output_token": 10.0, "loadtest_run_id": "lt-1", "loadtest_age_days": 30,
            "loadtest_max_age_days": 90, "loadtest_recomputed_input_tolerance_pct": 25.0,
            "loadtest_isl_p90_tolerance_pct": 50.0, "loadtest_recomputed_input_per_request": 1_000.0,
            "loadtest_isl_p90": 6_000.0, "loadtest_recomputed_per_output_token": 5.0,
            "other_configuration_run_id": None, "capacity_goodput_per_gpu": 500.0, "capacity_source": "loadtest",
            "peak_output_token_rate": 3_000.0, "peak_recomputed_input_token_rate": 30_000.0, **changes}


def test_an_unrepresentative_test_is_labelled_and_its_capacity_rescaled() -> None:
    row = model_figures(_model_inputs(), THREE_STEPS, [])
    assert (row["coefficients_source"], row["coefficients_run_id"]) == ("loadtest", "lt-1")
    # Recomputed input per request 1,000 vs 2,000: -50%, outside ±25%; P90 ISL 6,000 vs 8,000: -25%, within ±50%.
    assert row["loadtest_representative"] is False
    assert row["representativeness_rule"] == (
        "recomputed input per request 1,000 vs 2,000 in production (-50%, outside ±25%); P90 ISL 6,000 vs 8,000 "
        "(-25%, within ±50%)")
    # w(test) = 2e-5 x 5 + 1e-3 = 0.0011, w(production) = 2e-5 x 10 + 1e-3 = 0.0012:
    # 500 tok/s per GPU on the test's tokens is 500 x 0.0011 / 0.0012 = 458.33 on production's.
    assert row["work_per_output_token_capacity"] == pytest.approx(0.0011)
    assert row["work_per_output_token_production"] == pytest.approx(0.0012)
    assert row["capacity_goodput_per_gpu_rescaled"] == pytest.approx(500 * 0.0011 / 0.0012)
    # Sustainable 500 x 0.0011 = 0.55; the peak's work 30,000 x 2e-5 + 3,000 x 1e-3 = 3.6 -> 6.55 GPUs (6 by output).
    assert (row["sustainable_work_per_gpu"], row["peak_work_rate"]) == (pytest.approx(0.55), pytest.approx(3.6))
    assert row["model_note"] == ("the capacity was measured on a mix unlike production's: 500 tok/s per GPU is 458.3 "
                                 "at production's mix by the work model; re-baseline")
    assert row["loadtest_stale"] is False


def test_a_test_within_both_tolerances_is_representative() -> None:
    # 1,600 vs 2,000 (-20%) and 11,000 vs 8,000 (+37.5%, shown +38%): both within.
    verdict, words = representativeness({"requests": 5, "recomputed_input_per_request": 2_000.0, "isl_p90": 8_000.0},
                                        {"recomputed_input_per_request": 1_600.0, "isl_p90": 11_000.0}, 25.0, 50.0)
    assert verdict is True and words.startswith("recomputed input per request 1,600 vs 2,000 in production (-20%")


def test_a_stale_test_is_labelled() -> None:
    row = model_figures(_model_inputs(loadtest_age_days=120, loadtest_recomputed_input_per_request=2_000.0,
                                      loadtest_recomputed_per_output_token=10.0), THREE_STEPS, [])
    assert (row["loadtest_stale"], row["loadtest_representative"]) == (True, True)
    assert row["model_note"] == "load test lt-1 is 120 days old, older than the 90 allowed: stale, re-baseline"


def test_without_a_load_test_fit_production_hours_are_used_and_labelled() -> None:
    row = model_figures(_model_inputs(loadtest_run_id=None), [], THREE_STEPS)
    assert (row["coefficients_source"], row["coefficients_run_id"]) == ("production", None)
    assert row["c_prefill"] == pytest.approx(2e-5)
    assert row["fit_note"].startswith("from production hours; least squares through the origin over 3 production")
    assert work_per_output_token(None, 1e-3, 10.0) is None
