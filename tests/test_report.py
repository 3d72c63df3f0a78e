"""The capacity review report: self-contained HTML with its charts, and Markdown with the same tables, for generated
days run through the pipeline; and escaping on a hand-made review."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tests.conftest import failure_text, materialize
from tokenledger.capacity.day import report_paths, review_of_day
from tokenledger.config import load_config
from tokenledger.generate import generate_landing_zone
from tokenledger.publish.versions import manifest_path
from tokenledger.report.charts import tick
from tokenledger.report.review import Review, _md_cell, fmt, render_html, render_markdown, tables
from tokenledger.storage import lake
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

START, END = date(2026, 11, 16), date(2026, 11, 17)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("report") / "home"
    generate_landing_zone(root, START, 2, 2_000, seed=7, bad_rows_per_day=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(root))
        result = materialize(START.isoformat(), END.isoformat())
        assert result.success, failure_text(result)
        yield root


def published(home: Path, schema: str, table: str, day: date = END) -> list[dict]:
    cursor = duckdb.connect().execute("SELECT * FROM read_parquet($f)",
                                      {"f": str(lake.day_file(home / "exports", schema, table, day))})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def test_the_html_is_self_contained_with_every_chart(home: Path) -> None:
    html_path, md_path = report_paths(HomeLayout.of(home), END)
    assert html_path.name == "capacity-review-2026-11-17.html" and html_path.is_file() and md_path.is_file()
    assert report_paths(HomeLayout.of(home), START)[0].is_file()
    text = html_path.read_text()
    assert not re.search(r"https?://", text) and "<script" not in text.lower()
    # Links only within the page (the glossary), nothing fetched.
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", text) and "@import" not in text and "url(" not in text

    models = sorted({r["model"] for r in published(home, "infra", "capacity_daily")})
    assert len(models) == 3
    kinds = re.findall(r'<svg class="chart chart-(\w+)"', text)
    # One cost chart for the fleet (money compares across models), a load curve and an attainment chart per model.
    assert sorted(kinds) == sorted(["cost"] + ["load", "attainment"] * len(models))
    for model in models:
        section = text[text.index(f'<section id="model-{model.replace(".", "-")}">'):]
        assert re.match(r'<section id="[^"]+"><h2>Model ' + re.escape(model) + "</h2>", section)
        assert '<svg class="chart chart-load"' in section and '<svg class="chart chart-attainment"' in section
    # The cost chart has a point per deployment and published day up to this one.
    cost_chart = text[text.index('<svg class="chart chart-cost"'):]
    cost_chart = cost_chart[:cost_chart.index("</svg>")]
    assert cost_chart.count("<circle") == 2 * len(published(home, "finance", "cost_per_mtok_daily"))


def test_each_configuration_shows_its_figures_as_published(home: Path) -> None:
    text = Path(report_paths(HomeLayout.of(home), END)[0]).read_text()
    plans = {p["deployment_id"]: p for p in published(home, "infra", "capacity_plan_daily")}
    for cap in published(home, "infra", "capacity_daily"):
        anchor = "".join(c if c.isalnum() else "-" for c in cap["model"].lower())
        section = text[text.index(f'<section id="model-{anchor}">'):]
        section = section[:section.index("</section>")]
        currency = cap["currency"]
        plan = plans[cap["deployment_id"]]
        for figure in (fmt(cap["capacity_goodput_per_gpu"], "rate"), fmt(cap["daily_capacity_tokens"], "tokens"),
                       fmt(cap["utilization"], "pct"), fmt(cap["cost_per_mtok_goodput"], "money_mtok", currency),
                       fmt(cap["daily_value"], "money", currency), fmt(plan["gpus_needed"], "gpus"),
                       fmt(plan["gpus_deployed"], "gpus"), fmt(plan["erlang_c_slots"], "int"),
                       fmt(plan["headroom_scaling_lag_gpus"], "gpus"), html.escape(cap["capacity_note"])):
            assert figure in section, (cap["deployment_id"], figure)
        # The capacity template, item by item.
        items = re.findall(r"<tr><td>(\w+)</td><td>", section)
        assert items[:8] == ["SLO", "Workload", "Baseline", "Peak", "Failure", "Lag", "Headroom", "Validation"]
        validation = ("demonstrated from production logs" if cap["capacity_source"] == "demonstrated"
                      else "measured by a load test" if cap["capacity_source"] == "loadtest"
                      else "no capacity figure")
        assert f"<tr><td>Validation</td><td>{html.escape(validation)}: " in re.sub(r"</?span[^>]*>", "", section)
    # Attainment per bucket against the commitment, as infra.slo_daily published it.
    for row in published(home, "infra", "slo_daily"):
        assert f">{row['isl_bucket']}</span></td>" in text and fmt(row["attainment"], "ratio") in text


def test_the_markdown_has_the_same_tables(home: Path) -> None:
    layout = HomeLayout.of(home)
    # The range ran as one Dagster run: it published the day and wrote its review.
    run_id = json.loads(manifest_path(layout, END).read_text())["run_id"]
    with compute_connection(home / "tmp" / "test-report") as con:
        load_config(con, layout)
        review = review_of_day(con, layout, DayWindow(END), run_id)
    html_text, md_text = (p.read_text() for p in report_paths(layout, END))
    assert md_text == render_markdown(review) and html_text == render_html(review)
    assert f"figures published by Dagster run {run_id}, review written by run {run_id}" in md_text
    assert "<svg" not in md_text
    every = list(tables(review))
    # The verdict; per model its SLO, P99 latency, workload, input and what-if tables; per deployment two, its
    # memory budget and its mix beside the load test's (the work model's block).
    assert len(every) == 1 + 5 * 3 + 2 * len(review.capacity) + len(review.memory) + len(review.work)
    assert len(review.memory) == len(review.capacity) == len(review.work)
    plain = html.unescape(re.sub(r"</?(span|a)\b[^>]*>", "", html_text))
    for table in every:
        assert f"**{_md_cell(table.caption)}**" in md_text
        assert f"<caption>{table.caption}</caption>" in plain
        for row in table.text_rows():
            assert "| " + " | ".join(_md_cell(c) for c in row) + " |" in md_text
            assert "".join(f"{c}</td>" for c in row[1:]) in re.sub(r"<td[^>]*>", "", plain)


CODER = "qwen3coder30b-h100"  # the coding-agent workload, alone on its deployment


def test_the_agent_workload_caches_its_generated_share_under_an_infinite_cache_and_less_under_a_small_lru(
        home: Path) -> None:
    # The generated cache share of the coding agent, read from the generated gateway files with DuckDB: every
    # request that reached the deployment once (duplicates dropped), as the what-if replays them.
    raw = f"{home}/raw/gateway/dt={END}/"
    cols = "request_id, deployment_id, status, input_tokens, cached_input_tokens"
    (generated,), = duckdb.connect().execute(f"""
        SELECT sum(cached_input_tokens) / sum(input_tokens) FROM (
            SELECT DISTINCT ON (request_id) * FROM (
                SELECT {cols} FROM read_json('{raw}*.jsonl*', format = 'newline_delimited')
                UNION ALL SELECT {cols} FROM read_parquet('{raw}*.parquet', hive_partitioning = false)))
        WHERE deployment_id = '{CODER}' AND status <> 'rejected'""").fetchall()
    hit = {r["scenario"]: r["simulated_hit_ratio"] for r in published(home, "infra", "cache_whatif_daily")
           if r["deployment_id"] == CODER}
    assert 0.9 < generated < 1
    # The hashes are logged per 512-token block, so the infinite cache counts a step's cached prefix in whole blocks:
    # less than one block (512 of a ~70k-token prompt, <0.8%) under the generator's 16-token blocks. It also keeps
    # what the generator evicted (0.6% of steps) and the head of a truncated prompt. Within one point either way.
    assert hit["infinite"] == pytest.approx(generated, abs=0.01)
    # 2 GB of the coding model's KV (79 blocks, ~40k tokens) cannot hold one ~70k-token agent context.
    assert hit["lru-2gb"] < hit["infinite"] - 0.2


def test_each_deployment_has_its_prefix_cache_line(home: Path) -> None:
    text, markdown = (p.read_text() for p in report_paths(HomeLayout.of(home), END))
    rows = published(home, "infra", "cache_whatif_daily")
    for deployment in {r["deployment_id"] for r in rows}:
        # Its best LRU is the row with the highest hit ratio, the fewest blocks on a tie; when the observed share is
        # higher, the line says the observed beats every configured cache instead of calling it best.
        lru = [r for r in rows if r["deployment_id"] == deployment and r["cache"] == "lru"]
        best = min(lru, key=lambda r: (-r["simulated_hit_ratio"], r["cache_blocks"] * r["caches"], r["scenario"]))
        hit, observed = fmt(best["simulated_hit_ratio"], "pct"), fmt(best["observed_hit_ratio"], "pct")
        if best["simulated_hit_ratio"] < best["observed_hit_ratio"]:
            line = (f"Prefix-cache what-if on {deployment}: the observed {observed} of input cached beats every "
                    f"configured cache (the best, {best['scenario']}, {hit}")
        else:
            line = (f"Prefix-cache what-if on {deployment}: the best configured cache, {best['scenario']}, would have "
                    f"cached {hit} of input (observed {observed}")
        assert line in markdown, deployment
        assert line in html.unescape(re.sub(r"</?span[^>]*>", "", text)), deployment


def test_every_text_is_escaped() -> None:
    hostile = "<script>alert(1)</script>"
    cap = {"model": hostile, "deployment_id": "d&<b>", "gpu_type": "H100", "gpus": 8.0, "tp": 8, "pp": 1,
           "quantization": "fp8", "capacity_goodput_per_gpu": 1.0, "capacity_source": "demonstrated",
           "capacity_verified": False, "daily_capacity_tokens": 691_200.0, "utilization": 0.5, "daily_value": None,
           "daily_cost_at_capacity": None, "currency": "USD", "cost_per_mtok_goodput": None, "lambda_slo_max": None,
           "loadtest_run_id": None, "capacity_note": 'lower bound "<i>"', "output_tokens": 345_600,
           "goodput_per_gpu": 0.5, "mean_output_per_step": 247.0, "mean_output_per_step_source": "policy",
           "sessions": 0, "supported_agent_steps": 2798.4, "task_attainment": None, "expected_task_attainment": None,
           "slo_version": "v1"}
    review = Review(day=date(2026, 11, 17), capacity=[cap], plan=[], slo=[], policy={},
                    load=[{"model": hostile, "hour": h, "output_token_rate": 1.0, "capacity_token_rate": 8.0,
                           "over_capacity": False} for h in range(24)],
                    cost_history=[{"day": date(2026, 11, 17), "model": hostile, "deployment_id": "d&<b>",
                                   "currency": "USD", "cost_per_mtok_goodput": 1.5}])
    text = render_html(review)
    assert "<script" not in text and "<i>" not in text and "<b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "d&amp;&lt;b&gt;" in text
    assert "lower bound &quot;&lt;i&gt;&quot;" in text
    assert "691,200" in text
    # Markdown is often rendered as HTML too: its cells are escaped the same way.
    markdown = render_markdown(review)
    assert "<script" not in markdown and "d&amp;&lt;b&gt;" in markdown and "<b>" not in markdown


def test_axis_labels_are_plain_digits() -> None:
    """The axis tops are 1, 2, 2.5 or 5 times a power of ten: a $/MTok axis up to 1,000 read '1e+03' before."""
    assert [tick(v) for v in (0, 0.25, 62.5, 250, 1000, 12_500)] == ["0", "0.25", "62.5", "250", "1,000", "12,500"]
