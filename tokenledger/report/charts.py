"""The capacity review's charts, drawn by matplotlib into inline SVG (issue 57): hourly demand against capacity,
attainment per ISL bucket against the commitment, and $/MTok under SLO over the days published.

Each chart is a `Chart`: the matplotlib Figure (drawn on the Agg canvas, no pyplot and no global figure state) and
what its SVG needs around it. `Chart.svg()` is the string the review inlines in its HTML: no XML declaration or
DOCTYPE, no script, no external reference, text kept as text (svg.fonttype none), a <title> for screen readers,
`class="chart chart-<kind>"` and a width that scales to its column (the viewBox is kept). The same rows give the same
bytes: the hash salt is fixed, the date and creator are left out, and matplotlib's defaults are used whatever
matplotlibrc the machine has.

The SVG refers to nothing, not even to its own ids (no href, no url(): no clip path, no <use> of a marker), and
every id in it is scoped by the chart's kind and model (`Chart.id`), so that two models' charts on one page share no
id. The elements that carry a figure have ids a test (or a reader of the page's source) finds: the load chart's
`bar-HH` (demand of hour HH), `over-HH` (the shading of an hour over capacity) and `capacity`; the attainment
chart's `bar-<bucket>`, `value-<bucket>`, `missed-<bucket>-<n>` and `commitment`; the cost chart's `points-<n>`
(every day of series n, in the order of the legend) and `line-<n>-<k>` (the k-th run of consecutive days of series
n). Bars and points carry a <title> with their figure, shown on hover.

matplotlib is imported on a chart's first draw, not with this module: the Dagster definitions import the review,
and matplotlib would add about a second to every process that loads them. A read-only or missing HOME makes
matplotlib log warnings about its cache directory on import; they are not printed (matplotlib falls back to a
temporary directory by itself).
"""

from __future__ import annotations

import html
import io
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Row = Mapping[str, Any]

# review.py's PALETTE: blue and the other series colours; PALETTE[2] green is "met" (and the capacity line),
# PALETTE[6] red is "missed" and "over capacity", PALETTE[1] orange the commitment line.
PALETTE = ("#1f5fa8", "#c2410c", "#15803d", "#7c3aed", "#b45309", "#0f766e", "#be123c", "#4d7c0f")
BLUE, ORANGE, GREEN, RED = PALETTE[0], PALETTE[1], PALETTE[2], PALETTE[6]
OVER = "#fde2e2"  # the shading of an hour over capacity
PALE = "#cbd2d9"  # a bucket not judged
INK, MUTED, GRID = "#1f2933", "#52606d", "#e4e7eb"

# A model's two charts share the page's width side by side; the fleet's cost chart takes all of it. The viewBox is
# the size the chart is drawn at on a 1400 px screen (matplotlib's SVG unit is 1/72 inch: a figure of W/72 inches
# at 72 dpi is W units wide), so the 12 px labels print at about 12 px.
W, H, WIDE = 600, 170, 600
NO_CAPACITY = "no capacity figure"
PROVIDER_MANAGED = "provider-managed: no capacity line"

# matplotlib's defaults (not the machine's matplotlibrc) and these, for every chart.
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "tokenledger",
    # DejaVu Sans ships with matplotlib: the same text extents (and so the same layout) on every machine. The SVG
    # names it with sans-serif after it, so a browser without it uses its own sans-serif.
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 12,
    "axes.titlesize": 12,
    "axes.labelsize": 12,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "legend.frameon": False,
    "text.color": INK,
    "axes.labelcolor": INK,
    "axes.edgecolor": "#9aa5b1",
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "axes.grid": False,
    "figure.dpi": 72,
    "savefig.dpi": 72,
    "figure.constrained_layout.w_pad": 6 / 72,
    "figure.constrained_layout.h_pad": 6 / 72,
}

# matplotlib's rcParams are global to the process: one chart is drawn at a time.
_LOCK = threading.RLock()
_matplotlib_imported = False


def _import_matplotlib() -> None:
    """Import matplotlib (and the SVG backend) with its cache-directory warnings held back: on a HOME that is
    read-only or missing it logs two warnings and uses a temporary directory, which is all a chart needs."""
    global _matplotlib_imported
    if _matplotlib_imported:
        return
    logger = logging.getLogger("matplotlib")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        import matplotlib  # noqa: F401
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.backends.backend_svg  # noqa: F401
        import matplotlib.figure  # noqa: F401  (builds the font list on a fresh cache directory)
    finally:
        logger.setLevel(level)
    _matplotlib_imported = True


@contextmanager
def _style() -> Iterator[None]:
    """matplotlib's own defaults and STYLE, restored afterwards, under the lock."""
    with _LOCK:
        _import_matplotlib()
        import matplotlib as mpl

        with mpl.rc_context():
            mpl.rcdefaults()
            mpl.rcParams.update(STYLE)
            yield


def _figure(width: int, height: int) -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width / 72, height / 72), dpi=72, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _plain(text: str) -> str:
    """Text matplotlib prints as it is: a pair of $ would start mathtext."""
    return text.replace("$", r"\$")


def tick(value: float) -> str:
    """An axis label in plain digits: 1,000 and 12,500, never 1e+03; three significant digits below 100."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _formatter(function: Callable[[float], str]) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _position: function(value))


# --- the chart and its SVG -----------------------------------------------------------------------------------------


@dataclass
class Chart:
    """A chart's Figure and what its SVG carries beside it: `kind` (the class chart-<kind>), `title` (its
    <title>), `scope` (the prefix of its ids), `tips` (a <title> per element id) and `point_tips` (a <title> per
    point of a marker group, in the order of its points).

    The figure is laid out (constrained layout) when it is drawn: its axes' transforms are those of the SVG once
    `svg()` has run."""

    figure: Figure
    kind: str
    title: str
    scope: str
    tips: dict[str, str] = field(default_factory=dict)
    point_tips: dict[str, list[str]] = field(default_factory=dict)

    def id(self, gid: str) -> str:
        """The SVG id of the element tagged `gid`."""
        return self.scope + gid

    def svg(self) -> str:
        """The chart as inline SVG (see the module's docstring)."""
        with _style():
            out = io.StringIO()
            self.figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
        return _inline(out.getvalue(), self)


_ID = re.compile(r' id="([^"]+)"')
_USE = re.compile(r'<use xlink:href="#([^"]+)" x="([^"]+)" y="([^"]+)"( style="[^"]*")?\s*/>')


def _inline(svg: str, chart: Chart) -> str:
    """matplotlib's SVG document as an element of an HTML page, with no reference to anything (the review's page
    has no href= and no url(): not even to an id of its own)."""
    # The XML declaration, DOCTYPE and the RDF metadata (a date and a creator, when there are any).
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    # Indentation between elements and line breaks inside path data: a third of the bytes.
    svg = re.sub(r">\s+<", "><", svg)
    svg = re.sub(r' d="([^"]*)"', lambda m: ' d="' + " ".join(m.group(1).split()) + '"', svg)
    # Markers (tick marks, points) are a path in <defs> drawn by <use xlink:href>: each is drawn where it is used,
    # a point of the cost chart as a circle (its marker: "o" of size 6, a radius of 3).
    shapes = dict(re.findall(r'<path id="([^"]+)" d="([^"]*)"', svg))
    points = set(chart.point_tips)  # (ids are scoped below)

    def in_points(at: int) -> bool:
        opened = svg.rfind('<g id="', 0, at)
        return opened >= 0 and svg[opened + 7:svg.index('"', opened + 7)] in points

    def draw(match: re.Match[str]) -> str:
        ref, x, y, style = match.group(1), match.group(2), match.group(3), match.group(4) or ""
        if in_points(match.start()):
            return f'<circle cx="{x}" cy="{y}" r="3"{style}/>'
        return f'<path d="{shapes[ref]}" transform="translate({x} {y})"{style}/>'

    svg = _USE.sub(draw, svg)
    # Clipping: every artist lies within its axes' limits (they are set from the data), so none is needed.
    svg = re.sub(r' clip-path="[^"]*"', "", svg)
    # matplotlib's default line style is a <style> rule for `*`, which in an HTML page would apply to every element
    # of the page: the root's presentation attributes give the same, inherited by the chart alone. With the marker
    # shapes and clip paths it was all the <defs> held.
    svg = re.sub(r"<defs>.*?</defs>", "", svg, flags=re.DOTALL)
    # Ids: matplotlib names every group (figure_1, patch_2, text_3, ...), the same in every chart, and a page has
    # several. Only the tagged elements keep theirs, scoped by the chart.
    gids = {a.get_gid() for a in chart.figure.findobj() if a.get_gid()}
    svg = _ID.sub(lambda m: f' id="{chart.id(m.group(1))}"' if m.group(1) in gids else "", svg)
    # The root: its class, role, title, a width that follows the column (the viewBox sets the height) and the line
    # style the <style> rule gave. In HTML an <svg> needs no namespace (and the page names no URL).
    head = re.match(r"<svg[^>]*>", svg)
    view_box = re.search(r'viewBox="[^"]+"', head.group(0)) if head else None
    if head is None or view_box is None or "xlink:" in svg or not svg.rstrip().endswith("</svg>"):
        raise ValueError("matplotlib's SVG is not laid out as charts.py expects")
    root = (f'<svg class="chart chart-{chart.kind}" role="img" {view_box.group(0)} width="100%" '
            f'stroke-linejoin="round" stroke-linecap="butt"><title>{html.escape(chart.title)}</title>')
    svg = root + svg[head.end():].rstrip()
    for gid, tip in chart.tips.items():
        svg = svg.replace(f'<g id="{chart.id(gid)}">', f'<g id="{chart.id(gid)}"><title>{html.escape(tip)}</title>', 1)
    for gid, tips in chart.point_tips.items():
        svg = _title_points(svg, chart.id(gid), tips)
    return svg


def _title_points(svg: str, element_id: str, tips: list[str]) -> str:
    """A <title> in each point (<circle/>) of the group `element_id`, in the order of its points."""
    start = svg.find(f'<g id="{element_id}">')
    if start < 0:
        return svg
    end = svg.index("</g>", start)
    group = svg[start:end]
    if group.count("<circle ") != len(tips):
        raise ValueError(f"{element_id}: {group.count('<circle ')} points drawn for {len(tips)} figures")
    parts = iter(tips)
    group = re.sub(r"<circle ([^>]*)/>",
                   lambda m: f"<circle {m.group(1)}><title>{html.escape(next(parts))}</title></circle>", group)
    return svg[:start] + group + svg[end:]


def _scope(kind: str, model: str | None = None) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", model) if model is not None else None
    return f"{kind}-{name}-" if name else f"{kind}-"


def _legend(fig: Figure, handles: list[Any], ncols: int) -> None:
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, handlelength=2.2, columnspacing=1.6)


# --- the load chart ------------------------------------------------------------------------------------------------


def load_figure(model: str, hours: Sequence[Row], no_capacity: str = NO_CAPACITY) -> Chart:
    """Hourly demand (output token rate) as bars against the capacity token rate as a dashed line, on UTC hours
    0-23 (an hour without a row has no bar); hours over capacity (the published over_capacity) are shaded and
    their bars drawn in the warning colour. Without any capacity figure the legend says `no_capacity`."""
    _import_matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    hours = sorted(hours, key=lambda r: r["hour"])
    chart_tips: dict[str, str] = {}
    with _style():
        fig, ax = _figure(W, H)
        tallest = 0.0
        for row in hours:
            hour, demand, over = int(row["hour"]), float(row["output_token_rate"] or 0.0), bool(row["over_capacity"])
            if over:
                ax.axvspan(hour - 0.5, hour + 0.5, color=OVER, linewidth=0, zorder=0, gid=f"over-{hour:02d}")
            bar = ax.bar(hour, demand, width=0.7, color=RED if over else BLUE, zorder=2)[0]
            bar.set_gid(f"bar-{hour:02d}")
            chart_tips[f"bar-{hour:02d}"] = (f"{hour:02d}:00 demand {demand:,.4g} tok/s"
                                             + (", over capacity" if over else ""))
            tallest = max(tallest, demand)
        capacity = [(int(r["hour"]), r["capacity_token_rate"]) for r in hours]
        has_capacity = any(c is not None for _, c in capacity)
        if has_capacity:
            # An hour without a capacity figure breaks the line.
            ax.plot([h for h, _ in capacity], [math.nan if c is None else float(c) for _, c in capacity],
                    color=GREEN, linewidth=2.5, linestyle=(0, (6, 3)), zorder=3, gid="capacity")
            tallest = max([tallest] + [float(c) for _, c in capacity if c is not None])
        ax.set_xlim(-0.5, 23.5)
        ax.set_xticks(range(0, 24, 3), [f"{h:02d}" for h in range(0, 24, 3)])
        ax.set_xlabel("UTC hour")
        ax.set_ylim(0, tallest * 1.08 if tallest > 0 else 1.0)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_formatter(_formatter(tick))
        ax.set_ylabel("output tokens/s")
        ax.grid(axis="y", color=GRID)
        handles = [Patch(color=BLUE, label="demand"), Patch(color=RED, label="over capacity (hour shaded)")]
        handles.append(Line2D([], [], color=GREEN, linewidth=2.5, linestyle=(0, (6, 3)), label="capacity")
                       if has_capacity else Line2D([], [], linestyle="none", label=_plain(no_capacity)))
        _legend(fig, handles, ncols=3)
    return Chart(fig, "load", f"Load against capacity, {model}", _scope("load", model), chart_tips)


def load_chart(model: str, hours: Sequence[Row], no_capacity: str = NO_CAPACITY) -> str:
    """The load chart (`load_figure`) as inline SVG."""
    return load_figure(model, hours, no_capacity).svg()


# --- the attainment chart ------------------------------------------------------------------------------------------

_BUCKET_COMMITMENTS = (("attainment_met", "attainment"), ("success_rate_met", "success rate"),
                       ("queue_p99_met", "P99 queue"), ("itl_p99_met", "P99 ITL"), ("tpot_p99_met", "P99 TPOT"))


def bucket_judged(row: Row) -> bool:
    """An ISL bucket is judged when it had enough judged requests (infra.slo_daily.attainment_met not NULL); the
    model's 'all' row is judged on whatever its commitments could be given."""
    return row["isl_bucket"] == "all" or row.get("attainment_met") is not None


def bucket_verdict(row: Row) -> bool | None:
    """A bucket's verdict as the SLO table prints it: None (not judged) for a bucket with too few judged requests,
    whatever its other figures, as the verdict never counts such a bucket; else all_met (every commitment), its
    attainment's where a row has no all_met."""
    if not bucket_judged(row):
        return None
    return row["all_met"] if row.get("all_met") is not None else row.get("attainment_met")


def bucket_misses(row: Row) -> list[str]:
    """The commitments a judged bucket missed, in words ('success rate', 'P99 queue'); none for a bucket not
    judged."""
    if not bucket_judged(row):
        return []
    return [label for key, label in _BUCKET_COMMITMENTS if row.get(key) is False]


def _attainment_tick(value: float) -> str:
    """A tick at its exact value (0.9875, not 0.988, which no gridline is at)."""
    return f"{value:.4f}".rstrip("0").rstrip(".")


def attainment_figure(model: str, rows: Sequence[Row], target: float | None) -> Chart:
    """Attainment per ISL bucket (the rows but 'all', in their order) as bars against the commitment line. A bar's
    colour is the bucket's verdict (`bucket_verdict`): green met every commitment, red missed one (named in red
    under its label, so a bucket above the line that missed its success rate is red), pale not judged (labelled
    so, never red). Each value sits above its own bar; the commitment is named in the legend, so no label covers a
    bar."""
    _import_matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    buckets = [r for r in rows if r["isl_bucket"] != "all"]
    values = [float(r["attainment"]) for r in buckets if r["attainment"] is not None]
    lo = min(values + ([float(target)] if target is not None else []) + [1.0])
    lo = max(0.0, math.floor((lo - 0.01) * 20) / 20)
    misses = [bucket_misses(r) for r in buckets]
    chart_tips: dict[str, str] = {}
    with _style():
        fig, ax = _figure(W, H + 40 + 14 * max((len(m) for m in misses), default=0))
        labels = []
        for i, row in enumerate(buckets):
            bucket, value, verdict = row["isl_bucket"], row["attainment"], bucket_verdict(row)
            colour = PALE if verdict is None else GREEN if verdict else RED
            requests = row.get("effective_requests")
            labels.append(_plain(f"{bucket}{' (not judged)' if verdict is None else ''}\n"
                                 f"{'—' if requests is None else f'{int(requests):,d}'} requests"))
            if value is not None:
                bar = ax.bar(i, float(value) - lo, bottom=lo, width=0.6, color=colour, zorder=2)[0]
                bar.set_gid(f"bar-{bucket}")
                said = ("not judged (too few requests)" if verdict is None else "met" if verdict
                        else "missed " + ", ".join(misses[i]))
                if verdict is None and misses[i]:
                    said += "; missed " + ", ".join(misses[i])
                chart_tips[f"bar-{bucket}"] = f"{bucket}: attainment {float(value):.4f}, {said}"
                ax.annotate(f"{float(value):.4f}", (i, float(value)), xytext=(0, 3), textcoords="offset points",
                            ha="center", va="bottom", gid=f"value-{bucket}")
            # Under the two lines of the tick label.
            for n, missed in enumerate(misses[i]):
                ax.annotate(missed, (i, 0), xycoords=("data", "axes fraction"), xytext=(0, -38 - 14 * n),
                            textcoords="offset points", ha="center", va="top", color=RED,
                            gid=f"missed-{bucket}-{n}")
        ax.set_xlim(-0.5, max(len(buckets), 1) - 0.5)
        ax.set_xticks(range(len(buckets)), labels)
        ax.set_ylim(lo, 1.0)
        ax.set_yticks([lo + (1.0 - lo) * k / 4 for k in range(5)])
        ax.yaxis.set_major_formatter(_formatter(_attainment_tick))
        ax.set_ylabel("attainment")
        ax.grid(axis="y", color=GRID)
        handles: list[Any] = []
        if target is not None:
            ax.axhline(float(target), color=ORANGE, linewidth=2, linestyle=(0, (5, 3)), zorder=3, gid="commitment")
            handles.append(Line2D([], [], color=ORANGE, linewidth=2, linestyle=(0, (5, 3)),
                                  label=f"attainment commitment {float(target):g}"))
        handles += [Patch(color=GREEN, label="met every commitment"),
                    Patch(color=RED, label="missed one (named under it)"),
                    Patch(color=PALE, label="not judged (too few requests)")]
        _legend(fig, handles, ncols=2)
    return Chart(fig, "attainment", f"Attainment by ISL bucket, {model}", _scope("attainment", model), chart_tips)


def attainment_chart(model: str, rows: Sequence[Row], target: float | None) -> str:
    """The attainment chart (`attainment_figure`) as inline SVG."""
    return attainment_figure(model, rows, target).svg()


# --- the cost chart ------------------------------------------------------------------------------------------------


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values of a log axis from lo to hi (powers of ten): each power, with 2 and 5 between over 2 decades
    or less."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    return [m * 10.0 ** e for e in range(first, last + 1) for m in steps if lo <= m * 10.0 ** e <= hi]


def cost_figure(history: Sequence[Row], day: date) -> Chart:
    """$/MTok under SLO per deployment (and currency) over the published days up to `day`: money compares across
    models, so every configuration shares one chart. The x-axis is a date axis (a day not published is a gap, and
    the line is not drawn across it); when the series differ by 10x or more the y-axis is logarithmic, so that the
    cheaper models are not flattened against zero. Series are in the order of (model, deployment_id, currency)."""
    _import_matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

    history = [r for r in history if r["day"] <= day]
    days = sorted({r["day"] for r in history})
    series: dict[tuple[str, str, str], dict[date, float]] = {}
    for r in history:
        if r["cost_per_mtok_goodput"] is not None:
            key = (r["model"], r["deployment_id"], r["currency"])
            series.setdefault(key, {})[r["day"]] = float(r["cost_per_mtok_goodput"])
    values = [v for s in series.values() for v in s.values()]
    positive = [v for v in values if v > 0]
    log = bool(positive) and len(positive) == len(values) and max(positive) >= 10 * min(positive)
    # Labels as short as they can be and still tell the series apart (the legend shares a half-width column): the
    # deployment only for a model with several, the currency only when the chart holds several.
    deployments_of: dict[str, set[str]] = {}
    for model, deployment, _ in series:
        deployments_of.setdefault(model, set()).add(deployment)
    currencies = {currency for _, _, currency in series}
    ncols = 2
    point_tips: dict[str, list[str]] = {}
    with _style():
        fig, ax = _figure(WIDE, H + 18 * math.ceil(len(series) / ncols))
        handles = []
        # A deployment costed in no currency sorts first rather than failing against a named one.
        ordered_series = sorted(series.items(), key=lambda s: tuple(k or "" for k in s[0]))
        for n, ((model, deployment, currency), points) in enumerate(ordered_series):
            colour = PALETTE[n % len(PALETTE)]
            ordered = sorted(points.items())
            # A line joins consecutive calendar days only: a missing day breaks it.
            runs: list[list[tuple[date, float]]] = []
            for d, v in ordered:
                if runs and (d - runs[-1][-1][0]).days == 1:
                    runs[-1].append((d, v))
                else:
                    runs.append([(d, v)])
            for k, run in enumerate(r for r in runs if len(r) > 1):
                ax.plot([d.toordinal() for d, _ in run], [v for _, v in run], color=colour, linewidth=2, zorder=2,
                        gid=f"line-{n}-{k}")
            ax.plot([d.toordinal() for d, _ in ordered], [v for _, v in ordered], linestyle="none", marker="o",
                    markersize=6, color=colour, zorder=3, gid=f"points-{n}")
            point_tips[f"points-{n}"] = [f"{d} {deployment}: {v:,.4f} {currency or ''}".rstrip() for d, v in ordered]
            handles.append(Line2D([], [], color=colour, linewidth=2, marker="o", markersize=6,
                                  label=_plain(model + (f" / {deployment}" if len(deployments_of[model]) > 1 else "")
                                               + (f" ({currency})" if len(currencies) > 1 else ""))))
        if days:
            first, last = days[0].toordinal(), days[-1].toordinal()
            span = last - first
            step = max(1, math.ceil((span + 1) / 8))
            ax.set_xlim(first - 0.5 if span else first - 1, last + 0.5 if span else last + 1)
            ticks = list(range(first, last + 1, step))
            ax.set_xticks(ticks, [date.fromordinal(t).strftime("%m-%d") for t in ticks])
        else:
            ax.set_xticks([])
        ax.set_xlabel("UTC day")
        if log:
            lo = 10.0 ** math.floor(math.log10(min(positive)))
            hi = 10.0 ** math.ceil(math.log10(max(positive)))
            ax.set_yscale("log")
            ax.set_ylim(lo, hi)
            ax.yaxis.set_major_locator(FixedLocator(log_ticks(lo, hi)))
            ax.yaxis.set_minor_locator(NullLocator())
        else:
            # From 0 (or below it, for a negative figure: nothing is clipped, so the limits hold every point).
            top, bottom = max(values + [0.0]), min(values + [0.0])
            ax.set_ylim(bottom * 1.08, top * 1.08 if top > 0 else 1.0)
            ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        ax.yaxis.set_major_formatter(_formatter(tick))
        ax.set_ylabel(_plain("$/MTok under SLO" + (" (log scale)" if log else "")))
        ax.grid(axis="y", color=GRID)
        if series:
            _legend(fig, handles, ncols=min(ncols, len(handles)))
        else:
            ax.text(0.5, 0.5, "no cost per MTok under SLO published yet", transform=ax.transAxes, ha="center",
                    va="center", color=MUTED, gid="empty")
    return Chart(fig, "cost", "$/MTok under SLO over time", _scope("cost"), point_tips=point_tips)


def cost_chart(history: Sequence[Row], day: date) -> str:
    """The cost chart (`cost_figure`) as inline SVG."""
    return cost_figure(history, day).svg()


__all__ = ["NO_CAPACITY", "PALETTE", "PROVIDER_MANAGED", "Chart", "attainment_chart", "attainment_figure",
           "bucket_misses", "bucket_verdict", "cost_chart", "cost_figure", "load_chart", "load_figure", "log_ticks",
           "tick"]
