"""The capacity review of sparse days, on hand-made published rows (no Dagster): no cost rows, no load test, one
model, no latency, no what-if rows, idle deployments and an empty day each render in HTML and Markdown, and every
part left out says why in one line."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

from tests.test_report_verdict import DAY, POLICY, _cap, _plan, _review, _slo
from tokenledger.report.review import Review, cost_chart, render_html, render_markdown, tables, verdict_table


def _both(review: Review) -> tuple[str, str]:
    """Both renderings, and the check that every table of the review is in each."""
    page, markdown = render_html(review), render_markdown(review)
    captions = [_plain(c) for c in re.findall(r"<caption>(.*?)</caption>", page)]
    for table in tables(review):
        assert str(table.caption) in captions and f"**{html.escape(str(table.caption), quote=False)}**" in markdown
    return page, markdown


def _plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _notes(page: str) -> list[str]:
    """The page's lines (notes and list items) as a reader reads them."""
    return [_plain(n) for n in re.findall(r'<(?:p class="note"|li)>(.*?)</(?:p|li)>', page, re.S)]


def _says(line: str, page: str, markdown: str) -> None:
    assert line in _notes(page), line
    escaped = html.escape(line, quote=False)
    assert f"\n{escaped}\n" in markdown or f"\n- {escaped}\n" in markdown, line


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
    (row,) = verdict_table(review).text_rows()
    assert row[3:5] == ["—", "—"]
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
    plan = _plan(gpus_needed_erlang_c=None, gpus_needed=None, hours_over_capacity=None)
    review = _review(HEALTHY, capacity=[cap], plan=[plan],
                     load=[{"model": "m", "hour": h, "output_token_rate": 100.0, "capacity_token_rate": None,
                            "over_capacity": None} for h in range(24)])
    page, markdown = _both(review)
    (row,) = verdict_table(review).text_rows()
    assert row == ["m", "m-a", "SLO met; GPUs needed not known (infra.capacity_plan_daily.plan_note says why)", "—",
                   "2.0000 USD", "—", "— / 16.00", "—", "no capacity figure"]
    _says("m: good tokens a day not known (no capacity figure); 2.0000 USD per million good tokens (realized).", page,
          markdown)
    assert dict(next(t for t in tables(review) if str(t.caption).startswith("Capacity review")).text_rows())[
        "Validation"].startswith("no capacity figure: —. Load-test run none;")
    load = page[page.index('<svg class="chart chart-load"'):]
    assert ">no capacity figure</text>" in load[:load.index("</svg>")]
    # Two deployments of the model, one without its GPUs in force: no partial sum is shown as the model's.
    two = _review(HEALTHY, capacity=[_cap(), _cap(deployment_id="m-b")],
                  plan=[_plan(), _plan(deployment_id="m-b", gpus_deployed=None, hours_over_capacity=5)])
    assert [r[6:8] for r in verdict_table(two).text_rows()] == [["12.40 / 16.00", "3"], ["12.40 / —", "5"]]
    _both(two)


def test_one_model_one_bucket_one_day() -> None:
    policy = {**POLICY, "isl_buckets": POLICY["isl_buckets"][:1]}
    review = _review([_slo("0-4k"), _slo("all")], policy={"m": policy}, tokens=[_tokens()],
                     load=[{"model": "m", "hour": 0, "output_token_rate": 10.0, "capacity_token_rate": 20.0,
                            "over_capacity": False}])
    page, markdown = _both(review)
    assert _charts(page) == ["cost", "load", "attainment"]
    cost = page[page.index('<svg class="chart chart-cost"'):]
    # One published day: one point, no line.
    assert cost[:cost.index("</svg>")].count("<circle") == 1
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
    _says("m's logs carry no latency (usage only: TTFT, queue and ITL are NULL): attainment is not measured (no "
          "attainment chart), the success rate is judged alone.", page, markdown)
    (row,) = verdict_table(review).text_rows()
    assert row[2].startswith("SLO met;")
    # The success rate still decides.
    failing = [*slo[:2], _slo("all", **blind, success_rate=0.9991, success_rate_met=False, all_met=False)]
    (row,) = verdict_table(_review(failing)).text_rows()
    assert row[2].startswith("SLO missed: success rate 0.9991 < 0.9995;")


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
    _says("Prefix-cache what-if on m-a: no configured scenario could be replayed (see the notes of "
          "infra.cache_whatif_daily).", page, markdown)
    # Requests that reached the model, none served in full: the input table stays, the workload says why.
    page, markdown = _both(_review(HEALTHY, tokens=[_tokens(workload_requests=0, isl_p50=None)]))
    captions = [str(t.caption) for t in tables(_review(HEALTHY, tokens=[_tokens(workload_requests=0, isl_p50=None)]))]
    assert "Input tokens of m, three figures together" in captions
    assert not [c for c in captions if c.startswith("Workload")]
    _says("Workload of m: no request was served in full, so there are no ISL/OSL quantiles.", page, markdown)


def test_an_idle_gpu_model_is_named_in_one_line_not_judged() -> None:
    idle_slo = [_slo(b, model="idle", effective_requests=0, attainment=None, attainment_met=None, all_met=None)
                for b in ("0-4k", "all")]
    review = _review(HEALTHY + idle_slo, capacity=[_cap(), _cap(model="idle", deployment_id="idle-a", gpus=8.0)],
                     plan=[_plan(), _plan(model="idle", deployment_id="idle-a")],
                     tokens=[_tokens(), _tokens(model="idle", requests=0, workload_requests=0)])
    page, markdown = _both(review)
    assert [r[0] for r in verdict_table(review).text_rows()] == ["m"]
    _says("No request reached idle (8.00 GPUs in force) on this day: not judged, left out of the verdict and the "
          "model sections.", page, markdown)
    assert '<section id="model-idle">' not in page and "## Model idle" not in markdown



def test_an_empty_day_renders_with_one_line_per_part() -> None:
    review = Review(day=DAY, capacity=[], plan=[], load=[], slo=[], cost_history=[], policy={})
    page, markdown = _both(review)
    assert _charts(page) == [] and list(tables(review)) == []
    _says("No published rows for this day: no deployment was in force and no request came, so there is nothing to "
          "judge.", page, markdown)
    _says("No cost rows for this day: no bill and no priced API usage, so there is no $/MTok chart.", page, markdown)
    # GPU deployments in force, no request anywhere.
    idle = _review([], tokens=[_tokens(requests=0, workload_requests=0)], cost_history=[])
    page, markdown = _both(idle)
    _says("No request reached any model on this day: nothing to judge.", page, markdown)
    _says("No request reached m (16.00 GPUs in force) on this day: not judged, left out of the verdict and the "
          "model sections.", page, markdown)
    assert '<table class="verdict">' not in page


# --- hosted-API models (provider-managed: no GPU of ours) ------------------------------------------------------------

API = "api-m"


def _api_slo(bucket: str, **changes: Any) -> dict[str, Any]:
    # Logs with TTFT but no ITL (a proxy's log): 990 effective requests, 1.5% over the TTFT limit.
    row = _slo(bucket, model=API, effective_requests=990, attainment=0.985, attainment_met=False, all_met=False,
               ttft_p99_ms=1_400.0, queue_p99_ms=None, itl_p99_ms=None, tpot_p99_ms=None, queue_p99_met=None,
               itl_p99_met=None, tpot_p99_met=None, itl_unknown_share=1.0, judged_requests=990)
    row.update(changes)
    return row


def _api_rows(**cost: Any) -> dict[str, Any]:
    """A hosted model's rows but its SLO rows (`_api_slo`): 1,000 requests, 2M input of which 1.5M cached, 250k
    output; 5 USD for 200k compliant output tokens (25 USD per MTok under SLO) and 250k delivered (20 USD per MTok);
    its busiest minute at half its RPM limit and a quarter of its TPM limit."""
    return {
        "policy": {"m": POLICY, API: POLICY},
        "tokens": [_tokens(model=API, requests=1_000, input_total=2_000_000, input_cached=1_500_000,
                           input_recomputed=500_000, cache_hit_ratio=0.75, input_overstatement=4.0,
                           output_tokens=250_000, input_output_ratio=8.0, workload_requests=985)],
        "load": [{"model": API, "hour": h, "output_token_rate": 3.0, "capacity_token_rate": None,
                  "over_capacity": None, "peak_minute_rpm_utilization": 0.5 if h == 12 else 0.1,
                  "peak_minute_tpm_utilization": 0.25 if h == 9 else 0.05, "over_rate_limit": False}
                 for h in range(24)],
        "cost_history": [{"day": DAY, "model": API, "deployment_id": "api-m-provider", "currency": "USD",
                          "cost_per_mtok_goodput": 25.0, "cost_per_mtok_output": 20.0, "cost_total": 5.0,
                          "compliant_output_tokens": 200_000,
                          **cost}],
    }


# The hosted model's verdict row: infra.capacity_verdict_daily's words, both $/MTok (5 USD over 250k delivered and
# 200k compliant output tokens), no GPU figure.
HOSTED_ROW = [API, "api-m-provider", "SLO missed: bucket 0-4k attainment 0.9850 < 0.99; provider-managed: no GPUs of "
                                     "ours", "20.0000 USD", "25.0000 USD", "provider-managed", "provider-managed", "—",
              "provider-managed"]
HOSTED_FIGURES = [["requests", "1,000"],
                  ["latency", "TTFT P99 1,400 ms, attainment 0.9850 (ITL not logged for 100.0%)"],
                  ["input: total = cached + recomputed",
                   "2,000,000 = 1,500,000 cached + 500,000 recomputed (75.0% cached)"], ["output tokens", "250,000"],
                  ["busiest minute against the rate limits",
                   "busiest minute 50.0% of the RPM limit (12:00) and 25.0% of the TPM limit (09:00)"]]
NO_CAPACITY_LINE = "No capacity: provider-managed (api-m-provider), so no GPU figure, capacity template or plan."


def _mixed(**cost: Any) -> Review:
    """The GPU model m beside the hosted model."""
    api = _api_rows(**cost)
    gpu = _review(HEALTHY)
    return _review(HEALTHY + [_api_slo("0-4k"), _api_slo("all")], policy=api["policy"],
                   tokens=[_tokens(), *api["tokens"]], load=gpu.load + api["load"],
                   cost_history=gpu.cost_history + api["cost_history"])


def _table(review: Review, start: str):
    return next(t for t in tables(review) if str(t.caption).startswith(start))


def test_a_hosted_model_has_its_own_verdict_row() -> None:
    review = _mixed()
    page, markdown = _both(review)
    verdict = verdict_table(review).text_rows()
    assert [r[0] for r in verdict] == ["m", API] and verdict[1] == HOSTED_ROW
    assert "| " + " | ".join(html.escape(c, quote=False) for c in HOSTED_ROW) + " |" in markdown
    _says(f"{API}: provider-managed, its capacity is the provider's; 25.0000 USD per million good tokens (realized).",
          page, markdown)
    # Its section: load without a capacity line, attainment and SLO on its screen; latency, input, rate limits and
    # workload folded; no capacity template.
    section = page[page.index(f'<section id="model-{API}">'):]
    assert section.startswith(f'<section id="model-{API}"><h2>Model {API} (hosted API, provider-managed)</h2>')
    assert re.findall(r'<svg class="chart chart-(\w+)"', section) == ["load", "attainment"]
    assert ">provider-managed: no capacity line</text>" in section
    assert _table(review, f"Figures of {API}").text_rows() == HOSTED_FIGURES
    assert "Capacity review of" not in section and f"Input tokens of {API}, three figures" in section
    _says(NO_CAPACITY_LINE, page, markdown)
    _says("Prefix-cache what-if: not replayed for a provider-managed model (its cache is the provider's).", page,
          markdown)
    # The money compares across models: the hosted model's $/MTok under SLO is a point on the shared chart.
    cost = page[page.index('<svg class="chart chart-cost"'):]
    assert f"{DAY} api-m-provider: 25.0000 USD" in cost[:cost.index("</svg>")]


def test_a_usage_only_hosted_model_is_judged_on_its_success_rate() -> None:
    blind = {"attainment": None, "attainment_met": None, "ttft_p99_ms": None, "itl_unknown_share": 0.0,
             "judged_requests": 0, "all_met": True}
    api = _api_rows(cost_per_mtok_goodput=None, compliant_output_tokens=0)
    review = _review([_api_slo("0-4k", **blind), _api_slo("all", **blind)], capacity=[], plan=[], **api)
    page, markdown = _both(review)
    (row,) = verdict_table(review).text_rows()
    assert row[2:5] == ["SLO met; provider-managed: no GPUs of ours", "20.0000 USD", "— (no latency logged)"]
    assert dict(_table(review, f"Figures of {API}").text_rows())["latency"] == ("not in the logs (usage only): "
                                                                              "success rate judged alone")
    _says(f"{API}: provider-managed, its capacity is the provider's; no latency logged, so no token is judged good "
          "(20.0000 USD per million delivered).", page, markdown)
    assert re.findall(r'<svg class="chart chart-(\w+)"', page) == ["load"]
    _says(f"{API}'s logs carry no latency (usage only: TTFT, queue and ITL are NULL): attainment is not measured (no "
          "attainment chart), the success rate is judged alone.", page, markdown)
    _says("No $/MTok under SLO up to this day: no costed deployment had compliant output (or its cost is not "
          "known), so there is no $/MTok chart.", page, markdown)


def test_a_hosted_only_day_reads_as_a_review_of_that_traffic() -> None:
    # No GPU deployment in force (no capacity rows): the hosted verdict leads, every GPU part says why it is out.
    review = _review([_api_slo("0-4k"), _api_slo("all")], capacity=[], plan=[], **_api_rows())
    page, markdown = _both(review)
    assert page[page.index("<table"):].startswith('<table class="verdict"><caption>Verdict per deployment')
    assert verdict_table(review).text_rows() == [HOSTED_ROW]
    _says("No GPU deployment was in force on this day (no infra.capacity_daily rows): the review is of the "
          "hosted-API traffic alone.", page, markdown)
    assert "GPUs needed / in force" in page and "Capacity review of" not in page
    # GPU deployments in force but idle: named in one line with their GPUs, not three 'not judged' verdict rows.
    idle = [_cap(model=m, deployment_id=f"{m}-a", gpus=2.0) for m in ("g1", "g2", "g3")]
    api = _api_rows()
    review = _review([_api_slo("0-4k"), _api_slo("all")]
                     + [_slo("all", model=c["model"], effective_requests=0, attainment=None, all_met=None,
                             attainment_met=None) for c in idle],
                     capacity=idle, plan=[_plan(model=c["model"], deployment_id=c["deployment_id"]) for c in idle],
                     policy=api["policy"], tokens=api["tokens"] + [_tokens(model=c["model"], requests=0)
                                                                   for c in idle],
                     load=api["load"], cost_history=api["cost_history"])
    page, markdown = _both(review)
    assert verdict_table(review).text_rows() == [HOSTED_ROW]
    _says("No request reached g1 (2.00 GPUs in force), g2 (2.00 GPUs in force), g3 (2.00 GPUs in force) on this "
          "day: not judged, left out of the verdict and the model sections.", page, markdown)
    assert re.findall(r'<section id="model-([\w-]+)">', page) == [API]


def test_an_idle_hosted_model_is_named_as_provider_managed() -> None:
    api = _api_rows()
    review = _review(HEALTHY + [_api_slo("all", effective_requests=0, attainment=None, all_met=None)],
                     tokens=[_tokens(), {**api["tokens"][0], "requests": 0}])
    page, markdown = _both(review)
    assert [r[0] for r in verdict_table(review).text_rows()] == ["m"]
    _says(f"No request reached {API} (provider-managed) on this day: not judged, left out of the verdict and the "
          "model sections.", page, markdown)


def test_an_hour_over_a_hosted_rate_limit_is_named() -> None:
    api = _api_rows()
    api["load"][12] = {**api["load"][12], "peak_minute_rpm_utilization": 1.16, "over_rate_limit": True}
    review = _review([_api_slo("0-4k"), _api_slo("all")], capacity=[], plan=[], **api)
    _both(review)
    assert dict(_table(review, f"Figures of {API}").text_rows())["busiest minute against the rate limits"] == (
        "busiest minute 116.0% of the RPM limit (12:00) and 25.0% of the TPM limit (09:00), hours over a rate "
        "limit: 12:00")
