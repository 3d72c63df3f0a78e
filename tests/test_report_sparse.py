"""The capacity review of sparse days, on hand-made published rows (no Dagster): no cost rows, no load test, one
model, no latency, no what-if rows, idle deployments and an empty day each render in HTML and Markdown, and every
part left out says why in one line."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

from tests.test_report_verdict import DAY, POLICY, _cap, _plan, _review, _slo
from tokenledger.report import Review, cost_chart, render_html, render_markdown, tables, verdict_table


def _both(review: Review) -> tuple[str, str]:
    """Both renderings, and the check that every table of the review is in each."""
    page, markdown = render_html(review), render_markdown(review)
    for table in tables(review):
        assert f"<caption>{html.escape(table.caption)}</caption>" in page and f"**{table.caption}**" in markdown
    return page, markdown


def _says(line: str, page: str, markdown: str) -> None:
    assert f'<p class="note">{html.escape(line)}</p>' in page, line
    assert f"\n{html.escape(line, quote=False)}\n" in markdown, line


def _charts(page: str) -> list[str]:
    return re.findall(r'<svg class="chart chart-(\w+)"', page)


HEALTHY = [_slo("0-4k"), _slo("4k-32k"), _slo("all")]


def _tokens(**changes: Any) -> dict[str, Any]:
    row = {"model": "m", "requests": 6_000, "input_total": 1_000_000, "input_cached": 250_000,
           "input_recomputed": 750_000, "cache_hit_ratio": 0.25, "input_overstatement": 4 / 3,
           "output_tokens": 400_000, "input_output_ratio": 2.5, "workload_requests": 5_990, "isl_p50": 900.0}
    row.update(changes)
    return row


def test_a_day_without_cost_rows_leaves_the_cost_chart_out_and_says_why() -> None:
    # A day whose only costs would be a hosted API's bill, and no bill came: finance.cost_per_mtok_daily is empty.
    # This raised IndexError in cost_chart (days[0] of no days).
    review = _review(HEALTHY, cost_history=[])
    page, markdown = _both(review)
    assert _charts(page) == ["load", "attainment"]
    _says("No cost rows for this day: no bill and no priced API usage, so there is no $/MTok chart.", page, markdown)
    (row,) = verdict_table(review).rows
    assert row[5] == "—"
    # The chart function itself draws an empty history rather than failing.
    assert "no cost per MTok under SLO published yet" in cost_chart([], DAY)


def test_earlier_cost_days_are_charted_and_the_missing_day_is_named() -> None:
    before = DAY - timedelta(days=2)
    review = _review(HEALTHY, cost_history=[{"day": before, "model": "m", "deployment_id": "m-a", "currency": "USD",
                                             "cost_per_mtok_goodput": 2.0, "cost_total": 100.0,
                                             "compliant_output_tokens": 50_000_000}])
    page, markdown = _both(review)
    assert _charts(page) == ["cost", "load", "attainment"]
    _says("No cost rows for this day: no bill and no priced API usage; the chart shows the days before.", page,
          markdown)
    # Cost rows without a $/MTok under SLO (no compliant output was costed) draw no chart either.
    uncompliant = _review(HEALTHY, cost_history=[{"day": DAY, "model": "m", "deployment_id": "m-a",
                                                  "currency": "USD", "cost_per_mtok_goodput": None,
                                                  "cost_total": 100.0, "compliant_output_tokens": 0}])
    page, markdown = _both(uncompliant)
    assert "cost" not in _charts(page)
    _says("No $/MTok under SLO up to this day: no costed deployment had compliant output (or its cost is not "
          "known), so there is no $/MTok chart.", page, markdown)


def test_a_day_without_a_load_test_or_capacity_figure() -> None:
    cap = _cap(capacity_source=None, capacity_goodput_per_gpu=None, daily_capacity_tokens=None, utilization=None,
               cost_per_mtok_goodput=None, capacity_note=None, other_configuration_run_id=None)
    # No capacity, so no GPUs needed; one deployment's plan lacks the hours over capacity.
    plan = _plan(gpus_needed=None, gpus_needed_binding=None, hours_over_capacity=None)
    review = _review(HEALTHY, capacity=[cap], plan=[plan],
                     load=[{"model": "m", "hour": h, "output_token_rate": 100.0, "capacity_token_rate": None,
                            "over_capacity": None} for h in range(24)])
    page, markdown = _both(review)
    (row,) = verdict_table(review).rows
    assert row == ["m", "met", "—", "—", "—", "2.0000 USD", "no capacity figure", "—"]
    assert "Validation</td><td>no capacity figure: —. Load-test run none;" in page
    assert "UTC hour — demand bars (red: over capacity), no capacity figure" in page
    # Two deployments of the model, one without its GPUs in force: no partial sum is shown as the model's.
    two = _review(HEALTHY, capacity=[_cap(), _cap(deployment_id="m-b")],
                  plan=[_plan(), _plan(deployment_id="m-b", gpus_deployed=None, hours_over_capacity=5)])
    (row,) = verdict_table(two).rows
    assert (row[3], row[4], row[7]) == ("—", "—", "5")
    _both(two)


def test_one_model_one_bucket_one_day() -> None:
    policy = {**POLICY, "isl_buckets": POLICY["isl_buckets"][:1]}
    review = _review([_slo("0-4k"), _slo("all")], policy={"m": policy}, tokens=[_tokens()],
                     load=[{"model": "m", "hour": 0, "output_token_rate": 10.0, "capacity_token_rate": 20.0,
                            "over_capacity": False}])
    page, markdown = _both(review)
    assert _charts(page) == ["cost", "load", "attainment"]
    cost = page[page.index('<svg class="chart chart-cost"'):]
    # One published day: its point sits in the middle of the plot (x = 64 + 560 / 2).
    assert re.findall(r'<circle cx="([0-9.]+)"', cost[:cost.index("</svg>")]) == ["344.0"]
    assert "| 1,000,000 | 250,000 | 750,000 | 25.0% |" in markdown


def test_a_day_without_latency_judges_the_success_rate_alone() -> None:
    # Usage-only logs: TTFT, queue and ITL are NULL, so no request is judged against the TTFT limits.
    blind = {"attainment": None, "attainment_met": None, "ttft_p99_ms": None, "queue_p99_ms": None,
             "itl_p99_ms": None, "tpot_p99_ms": None, "e2e_p99_ms": None, "queue_p99_met": None,
             "itl_p99_met": None, "tpot_p99_met": None, "judged_requests": 0}
    slo = [_slo("0-4k", **blind), _slo("4k-32k", **blind), _slo("all", **blind)]
    review = _review(slo, tokens=[_tokens()])
    page, markdown = _both(review)
    assert _charts(page) == ["cost", "load"]
    assert ('<p class="note">No attainment chart for m: the logs carry no latency (TTFT and ITL are NULL: '
            "usage-only logs), so no request was judged.</p>") in page
    _says("m's logs carry no latency (usage only: TTFT, queue and ITL are NULL): attainment is not measured, the "
          "success rate is judged alone.", page, markdown)
    (row,) = verdict_table(review).rows
    assert (row[1], row[2]) == ("met", "—")
    # The success rate still decides.
    failing = [*slo[:2], _slo("all", **blind, success_rate=0.9991, success_rate_met=False, all_met=False)]
    (row,) = verdict_table(_review(failing)).rows
    assert (row[1], row[2]) == ("missed", "success rate 0.9991 < 0.9995")


def test_a_day_without_what_if_rows_or_token_split_says_so() -> None:
    page, markdown = _both(_review(HEALTHY))
    _says("Prefix-cache what-if: no infra.cache_whatif_daily rows for m this day, so no prefix-cache scenario was "
          "replayed.", page, markdown)
    _says("No workload or input tables for m: no infra.token_split_daily row this day.", page, markdown)
    # A replayed scenario over no input tokens is no figure (it divided by zero before).
    empty = {"model": "m", "deployment_id": "m-a", "scenario": "lru-8k", "cache": "lru", "cache_blocks": 8192,
             "caches": 1, "requests_simulated": 10, "input_tokens": 0, "simulated_cached_tokens": 0,
             "observed_cached_tokens": 0, "currency": "USD", "cost_change": 0.0}
    page, markdown = _both(_review(HEALTHY, whatif=[empty]))
    _says("Prefix-cache what-if: no configured scenario could be replayed on the model (see the notes of "
          "infra.cache_whatif_daily).", page, markdown)
    # Requests that reached the model, none served in full: the input table stays, the workload says why.
    page, markdown = _both(_review(HEALTHY, tokens=[_tokens(workload_requests=0, isl_p50=None)]))
    assert "Input tokens of m, three figures together" in page and "Workload of m:" not in page.split("<caption>")[-1]
    _says("Workload of m: no request was served in full, so there are no ISL/OSL quantiles.", page, markdown)


def test_an_idle_gpu_model_is_named_in_one_line_not_judged() -> None:
    idle_slo = [_slo(b, model="idle", effective_requests=0, attainment=None, attainment_met=None, all_met=None)
                for b in ("0-4k", "all")]
    review = _review(HEALTHY + idle_slo, capacity=[_cap(), _cap(model="idle", deployment_id="idle-a", gpus=8.0)],
                     plan=[_plan(), _plan(model="idle", deployment_id="idle-a")],
                     tokens=[_tokens(), _tokens(model="idle", requests=0, workload_requests=0)])
    page, markdown = _both(review)
    assert [r[0] for r in verdict_table(review).rows] == ["m"]
    _says("No request reached idle (8.00 GPUs in force) on this day: not judged, left out of the verdict and the "
          "model sections.", page, markdown)
    assert '<section id="model-idle">' not in page and "## Model idle" not in markdown
    # Its capacity in force stays in the summary.
    assert "<td>idle-a</td>" in page


def test_an_empty_day_renders_with_one_line_per_part() -> None:
    review = Review(day=DAY, capacity=[], plan=[], load=[], slo=[], cost_history=[], policy={})
    page, markdown = _both(review)
    assert _charts(page) == [] and list(tables(review)) == []
    _says("No published rows for this day: no deployment was in force and no request came, so there is nothing to "
          "judge.", page, markdown)
    _says("Capacity per configuration: no capacity rows for this day (infra.capacity_daily), as no GPU deployment "
          "was in force.", page, markdown)
    _says("No cost rows for this day: no bill and no priced API usage, so there is no $/MTok chart.", page, markdown)
    # GPU deployments in force, no request anywhere.
    idle = _review([], tokens=[_tokens(requests=0, workload_requests=0)], cost_history=[])
    page, markdown = _both(idle)
    _says("No request reached any model on this day: nothing to judge.", page, markdown)
    _says("No request reached m (16.00 GPUs in force) on this day: not judged, left out of the verdict and the "
          "model sections.", page, markdown)
    assert '<table class="verdict">' not in page
