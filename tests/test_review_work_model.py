"""The capacity review's work-model block of a GPU deployment (issue 58 items 1 and 4), on hand-made published rows
(no Dagster): the coefficients and their source or the fit's note, how the peak sizing took its base, production's
mix beside the load test's, the likeness verdict with its rule and the test's age, the capacity rescaled to
production's mix when the test is unrepresentative, and a re-baseline line when the test is stale, unlike production
or outdated by a run of another configuration. The rows of infra.capacity_model_daily are what
tokenledger/capacity/work.py computes from their inputs (tests/test_work_model.py works those figures by hand);
every figure the review prints is the row's cell."""

from __future__ import annotations

import html
import re
from datetime import date
from typing import Any

from tokenledger.capacity.work import model_figures
from tokenledger.report.review import Review, render_html, render_markdown, shown, tables

DAY = date(2026, 11, 17)
# Three load-test steps on the plane C_prefill = 2e-5, C_decode = 1e-3 GPU-s per token (tests/test_work_model.py):
#   10,000 x 2e-5 + 500 x 1e-3 = 0.7;  20,000 x 2e-5 + 500 x 1e-3 = 0.9;  20,000 x 2e-5 + 1,000 x 1e-3 = 1.4
THREE_STEPS = [(10_000.0, 500.0, 0.7), (20_000.0, 500.0, 0.9), (20_000.0, 1_000.0, 1.4)]
# Three steps at one mix (20 recomputed input tokens per output token): no fit.
SAME_MIX = [(10_000.0, 500.0, 0.6), (20_000.0, 1_000.0, 1.2), (30_000.0, 1_500.0, 1.8)]


def _inputs(**changes: Any) -> dict[str, Any]:
    """A deployment's row of sql/capacity/capacity_model_inputs.sql. Production: 100 requests of 2,000 recomputed
    input and 200 output tokens (10 per output token), P90 ISL 8,000. Its load test lt-1 at lambda_slo_max: 1,800
    recomputed and 200 output per request (9 per output token), P90 ISL 7,200, 30 days old; capacity 500 tok/s per
    GPU from the test; the peak 3,000 output and 30,000 recomputed input tok/s."""
    return {"model": "m", "deployment_id": "m-a", "requests": 100, "isl_p50": 3_000.0, "isl_p90": 8_000.0,
            "osl_p50": 150.0, "osl_p90": 400.0, "cached_share": 0.25, "recomputed_input_per_request": 2_000.0,
            "output_per_request": 200.0, "recomputed_per_output_token": 10.0,
            "loadtest_run_id": "lt-1", "loadtest_requests": 600, "loadtest_isl_p50": 2_800.0,
            "loadtest_isl_p90": 7_200.0, "loadtest_osl_p50": 180.0, "loadtest_osl_p90": 300.0,
            "loadtest_cached_share": 0.1, "loadtest_recomputed_input_per_request": 1_800.0,
            "loadtest_output_per_request": 200.0, "loadtest_recomputed_per_output_token": 9.0,
            "loadtest_age_days": 30, "loadtest_max_age_days": 90, "loadtest_recomputed_input_tolerance_pct": 25.0,
            "loadtest_isl_p90_tolerance_pct": 50.0, "other_configuration_run_id": None,
            "capacity_goodput_per_gpu": 500.0, "capacity_source": "loadtest", "peak_output_token_rate": 3_000.0,
            "peak_recomputed_input_token_rate": 30_000.0, **changes}


def _review(inputs: dict[str, Any], loadtest_points: list, production_points: list,
            **cap_changes: Any) -> tuple[Review, dict[str, Any]]:
    """The day's review of one deployment whose infra.capacity_model_daily row is work.py's figures on `inputs`,
    and whose plan took the work model's sizing when the row has it (else output tokens alone)."""
    work = {"day": DAY, **inputs, **model_figures(inputs, loadtest_points, production_points)}
    cap = {"model": "m", "deployment_id": "m-a", "gpu_type": "H100", "gpus": 8.0, "tp": 1, "pp": 1,
           "quantization": "fp8", "output_tokens": 1, "slo_version": "v1", "capacity_goodput_per_gpu": 500.0,
           "capacity_source": inputs["capacity_source"], **cap_changes}
    by_work = work["peak_work_rate"] is not None and work["sustainable_work_per_gpu"]
    plan = {"model": "m", "deployment_id": "m-a", "capacity_goodput_per_gpu": 500.0,
            "peak_output_token_rate": 3_000.0, "goodput_sizing_basis": "work_model" if by_work else "output_only",
            "peak_work_rate": work["peak_work_rate"], "sustainable_work_per_gpu": work["sustainable_work_per_gpu"],
            "goodput_sizing_base_gpus": (work["peak_work_rate"] / work["sustainable_work_per_gpu"] if by_work
                                         else 3_000.0 / 500.0)}
    policy = {"m": {"loadtest_max_age_days": 90, "isl_buckets": []}}
    return Review(day=DAY, capacity=[cap], plan=[plan], load=[], slo=[], cost_history=[], policy=policy,
                  work=[work]), work


def _page(review: Review) -> tuple[str, str]:
    """The HTML page and its model screen (outside the folded details)."""
    page = render_html(review)
    return page, re.sub(r"<details>.*?</details>", "", page, flags=re.S)


def _each_figure_is_its_cell(page: str, work: dict[str, Any]) -> int:
    """Every infra.capacity_model_daily figure of the page is the row's cell as the review formats it."""
    found = re.findall(r'<span data-table="infra.capacity_model_daily" data-column="([^"]+)" data-key="m\|m-a" '
                       r'data-format="([^"]+)">([^<]*)</span>', page)
    for column, kind, text in found:
        assert html.unescape(text) == shown(work[column], kind), (column, text)
    return len(found)


def _mix(review: Review) -> list[list[str]]:
    return next(t for t in tables(review) if str(t.caption).startswith("Mix of m-a")).text_rows()


def _text(review: Review) -> str:
    return render_markdown(review)


def test_a_fitted_load_test_model_with_a_representative_test() -> None:
    review, work = _review(_inputs(), THREE_STEPS, [])
    md = _text(review)
    # The three steps lie on the plane: C_prefill 2e-5, C_decode 1e-3, R² 1.
    assert ("Work model: C_prefill 2e-05 and C_decode 0.001 GPU-seconds per recomputed input and per output token, "
            "fitted to load test lt-1 (3 points, R² 1.0000).") in md
    # w(test's mix) = 2e-5 x 9 + 1e-3 = 0.00118 GPU-s per output token; sustainable = 500 x 0.00118 = 0.59;
    # peak work = 30,000 x 2e-5 + 3,000 x 1e-3 = 0.6 + 3.0 = 3.6 GPU-s/s; 3.6 / 0.59 = 6.1017 GPUs.
    assert ("GPUs needed sized on the work of the day's mix: peak work rate 3.6 GPU-seconds per second / sustainable "
            "work per GPU 0.5900 = 6.10 GPUs before headroom.") in md
    # 1,800 vs 2,000: -10%, within ±25%; 7,200 vs 8,000: -10%, within ±50%.
    assert ("Likeness of load test lt-1, 30 days old (at most 90 allowed), to production's mix: representative; "
            "recomputed input per request 1,800 vs 2,000 in production (-10%, within ±25%); P90 ISL 7,200 vs 8,000 "
            "(-10%, within ±50%).") in md
    assert _mix(review) == [
        ["production, the day", "100", "3,000", "8,000", "150", "400", "25.0%", "2,000", "200"],
        ["load test lt-1 at lambda_slo_max", "600", "2,800", "7,200", "180", "300", "10.0%", "1,800", "200"]]
    assert "Labelled" not in md and "Re-baseline" not in md
    page = render_html(review)
    # The peak sizing in the capacity template is the same work-model division, its figures the plan's.
    assert "Peak sizing: peak work rate 3.6 GPU-seconds per second / 0.5900 sustainable work per GPU = 6.10 GPUs" in md
    # The coefficients line (C_prefill, C_decode, run, points, R²), the mix (two rows of 8 and the test's run id),
    # the likeness line (run, age, verdict, rule): 5 + 17 + 4.
    assert _each_figure_is_its_cell(page, work) == 5 + 17 + 4
    # The terms link to the glossary, which defines them.
    assert '<a class="term" href="#g-work-model">Work model</a>' in page
    assert '<a class="term" href="#g-sustainable-work">sustainable work per GPU</a>' in page
    assert 'id="g-representative-load-test"' in page


def test_an_unrepresentative_test_is_labelled_and_rescaled() -> None:
    # The test at 1,000 recomputed input per request (5 per output token), P90 ISL 6,000: -50% is outside ±25%.
    review, work = _review(_inputs(loadtest_recomputed_input_per_request=1_000.0, loadtest_isl_p90=6_000.0,
                                   loadtest_recomputed_per_output_token=5.0), THREE_STEPS, [])
    md = _text(review)
    assert ("to production's mix: unrepresentative; recomputed input per request 1,000 vs 2,000 in production "
            "(-50%, outside ±25%); P90 ISL 6,000 vs 8,000 (-25%, within ±50%).") in md
    # w(test) = 2e-5 x 5 + 1e-3 = 0.0011, w(production) = 2e-5 x 10 + 1e-3 = 0.0012:
    # 500 x 0.0011 / 0.0012 = 458.33 tok/s per GPU on production's mix.
    assert ("Labelled: capacity rescaled to production's mix: 500 → 458.3 tok/s per GPU (work per output token "
            "0.0011 GPU-seconds at the test's mix, 0.0012 at production's).") in md
    assert "Re-baseline m-a: its mix is unlike production's." in md
    page, screen = _page(review)
    assert "Re-baseline" in screen  # raised on the model's screen, outside the folded details
    assert ('<span data-table="infra.capacity_model_daily" data-column="capacity_goodput_per_gpu_rescaled" '
            'data-key="m|m-a" data-format="rate">458.3</span>') in page
    assert _each_figure_is_its_cell(page, work) > 20


def test_a_stale_test_and_a_newer_one_of_another_configuration_ask_to_re_baseline() -> None:
    review, work = _review(_inputs(loadtest_age_days=120), THREE_STEPS, [],
                           other_configuration_run_id="lt-2",
                           other_configuration_differences="max_num_seqs 128 → 256")
    md = _text(review)
    # 120 days > the policy's 90; the mix is still like production's.
    assert "Likeness of load test lt-1, 120 days old (at most 90 allowed), to production's mix: representative;" in md
    assert ("Re-baseline m-a: load test lt-1 is 120 days old, more than the 90 allowed (loadtest_max_age_days); "
            "the newest load test, lt-2, measured another configuration (max_num_seqs 128 → 256).") in md
    page, screen = _page(review)
    assert "more than the" in screen and "Labelled" not in md
    assert ('<span data-table="infra.capacity_daily" data-column="other_configuration_differences" data-key="m|m-a" '
            'data-format="text">max_num_seqs 128 → 256</span>') in page
    assert ('<span data-table="policy" data-column="loadtest_max_age_days" data-key="m" data-format="int">90</span>'
            in page)
    _each_figure_is_its_cell(page, work)


def test_no_fit_prints_its_note_and_sizes_on_output_tokens() -> None:
    review, work = _review(_inputs(), SAME_MIX, [])
    md = _text(review)
    assert ("Work model: none (no fit: the 3 steps of load test lt-1 up to lambda_slo_max share one mix (recomputed "
            "input per output token 20 to 20, less than 10% apart), so C_prefill and C_decode cannot be told apart; "
            "no fit: 0 production hours not over capacity with output and GPU telemetry, 3 needed).") in md
    # 3,000 output tok/s at the peak / 500 tok/s per GPU = 6 GPUs.
    assert ("GPUs needed sized on output tokens alone: no work model; 3,000 output tok/s at the peak / 500 tok/s per "
            "GPU = 6.00 GPUs before headroom.") in md
    assert "Peak sizing: 3,000 output tok/s at the peak / 500 tok/s per GPU = 6.00 GPUs" in md
    _each_figure_is_its_cell(render_html(review), work)


def test_no_load_test_says_so_and_still_shows_productions_mix() -> None:
    review, work = _review(_inputs(loadtest_run_id=None, capacity_source="demonstrated"), [], [])
    md = _text(review)
    assert "No load test of the configuration in force to check against production: the production mix alone." in md
    assert _mix(review) == [["production, the day", "100", "3,000", "8,000", "150", "400", "25.0%", "2,000", "200"]]
    assert "Likeness of" not in md and "Re-baseline" not in md
