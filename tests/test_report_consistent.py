"""A review that does not contradict itself (issue 48, item 3), on hand-made published rows (no Dagster): one GPUs
needed figure in the verdict, the summary and the deployment's figures, with the rule that binds it in words and
the deficit as the sum of its parts; a deficit resting on a lower-bound capacity says so; the attainment chart
colours a bucket by the same verdict as the SLO table; and no text a reader sees has Python notation or seed
numbers."""

from __future__ import annotations

import html
import re
from typing import Any

from tests.test_report_verdict import _cap, _plan, _review, _slo
from tokenledger.report.review import (
    PALETTE,
    Review,
    attainment_chart,
    render_html,
    render_markdown,
    summary_table,
    tables,
    verdict_table,
)

# The demo's first day, llama-3.1-8b on 1 L40S: SLO met, no hour over capacity, 61.3% utilization, yet 2.50 GPUs
# needed. The busiest 5 minutes ran 278 output tok/s against a demonstrated 247.75 tok/s per GPU: the peak sizing
# needs 278 / 247.75 = 1.122 GPUs, the headroom policy adds 33.4025% of it (0.375) and one failed replica (1 GPU):
# 2.497. The Erlang C plan (12 slots, one replica of 1 GPU) needs 1 x 1.334025 + 1 = 2.334.
PEAK_SIZED = {"gpus_deployed": 1.0, "gpus_per_replica": 1, "binding_sizing": "goodput", "peak_basis": "busiest_5min",
              "peak_output_token_rate": 278.0, "capacity_goodput_per_gpu": 247.75,
              "goodput_sizing_base_gpus": 278.0 / 247.75, "headroom_pct_total": 0.334025, "headroom_failure_gpus": 1.0,
              "headroom_failure_replicas": 1, "gpus_needed_goodput": 278.0 / 247.75 * 1.334025 + 1.0,
              "gpus_needed": 278.0 / 247.75 * 1.334025 + 1.0, "base_gpus": 1.0,
              "gpus_needed_erlang_c": 1.334025 + 1.0, "erlang_c_slots": 12, "replicas_needed_erlang": 1,
              "hours_over_capacity": 0, "headroom_scaling_lag_gpus": 0.1, "headroom_forecast_error_gpus": 0.11,
              "headroom_release_gpus": 0.0605, "headroom_jitter_gpus": 0.063525,
              "gpus_needed_difference": 278.0 / 247.75 * 1.334025 - 1.334025}
HEALTHY = [_slo("0-4k"), _slo("4k-32k"), _slo("all")]


def _one_gpu(source: str = "demonstrated", verified: bool = False, **plan: Any) -> Review:
    cap = _cap(gpus=1.0, capacity_goodput_per_gpu=247.75, capacity_source=source, capacity_verified=verified,
               utilization=0.613, other_configuration_run_id=None,
               loadtest_run_id="lt-1" if source == "loadtest" else None)
    return _review(HEALTHY, capacity=[cap], plan=[_plan(**{**PEAK_SIZED, **plan})])


def _texts(review: Review) -> tuple[str, str]:
    page = render_html(review)
    # What a reader reads of the page: its text, without tags, CSS or the SVG's markup (its labels stay).
    body = page[page.index("<body>"):]
    return html.unescape(re.sub(r"<[^>]+>", " ", body)), render_markdown(review)


def test_the_verdict_and_the_summary_show_one_gpus_needed_with_its_rule_and_parts() -> None:
    review = _one_gpu()
    verdict = dict(zip(verdict_table(review).header, verdict_table(review).rows[0], strict=True))
    summary = dict(zip(summary_table(review).header, summary_table(review).rows[0], strict=True))
    # The same figure in both tables (the summary printed the Erlang C plan's 2.33 beside the verdict's 2.50), set
    # by the same rule in words: the peak sizing's 1.12 GPUs and the headroom policy's 1.38 on top.
    assert verdict["GPUs needed / in force"] == summary["GPUs needed / deployed"] == "2.50 / 1.00"
    assert verdict["GPUs needed set by"] == summary["GPUs needed set by"] == "peak sizing 1.12 + headroom 1.38"
    text, markdown = _texts(review)
    # Wherever the review says "GPUs needed" with a figure, it is this one; the Erlang C plan's 2.33 is named as
    # the Erlang C plan's.
    for document in (text, markdown):
        assert set(re.findall(r"GPUs needed(?! set by)[^0-9\n|]{0,30}?(\d+\.\d\d)", document)) == {"2.50"}
        assert "Erlang C plan with the same headroom needs 2.33" in document
    # The deficit by its parts, adding up as printed: the peak beyond the GPU in force, the headroom percentages,
    # the failed replica; and why no hour was over capacity while the peak was.
    line = next(line for line in markdown.splitlines() if line.startswith("m: GPUs needed"))
    assert "m: GPUs needed 2.50 against 1.00 in force, deficit 1.50. The peak sizing (278 output tok/s in the " \
           "busiest 5 minutes / 247.8 tok/s per GPU) needs 1.12 GPUs before headroom, 0.12 more than in force " \
           "(the busiest 5 minutes ran over the capacity of the GPUs in force, though no whole hour did)" in line
    assert "the headroom policy adds 0.38 (33.4% for scaling lag, forecast error, release and jitter) and 1.00 " \
           "so that 1 replica(s) may fail: deficit 1.50 = 0.12 + 0.38 + 1.00" in line


def test_a_peak_that_fits_leaves_the_deficit_to_the_headroom_policy() -> None:
    # 2 GPUs in force hold the Erlang C plan's 1 replica of 2 GPUs; the headroom policy (0.67 and a failed replica
    # of 2 GPUs) makes 4.67, a deficit of 2.67.
    plan = {"gpus_deployed": 2.0, "gpus_per_replica": 2, "binding_sizing": "erlang_c", "base_gpus": 2.0,
            "gpus_needed_erlang_c": 4.66805, "gpus_needed": 4.66805, "headroom_failure_gpus": 2.0,
            "goodput_sizing_base_gpus": 1.5, "gpus_needed_goodput": 4.0011}
    (row,) = verdict_table(_one_gpu(**plan)).rows
    assert row[3:6] == ["4.67 / 2.00", "deficit 2.67", "Erlang C plan 2.00 + headroom 2.67"]
    _, markdown = _texts(_one_gpu(**plan))
    assert ("The Erlang C plan (12 slots for the concurrency of the busiest 5 minutes: 1 replica(s) of 2 GPUs) needs "
            "2.00 GPUs before headroom, which the GPUs in force hold: the headroom policy binds") in markdown
    assert "deficit 2.67 = 0.67 + 2.00 of headroom." in markdown
    # The Erlang C plan does not use the capacity figure: no lower-bound sentence on its deficit.
    assert "capacity is a lower bound: run a load test" not in markdown


def test_a_deficit_on_a_lower_bound_capacity_says_so() -> None:
    sentence = "Demonstrated capacity is a lower bound: run a load test before buying"
    text, markdown = _texts(_one_gpu())
    (row,) = verdict_table(_one_gpu()).rows
    assert row[4] == "deficit 1.50 (at most: lower-bound capacity)"
    for document in (text, markdown):
        assert f"{sentence} (the deficit is at most 1.50; at least 1.33 by the Erlang C plan, which does not use " \
               "the capacity figure)." in document
    # A verified load test's capacity carries no such sentence; an unverified one is a reference figure.
    verified_text, verified_md = _texts(_one_gpu("loadtest", True))
    assert sentence not in verified_text and sentence not in verified_md
    assert verdict_table(_one_gpu("loadtest", True)).rows[0][4] == "deficit 1.50"
    _, reference = _texts(_one_gpu("loadtest", False))
    assert "The load test is a reference figure, not verified: verify it before buying" in reference
    # A surplus on a lower bound is no deficit to buy for: no sentence.
    _, surplus = _texts(_one_gpu(gpus_deployed=3.0))
    assert sentence not in surplus and "surplus 0.50" in surplus


GREEN, RED = PALETTE[2], PALETTE[6]


def _bars(svg: str) -> list[str]:
    return re.findall(r'<rect x="[0-9.]+" y="[0-9.]+" width="[0-9.]+" height="[0-9.]+" fill="([^"]+)"', svg)


def test_a_bucket_that_missed_its_success_rate_is_not_drawn_green() -> None:
    # The demo's 70B 32k-128k bucket: attainment 0.9925 over the 0.99 commitment, but its success rate 0.9988 under
    # 0.9995, so the SLO table says "missed"; the chart drew it green.
    rows = [_slo("0-4k"), _slo("32k-128k", attainment=0.9925, success_rate=0.9988, success_rate_met=False,
                               all_met=False), _slo("all", success_rate_met=False, all_met=False)]
    svg = attainment_chart("m", rows, 0.99)
    assert _bars(svg) == [GREEN, RED]
    # The bar says why under it, in the words of the commitment.
    assert re.search(r'<text [^>]*style="fill: ' + RED + '"[^>]*>success rate</text>', svg)
    review = _review(rows)
    table = next(t for t in tables(review) if t.caption.startswith("SLO of m"))
    assert [r[-1] for r in table.rows] == ["met", "missed", "missed"]


# Python-like notation: a power, a comparison operator, Python literals, a call, an identifier with underscores
# (a published table is named with its schema, infra.slo_daily; the inventory's keys with their file).
PYTHONISH = re.compile(r"\*\*|<=|>=|==|!=|\bNone\b|\bTrue\b|\bFalse\b|\b[a-z_]+\((?!s\))[a-z_, ]*\)|"
                       r"(?<![a-z]\.)\b[a-z][a-z0-9]*_[a-z0-9_]+\b")
CONFIG_KEYS = ("scale_out_minutes, warmup_minutes in deployments.yaml",)


def test_no_text_a_reader_sees_has_seed_numbers_or_python_notation() -> None:
    review = _one_gpu(**{"replicas_needed_seed_rule": 2, "rule_of_thumb_redundancy": 0.8,
                         "headroom_scaling_lag_pct": 0.1, "headroom_forecast_error_pct": 0.1,
                         "headroom_release_pct": 0.05, "headroom_jitter_pct": 0.05})
    review = Review(**{**review.__dict__, "capacity": [dict(review.capacity[0], lambda_slo_max=1.24,
                                                            task_attainment=0.86, expected_task_attainment=0.80)]})
    text, markdown = _texts(review)
    # Markdown's bold is its captions, a whole line each; no other ** is left.
    unbolded = re.sub(r"^\*\*[^*\n]+\*\*$", "", markdown, flags=re.MULTILINE)
    for name, document in (("html", text), ("markdown", unbolded)):
        assert "seed 0" not in document.lower(), name
        for key in CONFIG_KEYS:
            document = document.replace(key, "")
        found = PYTHONISH.findall(document)
        assert not found, (name, sorted(set(found)))
    # The rules are named instead: the expected task attainment, the concurrency rule, the peak sizing.
    assert "the model's attainment to the power of the mean steps per task" in text
    assert "the concurrency rule" in text and "highest load-test rate within SLO 1.24 req/s" in text


def test_attainment_ticks_print_their_exact_value() -> None:
    # From 0.95 to 1 in four steps: 0.9625 and 0.9875 printed as 0.962 and 0.988, values no gridline is at.
    svg = attainment_chart("m", [_slo("0-4k", attainment=0.9990), _slo("all")], 0.99)
    ticks = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert ticks == ["0.95", "0.9625", "0.975", "0.9875", "1"]
