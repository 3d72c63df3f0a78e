"""The capacity review of one day (seed 002's template), as a self-contained HTML page and as Markdown.

Pure functions over the day's published rows (`Review`): no I/O, no network. The HTML has inline CSS and inline SVG
charts drawn here (load curve against capacity, attainment by ISL bucket, $/MTok under SLO over the days
published), no script and no external reference; every piece of text is escaped. The Markdown has the same tables
without the charts. Figures are formatted by `fmt` so that a reader (and a test) finds the published number.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

Row = Mapping[str, Any]

PALETTE = ("#1f5fa8", "#c2410c", "#15803d", "#7c3aed", "#b45309", "#0f766e", "#be123c", "#4d7c0f")
OVER = "#fde2e2"
# The policy's peak_basis in words (the review and the plan's note).
PEAK_BASIS = {"busiest_5min": "busiest 5 minutes", "busiest_hour": "busiest hour"}
CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2933; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 2px solid #d9e2ec; }
h3 { margin-top: 1.6rem; } .lede { color: #52606d; max-width: 60rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; } caption { text-align: left; font-weight: 600; }
th, td { border: 1px solid #d9e2ec; padding: .3rem .55rem; vertical-align: top; text-align: left; }
th { background: #f0f4f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.met { color: #15803d; font-weight: 600; } .missed { color: #b91c1c; font-weight: 600; } .muted { color: #7b8794; }
svg.chart { display: block; margin: .4rem 0 1rem; max-width: 100%; height: auto; }
svg.chart text { font: 11px system-ui, sans-serif; fill: #3e4c59; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem; } .charts figure { margin: 0; }
figcaption { color: #52606d; font-size: .9rem; }
"""


@dataclass(frozen=True)
class Review:
    """What a day's review shows: the day's published rows and the policy they were judged by.

    `capacity`, `plan`: infra.capacity_daily and infra.capacity_plan_daily rows (one per deployment);
    `load`: infra.load_hourly rows; `slo`: infra.slo_daily rows; `cost_history`: finance.cost_per_mtok_daily rows
    of every published day up to this one; `policy`: per model, the SLO policy in force (limits and targets) with
    `isl_buckets` (isl_bucket, ttft_limit_ms in ISL order); `deployments`: per deployment_id, the inventory version
    in force at the end of the day (gpus_per_replica, slots_per_replica, cache_policy).
    """

    day: date
    capacity: list[Row]
    plan: list[Row]
    load: list[Row]
    slo: list[Row]
    cost_history: list[Row]
    policy: dict[str, Row]
    deployments: dict[str, Row] = field(default_factory=dict)


# --- formatting ----------------------------------------------------------------------------------------------------

def fmt(value: Any, kind: str = "number", currency: str | None = None) -> str:
    """A published figure as the report prints it; '—' for a missing one.

    kinds: tokens (whole, thousands separated), rate (4 significant digits), ratio (4 decimals), pct, money
    (2 decimals and the currency), money_mtok (4 decimals), gpus (2 decimals), int, ms, number.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if kind == "tokens":
        return f"{value:,.0f}"
    if kind == "rate":
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if kind == "ratio":
        return f"{value:.4f}"
    if kind == "pct":
        return f"{value:.1%}"
    if kind == "money":
        return f"{value:,.2f} {currency or ''}".strip()
    if kind == "money_mtok":
        return f"{value:,.4f} {currency or ''}".strip()
    if kind == "gpus":
        return f"{value:,.2f}"
    if kind == "int":
        return f"{value:,d}"
    if kind == "ms":
        return f"{value:,.0f} ms"
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


def _hhmm(moment: datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%H:%M")


def configuration(cap: Row, inventory: Row | None = None) -> str:
    """A deployment's configuration as one line: GPU type and count, parallelism, quantization (and cache)."""
    text = (f"{cap['gpu_type']} × {fmt(cap['gpus'], 'gpus').rstrip('0').rstrip('.')} GPUs, TP {cap['tp']}, "
            f"PP {cap['pp']}, {cap['quantization']}")
    if inventory and inventory.get("cache_policy"):
        text += f", cache {inventory['cache_policy']}"
    return text


def source_label(cap: Row) -> str:
    if cap["capacity_source"] is None:
        return "none"
    verified = "verified" if cap["capacity_verified"] else "not verified"
    if cap["capacity_source"] == "demonstrated":
        verified = "lower bound, not verified"
    return f"{cap['capacity_source']} ({verified})"


# --- tables --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    """A table both renderers print: a caption, a header and rows of cells (text; numbers right-aligned)."""

    caption: str
    header: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)


def summary_table(review: Review) -> Table:
    rows = []
    for cap in review.capacity:
        plan = _plan_of(review, cap["deployment_id"])
        currency = cap["currency"]
        rows.append([
            cap["model"], cap["deployment_id"], configuration(cap), fmt(cap["capacity_goodput_per_gpu"], "rate"),
            source_label(cap), fmt(cap["daily_capacity_tokens"], "tokens"), fmt(cap["utilization"], "pct"),
            fmt(cap["cost_per_mtok_goodput"], "money_mtok", currency), fmt(cap["daily_value"], "money", currency),
            fmt(cap["daily_cost_at_capacity"], "money", currency),
            f"{fmt(plan.get('gpus_needed'), 'gpus')} / {fmt(plan.get('gpus_deployed'), 'gpus')}",
        ])
    return Table("Capacity per model and configuration",
                 ["model", "deployment", "configuration", "capacity (tok/s per GPU)", "source",
                  "daily capacity (output tokens)", "utilization", "$/MTok under SLO", "daily value",
                  "daily cost at capacity", "GPUs needed / deployed"], rows, numeric={3, 5, 6, 7, 8, 9, 10})


def slo_table(review: Review, model: str) -> Table:
    """The commitments per ISL bucket beside what the day measured (infra.slo_daily)."""
    policy = review.policy.get(model, {})
    limits = {b["isl_bucket"]: b["ttft_limit_ms"] for b in policy.get("isl_buckets", [])}
    target = policy.get("attainment_target")
    rows = []
    for r in _slo_rows(review, model):
        judged = r["attainment_met"] is not None
        verdict = ("met" if r["all_met"] else "missed") if r["all_met"] is not None else "not judged"
        rows.append([
            r["isl_bucket"], fmt(limits.get(r["isl_bucket"]), "ms") if r["isl_bucket"] != "all" else "—",
            fmt(r["effective_requests"], "int"), fmt(r["attainment"], "ratio"),
            (f"≥ {target:g}" if target is not None else "—") + ("" if judged else " (not judged)"),
            fmt(r["success_rate"], "ratio"), fmt(r["ttft_p99_ms"], "ms"), fmt(r["queue_p99_ms"], "ms"),
            fmt(r["itl_p99_ms"], "ms"), fmt(r["tpot_p99_ms"], "ms"), verdict,
        ])
    return Table(f"SLO of {model}: commitments and the day's figures",
                 ["ISL bucket", "TTFT limit", "effective requests", "attainment", "commitment", "success rate",
                  "TTFT P99", "queue P99", "ITL P99", "TPOT P99", "verdict"], rows, numeric={1, 2, 3, 5, 6, 7, 8, 9})


def template_table(review: Review, cap: Row) -> Table:
    """Seed 002's capacity review template for one deployment: one item per row, with its basis."""
    plan = _plan_of(review, cap["deployment_id"])
    policy = review.policy.get(cap["model"], {})
    inventory = review.deployments.get(cap["deployment_id"], {})
    currency = cap["currency"]
    buckets = ", ".join(f"{b['isl_bucket']} {fmt(b['ttft_limit_ms'], 'ms')}" for b in policy.get("isl_buckets", []))
    all_row = next((r for r in _slo_rows(review, cap["model"]) if r["isl_bucket"] == "all"), None)
    met = "—" if all_row is None or all_row["all_met"] is None else ("met" if all_row["all_met"] else "missed")
    slo = (f"compliant = success, TTFT within its ISL bucket's limit ({buckets}) and ITL ≤ "
           f"{fmt(policy.get('itl_limit_ms'), 'ms')}; attainment ≥ {policy.get('attainment_target', '—')} per bucket; "
           f"success rate ≥ {policy.get('success_rate_target', '—')}; P99 queue ≤ "
           f"{fmt(policy.get('queue_p99_ms'), 'ms')}, ITL ≤ {fmt(policy.get('itl_p99_ms'), 'ms')}, TPOT ≤ "
           f"{fmt(policy.get('tpot_p99_ms'), 'ms')} (SLO {cap['slo_version']}). The day: {met}.")
    replicas = plan.get("gpus_deployed") and inventory.get("gpus_per_replica")
    workload = (f"{cap['model']} on {configuration(cap, inventory)}"
                + (f" ({plan['gpus_deployed'] / inventory['gpus_per_replica']:g} replicas of "
                   f"{inventory['gpus_per_replica']} GPUs, {inventory.get('slots_per_replica')} slots each)"
                   if replicas else "")
                + f"; {fmt(plan.get('requests'), 'int')} requests, {fmt(cap['output_tokens'], 'tokens')} output "
                  f"tokens produced; {fmt(cap['mean_output_per_step'], 'rate')} output tokens per agent step "
                  f"({cap['mean_output_per_step_source']}), {fmt(cap['sessions'], 'int')} agent sessions")
    baseline = (f"{fmt(cap['capacity_goodput_per_gpu'], 'rate')} tok/s per GPU under SLO, {source_label(cap)}"
                + (f", lambda_slo_max {fmt(cap['lambda_slo_max'], 'rate')} req/s" if cap["lambda_slo_max"] else "")
                + f"; daily capacity {fmt(cap['daily_capacity_tokens'], 'tokens')} output tokens, utilization "
                  f"{fmt(cap['utilization'], 'pct')}; the day ran {fmt(cap['goodput_per_gpu'], 'rate')} tok/s per "
                  f"GPU under SLO; $/MTok under SLO {fmt(cap['cost_per_mtok_goodput'], 'money_mtok', currency)}, "
                  f"daily value {fmt(cap['daily_value'], 'money', currency)}, daily cost at capacity "
                  f"{fmt(cap['daily_cost_at_capacity'], 'money', currency)}; supported agent steps "
                  f"{fmt(cap['supported_agent_steps'], 'tokens')}; task attainment "
                  f"{fmt(cap['task_attainment'], 'ratio')} against attainment ** mean steps "
                  f"{fmt(cap['expected_task_attainment'], 'ratio')}")
    basis = PEAK_BASIS.get(plan.get("peak_basis"), "—")
    peak = (f"{basis} {_hhmm(plan.get('peak_window_start'))}–"
            f"{_hhmm(plan.get('peak_window_end'))} UTC: {fmt(plan.get('peak_requests'), 'int')} requests, "
            f"{fmt(plan.get('peak_arrival_rate'), 'rate')} req/s; peak-to-mean "
            f"{fmt(plan.get('peak_to_mean'), 'rate')}; "
            f"{fmt(plan.get('hours_over_capacity'), 'int')} hour(s) over capacity, largest backlog "
            f"{fmt(plan.get('max_backlog_tokens'), 'tokens')} tokens")
    failure = (f"N-{plan.get('headroom_failure_replicas', '—')}: {plan.get('headroom_failure_replicas', '—')} "
               f"replica(s) out keep the SLO = {fmt(plan.get('headroom_failure_gpus'), 'gpus')} GPUs")
    lag = (f"scaling lag {fmt(plan.get('headroom_scaling_lag_pct'), 'pct')} = "
           f"{fmt(plan.get('headroom_scaling_lag_gpus'), 'gpus')} GPUs")
    headroom = (f"base {fmt(plan.get('base_gpus'), 'gpus')} GPUs ({fmt(plan.get('replicas_needed_erlang'), 'int')} "
                f"replica(s) for {fmt(plan.get('erlang_c_slots'), 'int')} Erlang C slots; Little's law "
                f"{fmt(plan.get('littles_law_concurrency'), 'rate')} in flight; seed 000's rule "
                f"{fmt(plan.get('replicas_needed_seed_rule'), 'int')} replica(s) at redundancy "
                f"{plan.get('seed_rule_redundancy', '—')}); forecast error "
                f"{fmt(plan.get('headroom_forecast_error_pct'), 'pct')} = "
                f"{fmt(plan.get('headroom_forecast_error_gpus'), 'gpus')}, release "
                f"{fmt(plan.get('headroom_release_pct'), 'pct')} = {fmt(plan.get('headroom_release_gpus'), 'gpus')}, "
                f"jitter {fmt(plan.get('headroom_jitter_pct'), 'pct')} = "
                f"{fmt(plan.get('headroom_jitter_gpus'), 'gpus')}"
                f" (percentages {fmt(plan.get('headroom_pct_total'), 'pct')} in all); GPUs needed "
                f"{fmt(plan.get('gpus_needed'), 'gpus')} against {fmt(plan.get('gpus_deployed'), 'gpus')} deployed: "
                f"{_surplus(plan.get('gpu_surplus'))}")
    validation = ("measured by a load test" if cap["capacity_source"] == "loadtest"
                  else "demonstrated from production logs" if cap["capacity_source"] == "demonstrated"
                  else "no capacity figure") + f": {cap['capacity_note']}"
    return Table(f"Capacity review of {cap['deployment_id']} ({cap['model']})", ["item", "content"], [
        ["SLO", slo], ["Workload", workload], ["Baseline", baseline], ["Peak", peak], ["Failure", failure],
        ["Lag", lag], ["Headroom", headroom], ["Validation", validation],
    ])


def figures_table(review: Review, cap: Row) -> Table:
    """One published figure per row, as it was published, so the review can be signed figure by figure."""
    plan = _plan_of(review, cap["deployment_id"])
    currency = cap["currency"]
    items: list[tuple[str, str]] = [
        ("capacity goodput per GPU (tok/s)", fmt(cap["capacity_goodput_per_gpu"], "rate")),
        ("capacity source", source_label(cap)),
        ("lambda_slo_max (req/s)", fmt(cap["lambda_slo_max"], "rate")),
        ("goodput per GPU, the day (tok/s)", fmt(cap["goodput_per_gpu"], "rate")),
        ("daily capacity (output tokens)", fmt(cap["daily_capacity_tokens"], "tokens")),
        ("output produced (tokens)", fmt(cap["output_tokens"], "tokens")),
        ("utilization", fmt(cap["utilization"], "pct")),
        ("$/MTok under SLO", fmt(cap["cost_per_mtok_goodput"], "money_mtok", currency)),
        ("daily value", fmt(cap["daily_value"], "money", currency)),
        ("daily cost at capacity", fmt(cap["daily_cost_at_capacity"], "money", currency)),
        ("supported agent steps", fmt(cap["supported_agent_steps"], "tokens")),
        ("task attainment", fmt(cap["task_attainment"], "ratio")),
        ("attainment ** mean steps", fmt(cap["expected_task_attainment"], "ratio")),
        ("peak arrival rate (req/s)", fmt(plan.get("peak_arrival_rate"), "rate")),
        ("Little's law concurrency", fmt(plan.get("littles_law_concurrency"), "rate")),
        ("Erlang C slots", fmt(plan.get("erlang_c_slots"), "int")),
        ("replicas (Erlang C / seed 000's rule)",
         f"{fmt(plan.get('replicas_needed_erlang'), 'int')} / {fmt(plan.get('replicas_needed_seed_rule'), 'int')}"),
        ("GPUs needed", fmt(plan.get("gpus_needed"), "gpus")),
        ("GPUs deployed", fmt(plan.get("gpus_deployed"), "gpus")),
        ("GPU surplus (negative: deficit)", fmt(plan.get("gpu_surplus"), "gpus")),
        ("hours over capacity", fmt(plan.get("hours_over_capacity"), "int")),
        ("largest backlog (tokens)", fmt(plan.get("max_backlog_tokens"), "tokens")),
    ]
    return Table(f"Figures of {cap['deployment_id']}", ["figure", "value"], [[k, v] for k, v in items],
                 numeric={1})


def _surplus(value: float | None) -> str:
    if value is None:
        return "—"
    return f"surplus {fmt(value, 'gpus')}" if value >= 0 else f"deficit {fmt(-value, 'gpus')}"


def _plan_of(review: Review, deployment_id: str) -> Row:
    return next((p for p in review.plan if p["deployment_id"] == deployment_id), {})


def _slo_rows(review: Review, model: str) -> list[Row]:
    return [r for r in review.slo if r["model"] == model]


def _models(review: Review) -> list[str]:
    return sorted({c["model"] for c in review.capacity})


# --- charts (inline SVG) -------------------------------------------------------------------------------------------

W, H = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 18, 40


def _svg(kind: str, title: str, body: list[str], width: int = W, height: int = H) -> str:
    return (f'<svg class="chart chart-{kind}" role="img" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}"><title>{html.escape(title)}</title>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "middle", **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{html.escape(v)}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{html.escape(text)}</text>'


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exponent = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exponent:
            return step * exponent
    return 10 * exponent


def _tick(value: float) -> str:
    """An axis label in plain digits: 1,000 and 12,500, never 1e+03; three significant digits below 100."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _y_axis(lo: float, hi: float, label: str, formatter: Callable[[float], str], ticks: int = 4) -> list[str]:
    parts = []
    plot_h = H - TOP - BOTTOM
    for i in range(ticks + 1):
        value = lo + (hi - lo) * i / ticks
        y = TOP + plot_h * (1 - i / ticks)
        parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e7eb"/>')
        parts.append(_text(LEFT - 6, y + 4, formatter(value), anchor="end"))
    parts.append(_text(14, TOP + plot_h / 2, label, transform=f"rotate(-90 14 {TOP + plot_h / 2:.1f})"))
    return parts


def load_chart(model: str, hours: Sequence[Row]) -> str:
    """Hourly demand (output token rate) as bars against the capacity token rate as a line; hours over capacity
    are shaded and their bars drawn in the warning colour."""
    hours = sorted(hours, key=lambda r: r["hour"])
    demand = [r["output_token_rate"] or 0.0 for r in hours]
    capacity = [r["capacity_token_rate"] for r in hours]
    top = _nice_max(max(demand + [c for c in capacity if c is not None] + [0.0]) * 1.05)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = plot_w / max(len(hours), 1)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    body = [f'<rect x="{LEFT + i * slot:.1f}" y="{TOP}" width="{slot:.1f}" height="{plot_h}" fill="{OVER}"/>'
            for i, row in enumerate(hours) if row["over_capacity"]]
    body += _y_axis(0, top, "output tokens/s", _tick)
    for i, row in enumerate(hours):
        x = LEFT + i * slot
        colour = PALETTE[6] if row["over_capacity"] else PALETTE[0]
        tip = html.escape(f"{row['hour']:02d}:00 demand {demand[i]:,.4g} tok/s")
        body.append(f'<rect x="{x + slot * 0.15:.1f}" y="{y(demand[i]):.1f}" width="{slot * 0.7:.1f}" '
                    f'height="{TOP + plot_h - y(demand[i]):.1f}" fill="{colour}"><title>{tip}</title></rect>')
        if i % 3 == 0:
            body.append(_text(x + slot / 2, H - BOTTOM + 14, f"{row['hour']:02d}"))
    if all(c is not None for c in capacity) and capacity:
        points = " ".join(f"{LEFT + i * slot + slot / 2:.1f},{y(c):.1f}" for i, c in enumerate(capacity))
        body.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[2]}" stroke-width="2.5" '
                    'stroke-dasharray="6 3"/>')
        legend = "capacity (dashed)"
    else:
        legend = "no capacity figure"
    body.append(_text(LEFT + plot_w / 2, H - 8, f"UTC hour — demand bars (red: over capacity), {legend}"))
    return _svg("load", f"Load against capacity, {model}", body)


def attainment_chart(model: str, rows: Sequence[Row], target: float | None) -> str:
    """Attainment per ISL bucket as bars against the commitment line; buckets not judged are drawn pale."""
    buckets = [r for r in rows if r["isl_bucket"] != "all"]
    values = [r["attainment"] for r in buckets if r["attainment"] is not None]
    lo = min(values + ([target] if target is not None else []) + [1.0])
    lo = max(0.0, math.floor((lo - 0.01) * 20) / 20)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = plot_w / max(len(buckets), 1)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - lo) / (1.0 - lo or 1.0))

    body = _y_axis(lo, 1.0, "attainment", lambda v: f"{v:.3f}")
    for i, row in enumerate(buckets):
        x = LEFT + i * slot
        judged = row["attainment_met"] is not None
        value = row["attainment"]
        colour = (PALETTE[2] if row["attainment_met"] else PALETTE[6]) if judged else "#cbd2d9"
        if value is not None:
            body.append(f'<rect x="{x + slot * 0.2:.1f}" y="{y(value):.1f}" width="{slot * 0.6:.1f}" '
                        f'height="{TOP + plot_h - y(value):.1f}" fill="{colour}"/>')
            body.append(_text(x + slot / 2, y(value) - 4, f"{value:.4f}"))
        note = "" if judged else " (not judged)"
        body.append(_text(x + slot / 2, H - BOTTOM + 14, f"{row['isl_bucket']}{note}"))
        body.append(_text(x + slot / 2, H - BOTTOM + 27, f"{row['effective_requests']:,} requests",
                          class_="muted"))
    if target is not None:
        body.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(target):.1f}" y2="{y(target):.1f}" '
                    f'stroke="{PALETTE[1]}" stroke-width="2" stroke-dasharray="5 3"/>')
        body.append(_text(W - RIGHT - 4, y(target) - 5, f"commitment {target:g}", anchor="end"))
    return _svg("attainment", f"Attainment by ISL bucket, {model}", body)


def cost_chart(history: Sequence[Row], day: date) -> str:
    """$/MTok under SLO per deployment (and currency) over the published days up to `day`: money compares across
    models, so every configuration shares one chart."""
    history = [r for r in history if r["day"] <= day]
    days = sorted({r["day"] for r in history})
    series: dict[tuple[str, str, str], dict[date, float]] = {}
    for r in history:
        if r["cost_per_mtok_goodput"] is not None:
            key = (r["model"], r["deployment_id"], r["currency"])
            series.setdefault(key, {})[r["day"]] = r["cost_per_mtok_goodput"]
    values = [v for s in series.values() for v in s.values()]
    top = _nice_max(max(values + [0.0]) * 1.05)
    height = H + 18 * len(series)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(d: date) -> float:
        return LEFT + (plot_w * (days.index(d) / (len(days) - 1)) if len(days) > 1 else plot_w / 2)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    body = _y_axis(0, top, "$/MTok under SLO", _tick)
    step = max(1, math.ceil(len(days) / 8))
    for i, d in enumerate(days):
        if i % step == 0 or d == days[-1]:
            body.append(_text(x(d), H - BOTTOM + 14, d.strftime("%m-%d")))
    for n, ((model, deployment, currency), points) in enumerate(sorted(series.items())):
        colour = PALETTE[n % len(PALETTE)]
        ordered = sorted(points.items())
        if len(ordered) > 1:
            coords = " ".join(f"{x(d):.1f},{y(v):.1f}" for d, v in ordered)
            body.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for d, v in ordered:
            body.append(f'<circle cx="{x(d):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}">'
                        f"<title>{html.escape(f'{d} {deployment}: {v:,.4f} {currency}')}</title></circle>")
        ly = H + 4 + 18 * n
        body.append(f'<rect x="{LEFT}" y="{ly:.1f}" width="12" height="4" fill="{colour}"/>')
        body.append(_text(LEFT + 18, ly + 5, f"{model} / {deployment} ({currency})", anchor="start"))
    if not series:
        body.append(_text(LEFT + plot_w / 2, TOP + plot_h / 2, "no cost per MTok under SLO published yet"))
    return _svg("cost", "$/MTok under SLO over time", body, height=height)


# --- documents -----------------------------------------------------------------------------------------------------

INTRO = ("Every figure is bound to a model and its serving configuration: token counts of different models are "
         "never compared; money is. Capacity is SLO goodput per GPU (output tokens of compliant requests per "
         "second), from a verified load test or, as a lower bound, from the best production window in which every "
         "commitment held. Source: the published infra.capacity_daily, infra.capacity_plan_daily, infra.load_hourly, "
         "infra.slo_daily and finance.cost_per_mtok_daily (definitions: spec/metrics.md, sections 2-6).")


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = []
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in table.numeric else ""
            if table.header[i] == "verdict":
                cls = f' class="{"met" if cell == "met" else "missed" if cell == "missed" else "muted"}"'
            cells.append(f"<td{cls}>{html.escape(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table><caption>{html.escape(table.caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def render_html(review: Review) -> str:
    """The review as one self-contained HTML page (inline CSS and SVG, nothing fetched)."""
    title = f"Capacity review {review.day.isoformat()}"
    parts = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
             f"<style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)} (UTC)</h1>", f'<p class="lede">{html.escape(INTRO)}</p>',
             "<h2>Summary</h2>", _html_table(summary_table(review)),
             "<h2>$/MTok under SLO over time</h2>",
             _figure(cost_chart(review.cost_history, review.day),
                     "Cost per million output tokens of compliant requests, per deployment, on every published day "
                     f"up to {review.day.isoformat()}.")]
    for model in _models(review):
        policy = review.policy.get(model, {})
        parts.append(f'<section id="model-{html.escape(_anchor(model))}"><h2>Model {html.escape(model)}</h2>')
        parts.append('<div class="charts">')
        parts.append(_figure(load_chart(model, [r for r in review.load if r["model"] == model]),
                             "Demand (output tokens/s of requests that reached the model) per UTC hour against the "
                             "capacity token rate."))
        parts.append(_figure(attainment_chart(model, _slo_rows(review, model), policy.get("attainment_target")),
                             "Attainment per ISL bucket against the commitment (pale: too few requests to judge)."))
        parts.append("</div>")
        parts.append(_html_table(slo_table(review, model)))
        for cap in [c for c in review.capacity if c["model"] == model]:
            inventory = review.deployments.get(cap["deployment_id"])
            parts.append(f'<section id="deployment-{html.escape(_anchor(cap["deployment_id"]))}">'
                         f"<h3>{html.escape(cap['deployment_id'])}: {html.escape(configuration(cap, inventory))}</h3>")
            parts.append(_html_table(template_table(review, cap)))
            parts.append(_html_table(figures_table(review, cap)))
            parts.append("</section>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "".join(parts)


def _md_cell(text: str) -> str:
    """A table cell: HTML-escaped (Markdown is often rendered as HTML), pipes escaped, on one line."""
    return html.escape(text, quote=False).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> str:
    lines = [f"**{_md_cell(table.caption)}**", "",
             "| " + " | ".join(_md_cell(h) for h in table.header) + " |",
             "|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.header))) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def render_markdown(review: Review) -> str:
    """The review's tables as Markdown (no charts)."""
    parts = [f"# Capacity review {review.day.isoformat()} (UTC)", "", _md_cell(INTRO), "", "## Summary", "",
             _md_table(summary_table(review))]
    for model in _models(review):
        parts += [f"## Model {_md_cell(model)}", "", _md_table(slo_table(review, model))]
        for cap in [c for c in review.capacity if c["model"] == model]:
            inventory = review.deployments.get(cap["deployment_id"])
            parts += [f"### {_md_cell(cap['deployment_id'])}: {_md_cell(configuration(cap, inventory))}", "",
                      _md_table(template_table(review, cap)), _md_table(figures_table(review, cap))]
    return "\n".join(parts)


def tables(review: Review) -> Iterable[Table]:
    """Every table of the review, in document order (the HTML and the Markdown print the same ones)."""
    yield summary_table(review)
    for model in _models(review):
        yield slo_table(review, model)
        for cap in [c for c in review.capacity if c["model"] == model]:
            yield template_table(review, cap)
            yield figures_table(review, cap)
