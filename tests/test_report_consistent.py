"""A review that does not contradict itself (issue 48 item 3, issue 57 items 2 and 3), on hand-made published rows
(no Dagster): one GPUs needed figure, infra.capacity_verdict_daily's, wherever the review says it; words that match
the state (a model short only of the policy reads 'policy', in a colour of its own, never 'deficit'); a bucket not
judged is never 'missed'; no sentence says 'met' beside a table that says missed; the what-if never calls 'best' a
cache worse than the one observed; every term a finance reader meets is in the glossary; and no text a reader sees
has Python notation or design-seed numbers."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from tests.test_charts import _fill
from tests.test_report_verdict import _cap, _plan, _review, _slo
from tokenledger.report.charts import GREEN, RED, attainment_figure
from tokenledger.report.review import (
    GLOSSARY,
    TEMPLATES,
    Review,
    figures_table,
    render_html,
    render_markdown,
    tables,
    verdict_table,
    whatif_findings,
)

# The demo's first day, llama-3.1-8b on 1 L40S: SLO met, no hour over capacity, 61.3% utilization, yet 2.50 GPUs
# needed. The busiest 5 minutes ran 278 output tok/s against a demonstrated 247.75 tok/s per GPU: the peak sizing
# needs 278 / 247.75 = 1.122 GPUs, the headroom policy adds 33.4025% of it (0.375) and one failed replica (1 GPU):
# 2.497. The Erlang C plan (12 slots, one replica of 1 GPU) needs 1 x 1.334025 + 1 = 2.334.
PEAK_SIZED = {"gpus_deployed": 1.0, "gpus_per_replica": 1, "binding_sizing": "goodput", "peak_basis": "busiest_5min",
              "peak_output_token_rate": 278.0, "capacity_goodput_per_gpu": 247.75,
              "goodput_sizing_base_gpus": 278.0 / 247.75, "headroom_pct_total": 0.334025, "headroom_failure_gpus": 1.0,
              "headroom_failure_replicas": 1, "headroom_n_minus_k": 1, "headroom_failure_domain": "replica",
              "gpus_needed_goodput": 278.0 / 247.75 * 1.334025 + 1.0,
              "gpus_needed": 278.0 / 247.75 * 1.334025 + 1.0, "base_gpus": 1.0,
              "gpus_needed_erlang_c": 1.334025 + 1.0, "erlang_c_slots": 12, "replicas_needed_erlang": 1,
              "hours_over_capacity": 0, "headroom_scaling_lag_gpus": 0.1, "headroom_forecast_error_gpus": 0.11,
              "headroom_release_gpus": 0.0605, "headroom_jitter_gpus": 0.063525, "headroom_scaling_lag_pct": 0.1,
              "headroom_forecast_error_pct": 0.1, "headroom_release_pct": 0.05, "headroom_jitter_pct": 0.05,
              "gpus_needed_difference": 278.0 / 247.75 * 1.334025 - 1.334025}
# 2 GPUs in force hold the Erlang C plan's 1 replica of 2 GPUs; the headroom policy (0.67) and a failed replica of 2
# GPUs make 4.67: short only of the policy, by 2.67 GPUs, two more replicas of 2.
POLICY_SHORT = {"gpus_deployed": 2.0, "gpus_per_replica": 2, "binding_sizing": "erlang_c", "base_gpus": 2.0,
                "gpus_needed_erlang_c": 4.66805, "gpus_needed": 4.66805, "headroom_failure_gpus": 2.0,
                "goodput_sizing_base_gpus": 1.5, "gpus_needed_goodput": 4.0011}
HEALTHY = [_slo("0-4k"), _slo("4k-32k"), _slo("all")]


def _one_gpu(source: str = "demonstrated", verified: bool = False, slo: list[dict[str, Any]] | None = None,
             **plan: Any) -> Review:
    cap = _cap(gpus=1.0, capacity_goodput_per_gpu=247.75, capacity_source=source, capacity_verified=verified,
               utilization=0.613, other_configuration_run_id=None,
               loadtest_run_id="lt-1" if source == "loadtest" else None)
    return _review(slo or HEALTHY, capacity=[cap], plan=[_plan(**{**PEAK_SIZED, **plan})])


def _texts(review: Review) -> tuple[str, str]:
    page = render_html(review)
    # What a reader reads of the page: its text, without tags, CSS or the SVG's markup (its labels stay).
    body = page[page.index("<body>"):]
    # Tags as nothing (a figure is a <span> inside its sentence), a table cell or a block as a space.
    body = re.sub(r"</?(td|th|tr|p|li|h\d|div|figure|section|caption|dt|dd|table|summary|details)\b[^>]*>", " ", body)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", body)).split()), render_markdown(review)


def _row(review: Review) -> dict[str, str]:
    table = verdict_table(review)
    (row,) = table.text_rows()
    return dict(zip([str(h) for h in table.header], row, strict=True))


def test_the_review_shows_one_gpus_needed_the_verdicts() -> None:
    review = _one_gpu()
    (verdict,) = review.verdict
    assert _row(review)["GPUs needed / in force"] == "2.50 / 1.00"
    figures = dict(figures_table(review, review.capacity[0]).text_rows())
    assert figures["GPUs needed (the larger, with headroom)"] == "2.50"
    assert figures["GPUs needed set by"] == "peak sizing"
    text, markdown = _texts(review)
    # Wherever the review says "GPUs needed" with a figure, it is the verdict's; the Erlang C plan's 2.33 is named as
    # the Erlang C plan's.
    for document in (text, markdown):
        assert set(re.findall(r"GPUs needed(?! set by)[^0-9\n|]{0,30}?(\d+\.\d\d)", document)) == {"2.50"}
        assert "2.33 with the headroom policy" in document
        # The gap in its three parts, each the verdict's cell: the peak 0.12, headroom 0.37, redundancy 1.00.
        assert ("GPUs needed 2.50 (set by the peak sizing) against 1.00 in force; the gap in three parts: the peak "
                "0.12 (negative: GPUs to spare at the peak), headroom 0.37, redundancy 1.00.") in " ".join(
                    document.split())
    assert round(verdict["gap_headroom"], 2) == 0.37 and verdict["verdict"] == "short"


def test_a_model_short_only_of_the_policy_reads_policy_in_its_own_colour() -> None:
    review = _one_gpu(**POLICY_SHORT)
    row = _row(review)
    # The SLO is met and the GPUs in force hold the peak: the words say what is short, not 'deficit'.
    assert row["verdict"] == "SLO met; policy: 2 more replicas (4 GPUs) for N+1 and 33.4% headroom"
    assert row["GPUs needed / in force"] == "4.67 / 2.00"
    text, markdown = _texts(review)
    for document in (text, markdown):
        assert "deficit" not in document.lower()
    page = render_html(review)
    assert '<td class="v-policy"><span data-table="infra.capacity_verdict_daily" data-column="verdict_text"' in page
    # Four verdicts, four colours: policy is neither ok's green nor short's red.
    css = (TEMPLATES / "review.css").read_text()
    colours = {v: re.search(rf"td\.v-{v} {{ background: (#[0-9a-f]+);", css).group(1)
               for v in ("ok", "policy", "short", "slo_missed")}
    assert len(set(colours.values())) == 4, colours


def test_a_gap_on_a_lower_bound_capacity_says_at_most() -> None:
    assert _row(_one_gpu())["verdict"] == ("short: the peak needs 0.12 more GPUs than the 1.00 in force (at most: "
                                           "demonstrated capacity is a lower bound); SLO met")
    assert "at most" not in _row(_one_gpu("loadtest", True))["verdict"]
    assert _row(_one_gpu("loadtest", False))["verdict"].endswith(
        "(at most: the load test is a reference figure, not verified); SLO met")
    # GPUs to spare: the words say so, no shortfall.
    assert _row(_one_gpu(gpus_deployed=3.0))["verdict"] == ("SLO met; the 3.00 GPUs in force hold the peak with the "
                                                            "headroom policy (2.50 needed)")


def _slo_table(review: Review):
    return next(t for t in tables(review) if str(t.caption).startswith("SLO"))


def test_a_bucket_that_missed_its_success_rate_is_not_drawn_green() -> None:
    # The demo's 70B 32k-128k bucket: attainment 0.9925 over the 0.99 commitment, but its success rate 0.9988 under
    # 0.9995, so the SLO table says "missed"; the chart drew it green.
    rows = [_slo("0-4k"), _slo("32k-128k", attainment=0.9925, success_rate=0.9988, success_rate_met=False,
                               all_met=False), _slo("all", success_rate_met=False, all_met=False)]
    chart = attainment_figure("m", rows, 0.99)
    svg = chart.svg()
    assert [_fill(chart, svg, f"bar-{b}") for b in ("0-4k", "32k-128k")] == [GREEN, RED]
    # The bar says why under it, in the words of the commitment.
    assert re.search(rf'<g id="{chart.id("missed-32k-128k-0")}"><text [^>]*fill: {RED}[^>]*>success rate</text>', svg)
    assert _slo_table(_review(rows)).column("verdict") == ["met", "missed", "missed"]


def test_a_bucket_not_judged_is_never_missed() -> None:
    # A hosted model's 0-4k bucket: 8 requests, too few to judge (attainment_met NULL), yet its own success rate
    # under the target makes slo_daily's all_met false. It read 'missed' in the table and red in the chart.
    rows = [_slo("0-4k", effective_requests=8, attainment=0.0, attainment_met=None, success_rate=0.0,
                 success_rate_met=False, all_met=False), _slo("4k-32k"), _slo("all")]
    review = _review(rows)
    assert _slo_table(review).column("verdict") == ["not judged", "met", "met"]
    assert _row(review)["verdict"].startswith("SLO met")
    svg = attainment_figure("m", rows, 0.99).svg()
    assert "0-4k (not judged)" in svg and "success rate" not in re.sub(r"<title>.*?</title>", "", svg)
    page = render_html(review)
    assert '<td class="muted"><span data-table="infra.slo_daily" data-column="all_met" data-key="m|0-4k"' in page


def test_no_sentence_says_met_beside_a_table_that_says_missed() -> None:
    # The day missed on its success rate while every judged bucket-hour kept its attainment: the review said "Every
    # judged bucket met its attainment commitment in every hour." under an SLO table whose verdict was 'missed'.
    slo = [_slo("0-4k"), _slo("4k-32k"), _slo("all", success_rate=0.9991, success_rate_met=False, all_met=False)]
    hourly = [{"model": "m", "hour": h, "isl_bucket": b, "attainment": 0.999, "attainment_met": True}
              for h in range(24) for b in ("0-4k", "4k-32k")]
    review = _review(slo, slo_hourly=hourly)
    assert _slo_table(review).column("verdict")[-1] == "missed"
    page = render_html(review)
    notes = [html.unescape(re.sub(r"<[^>]+>", "", n)) for n in re.findall(r'<p class="note">(.*?)</p>', page)]
    assert not [n for n in notes if re.search(r"\bmet\b", n)], notes
    # Missed bucket-hours are named.
    hourly[3] = {**hourly[3], "attainment": 0.98, "attainment_met": False}
    _, markdown = _texts(_review(slo, slo_hourly=hourly))
    assert "Bucket-hours below the attainment commitment: 01:00 4k-32k 0.9800." in markdown


def _whatif(scenario: str, cache: str, hit: float, observed: float, change: float | None, blocks: int | None = None,
            **changes: Any) -> dict[str, Any]:
    row = {"model": "m", "deployment_id": "m-a", "scenario": scenario, "cache": cache, "cache_blocks": blocks,
           "caches": 1, "requests_simulated": 2_000, "input_tokens": 1_000_000, "simulated_hit_ratio": hit,
           "observed_hit_ratio": observed, "currency": "USD", "cost_change_per_mtok_input": change}
    row.update(changes)
    return row


def test_the_what_if_never_calls_best_a_cache_worse_than_the_observed() -> None:
    # The demo's coding agent: 62.0% observed, the largest configured LRU 57.2%. It read "best configured cache
    # lru-40gb: 57.2% (observed 62.0%)".
    worse = _review(HEALTHY, whatif=[_whatif("lru-8gb", "lru", 0.40, 0.62, 0.05, 100),
                                     _whatif("lru-40gb", "lru", 0.572, 0.62, 0.01, 500),
                                     _whatif("infinite", "infinite", 0.66, 0.62, -0.01)])
    assert [str(line) for line in whatif_findings(worse, "m")] == [
        "Prefix-cache what-if on m-a: the observed 62.0% of input cached beats every configured cache (the best, "
        "lru-40gb, 57.2%, infinite cache 66.0%)."]
    better = _review(HEALTHY, whatif=[_whatif("lru-8k", "lru", 0.5, 0.4, -0.09, 8192),
                                      _whatif("lru-64k", "lru", 0.7, 0.4, -0.27, 65536),
                                      _whatif("lru-64k-twin", "lru", 0.7, 0.4, -0.27, 65536, caches=2),
                                      _whatif("infinite", "infinite", 0.8, 0.4, -0.36)])
    assert [str(line) for line in whatif_findings(better, "m")] == [
        "Prefix-cache what-if on m-a: the best configured cache, lru-64k, would have cached 70.0% of input (observed "
        "40.0%, infinite cache 80.0%); input cost change -0.2700 USD per 1M input tokens."]
    sampled = _review(HEALTHY, whatif=[_whatif("lru-64k", "lru", 0.7, 0.4, 0.02, 65536, method="shards",
                                               sampling_rate=1 / 9, sampled_accesses=1_200_000,
                                               block_accesses=9_000_000)])
    assert str(whatif_findings(sampled, "m")[0]).endswith(
        "input cost change +0.0200 USD per 1M input tokens. lru-64k is an estimate from a SHARDS sample of the blocks "
        "(rate 1/9: 1,200,000 of 9,000,000 block accesses replayed), not an exact replay.")
    unhashed = _review(HEALTHY, whatif=[_whatif("infinite", "infinite", 0, 0, 0.0, requests_simulated=0)])
    assert [str(line) for line in whatif_findings(unhashed, "m")] == [
        "Prefix-cache what-if on m-a: no request of the day carried prefix block hashes, so none was replayed."]


# Every term a finance reader meets (issue 57 item 3), each defined in the glossary.
TERMS = ("$/MTok delivered", "$/MTok under SLO", "goodput", "SLO attainment", "ISL bucket", "not judged", "N+1",
         "headroom", "GPUs needed", "GPUs in force", "capacity basis", "lower bound", "daily capacity", "daily value",
         "daily cost at capacity", "overstatement", "utilization", "hours over capacity", "cached / recomputed input")


def test_every_term_is_in_the_glossary_and_every_link_lands() -> None:
    assert set(TERMS) <= {term for _, term, _ in GLOSSARY}
    page = render_html(_one_gpu(**POLICY_SHORT))
    glossary = page[page.index('<section id="glossary">'):]
    anchors = set(re.findall(r'<div id="(g-[\w-]+)"><dt>', glossary))
    links = set(re.findall(r'href="#([\w-]+)"', page))
    assert links - {"g-glossary"} <= anchors and "g-glossary" not in anchors
    assert {"g-mtok-delivered", "g-mtok-under-slo", "g-daily-capacity", "g-gpus-needed", "g-verdict", "g-n-plus-1",
            "g-daily-value", "g-daily-cost-at-capacity", "g-overstatement", "g-utilization"} <= links
    assert '<section id="glossary"><h2>Glossary</h2>' in page


# Python-like notation: a power, a comparison operator, Python literals, a call, an identifier with underscores
# (a published table is named with its schema, infra.slo_daily; the inventory's keys with their file).
PYTHONISH = re.compile(r"\*\*|<=|>=|==|!=|\bNone\b|\bTrue\b|\bFalse\b|\b[a-z_]+\((?!s\))[a-z_, ]*\)|"
                       r"(?<![a-z]\.)\b[a-z][a-z0-9]*_[a-z0-9_]+\b")
CONFIG_KEYS = ("scale_out_minutes, warmup_minutes in deployments.yaml",)


def test_no_text_a_reader_sees_has_seed_words_or_python_notation() -> None:
    review = _one_gpu(**{"replicas_needed_seed_rule": 2, "rule_of_thumb_redundancy": 0.8})
    review = Review(**{**review.__dict__, "capacity": [dict(review.capacity[0], lambda_slo_max=1.24,
                                                            task_attainment=0.86, expected_task_attainment=0.80)]})
    text, markdown = _texts(review)
    # Markdown's bold is its captions, a whole line each (and the glossary's terms); no other ** is left.
    unbolded = re.sub(r"\*\*[^*\n]+\*\*", "", markdown)
    for name, document in (("html", text), ("markdown", unbolded)):
        assert "seed" not in document.lower(), name
        for key in CONFIG_KEYS:
            document = document.replace(key, "")
        found = PYTHONISH.findall(document)
        assert not found, (name, sorted(set(found)))
    # The rules are named instead: the expected task attainment, the rule of thumb, the peak sizing.
    assert "the model's attainment to the power of the mean steps per task" in text
    assert "the rule of thumb, for comparison: 2 replica(s) at redundancy 0.8" in text
    assert "highest load-test rate within SLO 1.24 req/s" in text


def test_the_templates_render_the_page_with_no_script_and_nothing_fetched() -> None:
    page = render_html(_one_gpu())
    assert {p.name for p in TEMPLATES.iterdir()} >= {"review.html.j2", "review.md.j2", "review.css"}
    assert "<script" not in page.lower() and "@import" not in page and "url(" not in page
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)
    # The details are folded: everything but the verdict, the charts and the SLO table is inside <details>.
    body = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    assert "Capacity review of m-a" not in body and "Capacity review of m-a" in page
    assert page.count("<details>") == 1


def test_the_wheel_carries_the_templates() -> None:
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parent.parent
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    package = root / "tokenledger" / "report"
    for path in TEMPLATES.iterdir():
        assert any(fnmatch.fnmatch(str(path.relative_to(package)), p) for p in patterns), path.name
