"""The review's charts drawn by matplotlib (tokenledger/report/charts.py, issue 57), on small hand-made rows: what a
reader reads off them is the published figure. Positions are read from the SVG (the elements' ids) and turned back
into data through the axes' transform: the capacity line at the capacity, exactly the hours over capacity shaded, a
bucket not judged pale and never red, a day not published breaking the cost line, a log axis only across a 10x
spread. And the SVG is an inline element: the same bytes for the same rows, no script, no XML declaration, scoped
ids, a title, under 60 KB; matplotlib prints nothing on a fresh or missing HOME and is not imported with the
module."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tokenledger.report.charts import (
    GREEN,
    PALE,
    RED,
    Chart,
    attainment_chart,
    attainment_figure,
    cost_chart,
    cost_figure,
    load_chart,
    load_figure,
)

DAY = date(2026, 11, 17)
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _group(chart: Chart, svg: str, gid: str) -> str:
    """The SVG of the group tagged `gid` (up to its first closing tag: one path, or the markers' group)."""
    start = svg.index(f'<g id="{chart.id(gid)}">')
    return svg[start:svg.index("</g>", start)]


def _data(chart: Chart, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """SVG coordinates (y down from the top of the viewBox) as data coordinates of the chart's axes."""
    fig = chart.figure
    height = fig.bbox.height
    inverse = fig.axes[0].transData.inverted()
    return [tuple(float(v) for v in inverse.transform((x, height - y))) for x, y in points]


def _path(chart: Chart, svg: str, gid: str) -> list[list[tuple[float, float]]]:
    """The subpaths (each a list of points, in data coordinates) of the first path of the group `gid`."""
    d = re.search(r' d="([^"]+)"', _group(chart, svg, gid))
    assert d is not None
    runs = [re.findall(r"(-?[0-9.]+) (-?[0-9.]+)", part) for part in re.split(r"(?=M )", d.group(1)) if part]
    return [_data(chart, [(float(x), float(y)) for x, y in run]) for run in runs]


def _markers(chart: Chart, svg: str, gid: str) -> list[tuple[float, float]]:
    circles = re.findall(r'<circle cx="([0-9.]+)" cy="([0-9.]+)" r="3"', _group(chart, svg, gid))
    return _data(chart, [(float(x), float(y)) for x, y in circles])


def _fill(chart: Chart, svg: str, gid: str) -> str:
    found = re.search(r"fill: (#[0-9a-f]{6})", _group(chart, svg, gid))
    assert found is not None
    return found.group(1)


def _ids(svg: str) -> set[str]:
    return set(re.findall(r' id="([^"]+)"', svg))


# --- the load chart ------------------------------------------------------------------------------------------------

# Demand 50 + 10h tok/s against a capacity of 200: hours 16 (210) to 23 (280) are over it.
HOURS = [{"hour": h, "output_token_rate": 50.0 + 10 * h, "capacity_token_rate": 200.0,
          "over_capacity": 50 + 10 * h > 200} for h in range(24)]


def test_the_capacity_line_is_at_the_capacity_and_the_hours_over_it_are_shaded() -> None:
    chart = load_figure("m", HOURS)
    svg = chart.svg()
    # The dashed line: every point at 200 tok/s on the axis, from hour 0 to hour 23.
    (line,) = _path(chart, svg, "capacity")
    assert [y for _, y in line] == pytest.approx([200.0] * len(line), abs=0.01)
    assert (line[0][0], line[-1][0]) == pytest.approx((0.0, 23.0), abs=0.01)
    # 200 is a labelled tick (0 to 280 x 1.08 = 302.4 in steps of 50 or 100), so the reader reads it off the axis.
    ax = chart.figure.axes[0]
    assert 200.0 in list(ax.get_yticks())
    assert [t.get_text() for t in ax.get_yticklabels()][list(ax.get_yticks()).index(200.0)] == "200"
    # Shaded: hours 16-23 and no other, each over its own hour's slot.
    shaded = sorted(i[len(chart.id("over-")):] for i in _ids(svg) if i.startswith(chart.id("over-")))
    assert shaded == [f"{h:02d}" for h in range(16, 24)]
    (slot,) = _path(chart, svg, "over-16")
    assert sorted({round(x, 3) for x, _ in slot}) == [15.5, 16.5]
    # Bars: the warning colour over capacity, blue under it; a bar's top is its demand (hour 16: 210 tok/s).
    assert {h: _fill(chart, svg, f"bar-{h:02d}") == RED for h in range(24)} == {h: h >= 16 for h in range(24)}
    (bar,) = _path(chart, svg, "bar-16")
    assert max(y for _, y in bar) == pytest.approx(210.0, abs=0.01)
    assert min(y for _, y in bar) == pytest.approx(0.0, abs=0.01)
    assert "16:00 demand 210 tok/s, over capacity" in _group(chart, svg, "bar-16")


def test_without_a_capacity_figure_the_legend_says_so_and_no_line_is_drawn() -> None:
    hours = [dict(r, capacity_token_rate=None, over_capacity=None) for r in HOURS]
    chart = load_figure("hosted", hours, "provider-managed: no capacity line")
    svg = chart.svg()
    assert chart.id("capacity") not in _ids(svg)
    assert not any(i.startswith(chart.id("over-")) for i in _ids(svg))
    assert ">provider-managed: no capacity line</text>" in svg


# --- the attainment chart ------------------------------------------------------------------------------------------


def _slo(bucket: str, **changes: Any) -> dict[str, Any]:
    row = {"model": "m", "isl_bucket": bucket, "effective_requests": 5000, "attainment": 0.995,
           "attainment_met": True, "success_rate": 0.9998, "success_rate_met": True, "queue_p99_met": True,
           "itl_p99_met": True, "tpot_p99_met": True, "all_met": True}
    row.update(changes)
    return row


# Met; missed on attainment (0.982 under 0.99); not judged (40 requests, under the minimum) though its success
# rate missed, so all_met is false: the bar is pale, never red, and the missed success rate is named under it.
BUCKETS = [_slo("0-4k"),
           _slo("4k-32k", attainment=0.982, attainment_met=False, all_met=False),
           _slo("32k-128k", attainment=0.97, attainment_met=None, success_rate_met=False, all_met=False,
                effective_requests=40),
           _slo("all", attainment_met=False, all_met=False)]


def test_attainment_bars_against_the_commitment_and_a_bucket_not_judged_is_pale() -> None:
    chart = attainment_figure("m", BUCKETS, 0.99)
    svg = chart.svg()
    ax = chart.figure.axes[0]
    # The axis starts at the lowest figure less 0.01, down to a multiple of 0.05: 0.97 - 0.01 = 0.96 -> 0.95; five
    # ticks at their exact values.
    assert ax.get_ylim() == pytest.approx((0.95, 1.0))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.95", "0.9625", "0.975", "0.9875", "1"]
    (line,) = _path(chart, svg, "commitment")
    assert [y for _, y in line] == pytest.approx([0.99, 0.99], abs=1e-5)
    # Each bar from the axis' foot to its attainment, its value printed above it.
    (bar,) = _path(chart, svg, "bar-4k-32k")
    assert (min(y for _, y in bar), max(y for _, y in bar)) == pytest.approx((0.95, 0.982), abs=1e-5)
    assert ">0.9820</text>" in _group(chart, svg, "value-4k-32k")
    # Colours: met green, missed red, not judged pale (its all_met is false, yet it is not drawn as missed).
    assert [_fill(chart, svg, f"bar-{b}") for b in ("0-4k", "4k-32k", "32k-128k")] == [GREEN, RED, PALE]
    assert "32k-128k (not judged)" in svg and "4k-32k (not judged)" not in svg
    # A bucket not judged names no miss (the verdict never counts it); a judged one names each.
    assert chart.id("missed-32k-128k-0") not in _ids(svg)
    assert re.search(rf'<g id="{chart.id("missed-4k-32k-0")}"><text [^>]*>attainment</text>', svg)
    assert "32k-128k: attainment 0.9700, not judged (too few requests)</title>" in svg
    # No 'all' bar.
    assert chart.id("bar-all") not in _ids(svg)


def test_a_bucket_above_the_line_that_missed_its_success_rate_is_red() -> None:
    rows = [_slo("0-4k"), _slo("32k-128k", attainment=0.9925, success_rate_met=False, all_met=False)]
    chart = attainment_figure("m", rows, 0.99)
    svg = chart.svg()
    assert [_fill(chart, svg, f"bar-{b}") for b in ("0-4k", "32k-128k")] == [GREEN, RED]


# --- the cost chart ------------------------------------------------------------------------------------------------


def _history(points: dict[str, list[tuple[int, float]]]) -> list[dict[str, Any]]:
    return [{"day": DAY - timedelta(days=ago), "model": name, "deployment_id": f"{name}-a", "currency": "USD",
             "cost_per_mtok_goodput": value} for name, series in points.items() for ago, value in series]


def test_a_day_not_published_breaks_the_cost_line_on_a_date_axis() -> None:
    # Published 9, 8 and 7 days ago, then yesterday and today: two runs of consecutive days, five points.
    history = _history({"m": [(9, 2.0), (8, 2.5), (7, 3.0), (1, 2.4), (0, 2.2)]})
    chart = cost_figure(history, DAY)
    svg = chart.svg()
    first, second = _path(chart, svg, "line-0-0"), _path(chart, svg, "line-0-1")
    assert chart.id("line-0-2") not in _ids(svg)
    assert [len(run) for run in first + second] == [3, 2]
    points = _markers(chart, svg, "points-0")
    assert [y for _, y in points] == pytest.approx([2.0, 2.5, 3.0, 2.4, 2.2], abs=1e-4)
    # A date axis: 7 days ago to yesterday is 6 days, six times the step from 9 to 8 days ago (not one step).
    xs = [x for x, _ in points]
    assert xs[3] - xs[2] == pytest.approx(6 * (xs[1] - xs[0]), abs=1e-3)
    assert xs[4] == pytest.approx(DAY.toordinal(), abs=1e-3)
    # The first run ends on the third day, the second starts on the fourth: nothing is drawn across the gap.
    assert first[0][-1][0] == pytest.approx(xs[2], abs=1e-3) and second[0][0][0] == pytest.approx(xs[3], abs=1e-3)
    assert chart.figure.axes[0].get_yscale() == "linear" and "log scale" not in svg
    # Each point says its day and figure on hover.
    assert f"<title>{DAY - timedelta(days=7)} m-a: 3.0000 USD</title>" in svg
    # A day after `day` is not drawn.
    later = cost_figure(history + _history({"m": [(-1, 9.0)]}), DAY)
    assert len(_markers(later, later.svg(), "points-0")) == 5


@pytest.mark.parametrize(("small", "big", "log"), [(0.4, 6.0, True), (0.5, 5.0, True), (0.5, 4.95, False)])
def test_the_cost_axis_is_logarithmic_only_across_ten_times(small: float, big: float, log: bool) -> None:
    chart = cost_figure(_history({"small": [(1, small), (0, small)], "big": [(1, big), (0, big)]}), DAY)
    svg = chart.svg()
    ax = chart.figure.axes[0]
    assert ax.get_yscale() == ("log" if log else "linear")
    assert ("$/MTok under SLO (log scale)</text>" in svg) is log
    # Series in the order of the legend (model, deployment, currency): big first. Both sit at their figure.
    assert [y for _, y in _markers(chart, svg, "points-0")] == pytest.approx([big, big], rel=1e-5)
    assert [y for _, y in _markers(chart, svg, "points-1")] == pytest.approx([small, small], rel=1e-5)
    if log and small == 0.4:
        # 0.4 to 6: from 0.1 to 10, two decades, labelled with 2 and 5 between the powers of ten.
        assert ax.get_ylim() == pytest.approx((0.1, 10.0))
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == ["0.1", "0.2", "0.5", "1", "2", "5", "10"]


def test_a_model_name_with_dollars_is_printed_as_it_is() -> None:
    svg = cost_chart(_history({"x$1$y": [(0, 1.0)]}), DAY)
    assert ">x$1$y</text>" in svg  # one deployment, one currency: the model alone


def test_a_legend_names_the_deployment_and_currency_only_where_they_tell_series_apart() -> None:
    rows = _history({"m": [(0, 1.0)], "n": [(0, 2.0)]})
    rows += [{**rows[0], "deployment_id": "m-b"}, {**rows[1], "currency": "EUR"}]
    svg = cost_chart(rows, DAY)
    for label in ("m / m-a (USD)", "m / m-b (USD)", "n (EUR)", "n (USD)"):
        assert f">{label}</text>" in svg, label


def test_no_cost_rows_say_so() -> None:
    assert "no cost per MTok under SLO published yet" in cost_chart([], DAY)


def _texts(chart: Chart) -> list[Any]:
    """The window extents of the chart's text: tick labels, axis labels, annotations and the legend."""
    fig = chart.figure
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    texts = [*ax.get_xticklabels(), *ax.get_yticklabels(), ax.xaxis.label, ax.yaxis.label, *ax.texts,
             *(t for legend in fig.legends for t in legend.get_texts())]
    return [t.get_window_extent(renderer) for t in texts if t.get_visible() and t.get_text()]


def _overlap(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("kind", ["load", "attainment", "cost"])
def test_no_label_overlaps_a_bar_or_the_plot(kind: str) -> None:
    if kind == "load":
        chart = load_figure("m", HOURS)
    elif kind == "attainment":
        chart = attainment_figure("m", BUCKETS, 0.99)
    else:
        chart = cost_figure(_history({f"m{j}": [(k, 1.0 + j) for k in range(5)] for j in range(3)}), DAY)
    chart.svg()  # laid out as drawn
    fig = chart.figure
    renderer = fig.canvas.get_renderer()
    texts = _texts(chart)
    assert len(texts) > 8
    if kind == "cost":
        # The points fill the plot: every label is outside it.
        area = fig.axes[0].bbox
        assert not [t for t in texts if _overlap(t, area)]
        return
    bars = [p.get_window_extent(renderer) for p in fig.axes[0].patches if (p.get_gid() or "").startswith("bar-")]
    assert bars
    assert not [(t, b) for t in texts for b in bars if _overlap(t, b)]


# --- the SVG as an inline element ----------------------------------------------------------------------------------


def _typical() -> dict[str, str]:
    rows = [_slo(b, attainment=0.99 + k * 0.002) for k, b in enumerate(("0-4k", "4k-32k", "32k-128k", "128k+"))]
    history = _history({m: [(k, v * (1 + k / 100)) for k in range(30)] for m, v in (("a", 0.4), ("b", 2.0),
                                                                                    ("c", 6.0))})
    return {"load": load_chart("llama-3.1-8b", HOURS), "attainment": attainment_chart("llama-3.1-8b", rows, 0.99),
            "cost": cost_chart(history, DAY)}


def test_the_svg_is_an_inline_element_the_same_for_the_same_rows() -> None:
    charts = _typical()
    assert charts == _typical()  # byte for byte
    for kind, svg in charts.items():
        assert svg.startswith(f'<svg class="chart chart-{kind}" role="img" ')
        assert svg.endswith("</svg>") and svg.count("<svg") == 1
        assert "<script" not in svg and "<?xml" not in svg and "DOCTYPE" not in svg and "<metadata" not in svg
        # It refers to nothing, not even to its own ids: the review's page has no href=, url( or URL.
        assert not re.search(r"href|url\(|https?:|xlink|<use|<defs|clip-path", svg)
        # The text is text (not glyph paths), the width follows the column, the viewBox keeps the shape.
        assert "<text " in svg and 'width="100%"' in svg and re.search(r'viewBox="0 0 [0-9.]+ [0-9.]+"', svg)
        # No <style> rule: in an HTML page it would apply to the page.
        assert "<style" not in svg
        assert len(svg.encode()) < 60_000, (kind, len(svg.encode()))
    assert "<title>Load against capacity, llama-3.1-8b</title>" in charts["load"]
    assert "<title>$/MTok under SLO over time</title>" in charts["cost"]


def test_two_models_charts_share_no_id_on_a_page() -> None:
    one, other = load_chart("m1", HOURS), load_chart("m2", HOURS)
    assert _ids(one) and not _ids(one) & _ids(other)
    # Only the tagged elements have an id (not matplotlib's figure_1, patch_2, ... of every chart).
    assert all(re.fullmatch(r"load-m1-(bar|over)-[0-9]{2}|load-m1-capacity", i) for i in _ids(one)), _ids(one)
    assert "<title>Load against capacity, a&lt;b</title>" in load_chart("a<b", HOURS)


def test_matplotlib_is_not_imported_with_the_module_and_prints_nothing_on_a_fresh_or_missing_home(
        tmp_path: Path) -> None:
    script = ("import sys\n"
              "from tokenledger.report import charts\n"
              "assert 'matplotlib' not in sys.modules\n"
              "svg = charts.load_chart('m', [{'hour': 0, 'output_token_rate': 1.0, 'capacity_token_rate': 2.0,"
              " 'over_capacity': False}])\n"
              "print(svg.startswith('<svg class=\"chart chart-load\"'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    fresh = tmp_path / "home"
    fresh.mkdir()
    # A HOME that cannot be made, whoever runs the test (root writes to a read-only folder): under a file.
    (tmp_path / "file").write_text("")
    runs = [subprocess.Popen([sys.executable, "-c", script], cwd=PROJECT_ROOT, env={**env, "HOME": str(home)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for home in (fresh, tmp_path / "file" / "home")]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert out == "True\n" and err == "", err
