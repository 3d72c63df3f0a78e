"""The capacity review of one day (seed 002's template), as a self-contained HTML page and as Markdown.

Pure functions over the day's published rows (`Review`): no I/O, no network. The HTML has inline CSS and inline SVG
charts drawn here (load curve against capacity, attainment by ISL bucket, $/MTok under SLO over the days
published), no script and no external reference; every piece of text is escaped. The Markdown has the same tables
and lines without the charts: both print `document(review)`. Figures are formatted by `fmt` so that a reader (and a
test) finds the published number.

The verdict is infra.capacity_verdict_daily's (sql/capacity/capacity_verdict_daily.sql): the review prints its SLO
verdict, missed figures, GPUs needed, gap and capacity basis, and decides none of them. GPU-served models (a
deployment in infra.capacity_daily) get a verdict row against their capacity; hosted-API models (provider-managed,
no capacity row) get their own verdict rows and sections, without a GPU figure. A model in force
without a request on the day, and any chart or table without data (no cost rows, no latency in usage-only logs, no
what-if rows, no capacity rows, an empty day), is left out with one line saying why.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

Row = Mapping[str, Any]

PALETTE = ("#1f5fa8", "#c2410c", "#15803d", "#7c3aed", "#b45309", "#0f766e", "#be123c", "#4d7c0f")
OVER = "#fde2e2"
# The policy's peak_basis in words (the review and the plan's note).
PEAK_BASIS = {"busiest_5min": "busiest 5 minutes", "busiest_hour": "busiest hour"}
CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2933; margin: 2rem auto;
       max-width: 1240px; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 2px solid #d9e2ec; }
h3 { margin-top: 1.6rem; } .lede { color: #52606d; max-width: 60rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; } caption { text-align: left; font-weight: 600; }
th, td { border: 1px solid #d9e2ec; padding: .3rem .55rem; vertical-align: top; text-align: left; }
th { background: #f0f4f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.met { color: #15803d; font-weight: 600; } .missed { color: #b91c1c; font-weight: 600; } .muted { color: #7b8794; }
svg.chart { display: block; margin: .4rem 0 1rem; width: 100%; height: auto; }
svg.chart text { font: 12px system-ui, sans-serif; fill: #1f2933; }
figure { margin: 0; } .charts { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5rem; }
@media (max-width: 900px) { .charts { grid-template-columns: 1fr; } }
figcaption { color: #52606d; font-size: .9rem; }
#verdict { margin-top: 1rem; } table.verdict { width: 100%; } table.verdict caption { font-size: 1.15rem; }
table.verdict th { background: #fff4d6; } table.verdict td:first-child { white-space: nowrap; font-weight: 600; }
p.note { color: #3e4c59; margin: .2rem 0 .6rem; }
.tables { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
"""


@dataclass(frozen=True)
class Review:
    """What a day's review shows: the day's published rows and the policy they were judged by.

    `capacity`, `plan`: infra.capacity_daily and infra.capacity_plan_daily rows (one per deployment);
    `load`: infra.load_hourly rows; `slo`: infra.slo_daily rows; `cost_history`: finance.cost_per_mtok_daily rows
    of every published day up to this one; `policy`: per model, the SLO policy in force (limits and targets) with
    `isl_buckets` (isl_bucket, ttft_limit_ms in ISL order); `deployments`: per deployment_id, the inventory version
    in force at the end of the day (gpus_per_replica, slots_per_replica, cache_policy); `tokens`:
    infra.token_split_daily rows (the three input figures and the ISL/OSL workload); `slo_hourly` and `goodput`:
    infra.slo_hourly and infra.goodput_hourly rows; `plan_history`: infra.capacity_plan_daily rows (day, model,
    deployment_id, peak_output_token_rate) of every published day up to this one, for the growth forecast;
    `whatif`: infra.cache_whatif_daily rows (per deployment and prefix-cache scenario); `gpu_usage_history`:
    infra.gpu_usage_daily rows (day, deployment_id, gpus, gpus_measured, power_w, power_basis, raw_throughput,
    slo_goodput, goodput_per_watt, goodput_per_watt_nominal) of every published day up to this one; `run_id`: the
    Dagster run writing the review; `published_run_id`: the run that published the day's figures; `verdict`:
    infra.capacity_verdict_daily rows (one per deployment), the verdict the review prints and never decides again.
    """

    day: date
    capacity: list[Row]
    plan: list[Row]
    load: list[Row]
    slo: list[Row]
    cost_history: list[Row]
    policy: dict[str, Row]
    deployments: dict[str, Row] = field(default_factory=dict)
    tokens: list[Row] = field(default_factory=list)
    slo_hourly: list[Row] = field(default_factory=list)
    goodput: list[Row] = field(default_factory=list)
    plan_history: list[Row] = field(default_factory=list)
    whatif: list[Row] = field(default_factory=list)
    gpu_usage_history: list[Row] = field(default_factory=list)
    run_id: str | None = None
    published_run_id: str | None = None
    verdict: list[Row] = field(default_factory=list)


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
        return f"{int(value):,d}"  # a count may arrive as a float or a DECIMAL (a SUM in DuckDB)
    if kind == "ms":
        return f"{value:,.0f} ms"
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


def _hhmm(moment: datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%H:%M")


def configuration(cap: Row, inventory: Row | None = None) -> str:
    """A deployment's configuration as one line: GPU type and count, parallelism, quantization, cache and engine."""
    text = (f"{cap['gpu_type']} × {fmt(cap['gpus'], 'gpus').rstrip('0').rstrip('.')} GPUs, TP {cap['tp']}, "
            f"PP {cap['pp']}, {cap['quantization']}")
    cache = cap.get("cache_policy") or (inventory or {}).get("cache_policy")
    if cache:
        text += f", cache {cache}"
    if cap.get("engine"):
        text += f", {cap['engine']}" + (f" {cap['engine_version']}" if cap.get("engine_version") else "")
    return text


def identity(cap: Row) -> str:
    """The model and engine versions the figure is bound to (seed 003), 'not declared' where the inventory is silent."""
    engine = " ".join(v for v in (cap.get("engine"), cap.get("engine_version")) if v) or "not declared"
    return f"model {cap['model']} version {cap.get('model_version') or 'not declared'}, engine {engine}"


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


def model_verdict(review: Review, model: str) -> tuple[bool | None, str | None]:
    """The model's SLO verdict and the figures it missed, as infra.capacity_verdict_daily decided them (every
    deployment of a model carries the model's): (slo_met, missed_figures), (None, None) without a verdict row.
    The review never judges the SLO again: the figures are named there, judged buckets only."""
    rows = [v for v in review.verdict if v["model"] == model]
    met = next((v.get("slo_met") for v in rows), None)
    return met, next((v.get("missed_figures") for v in rows if v.get("missed_figures")), None)


def model_cost_per_mtok(review: Review, model: str) -> tuple[float | None, str | None]:
    """The model's $/MTok under SLO on the day over all its deployments: its cost over its compliant output
    (finance.cost_per_mtok_daily), in the one currency it was costed in (None with several or none)."""
    rows = [r for r in review.cost_history if r["day"] == review.day and r["model"] == model
            and r.get("cost_total") is not None]
    currencies = {r["currency"] for r in rows}
    if len(currencies) != 1:
        return None, None
    tokens = sum(r["compliant_output_tokens"] or 0 for r in rows)
    cost = sum(float(r["cost_total"]) for r in rows)
    return (cost / tokens * 1e6 if tokens else None), currencies.pop()


def capacity_basis(cap: Row) -> str:
    """Where a deployment's capacity figure comes from, in the verdict's words, with why a load test of another
    configuration did not count when it fell back."""
    source = cap["capacity_source"]
    if source == "loadtest":
        text = (f"verified load test {cap['loadtest_run_id']}" if cap["capacity_verified"]
                else f"load test {cap['loadtest_run_id']}, reference only (not verified)")
    elif source == "demonstrated":
        text = "demonstrated lower bound"
    else:
        text = "no capacity figure"
    if cap.get("other_configuration_run_id"):
        text += (f" (load test {cap['other_configuration_run_id']} measured another configuration: "
                 f"{cap['other_configuration_differences']})")
    return text


# --- GPUs needed: one figure, its rule and its parts (docs/metrics.md, section 6) ----------------------------------

# The two sizings of infra.capacity_plan_daily's binding_sizing, in the review's words.
SIZING_NAMES = {"erlang_c": "Erlang C plan", "goodput": "peak sizing"}
LOWER_BOUND = "demonstrated capacity is a lower bound: run a load test before buying"
REFERENCE = "the load test is a reference figure, not verified: verify it before buying"
# The policy's headroom percentages, in the order they are applied (each on top of the ones before it).
HEADROOM_PARTS = (("scaling_lag", "scaling lag"), ("forecast_error", "forecast error"), ("release", "release"),
                  ("jitter", "jitter"))


def gpus_needed_of(plan: Row) -> float | None:
    """GPUs needed, the one figure the review prints under that name: the larger of the two sizings with the
    headroom policy (gpus_needed_binding), the Erlang C plan's where a row has no binding figure."""
    return plan["gpus_needed_binding"] if "gpus_needed_binding" in plan else plan.get("gpus_needed")


def _sizing_base(plan: Row) -> float | None:
    """The binding sizing's GPUs before headroom: the Erlang C plan's replicas in GPUs, or the peak sizing's."""
    return plan.get("goodput_sizing_base_gpus") if plan.get("binding_sizing") == "goodput" else plan.get("base_gpus")


def _headroom_gpus(plan: Row) -> tuple[float, float] | None:
    """(the headroom percentages' GPUs, the failure replicas' GPUs) that take the binding sizing's base to GPUs
    needed; None when a part is not in the row."""
    needed, base, failure = gpus_needed_of(plan), _sizing_base(plan), plan.get("headroom_failure_gpus")
    if needed is None or base is None or failure is None:
        return None
    return needed - base - failure, failure


def sizing_text(plan: Row) -> str:
    """What sets GPUs needed, short: 'peak sizing 1.12 + headroom 1.37' (the larger sizing before headroom, and
    what the headroom policy adds), '—' without a figure."""
    name = SIZING_NAMES.get(plan.get("binding_sizing"))
    if gpus_needed_of(plan) is None or name is None:
        return "—"
    parts = _headroom_gpus(plan)
    if parts is None:
        return f"{name} with the headroom policy"
    base = _sizing_base(plan)
    return f"{name} {fmt(base, 'gpus')} + headroom {fmt(_shown(gpus_needed_of(plan)) - _shown(base), 'gpus')}"


def _sizing_detail(plan: Row) -> str:
    """The binding sizing in words, with the figures it is computed from."""
    basis = PEAK_BASIS.get(plan.get("peak_basis"), "planning peak")
    if plan.get("binding_sizing") == "goodput":
        return (f"the peak sizing ({fmt(plan.get('peak_output_token_rate'), 'rate')} output tok/s in the {basis} / "
                f"{fmt(plan.get('capacity_goodput_per_gpu'), 'rate')} tok/s per GPU)")
    replicas = plan.get("replicas_needed_erlang")
    return (f"the Erlang C plan ({fmt(plan.get('erlang_c_slots'), 'int')} slots for the concurrency of the {basis}: "
            f"{fmt(replicas, 'int')} replica(s) of {fmt(plan.get('gpus_per_replica'), 'int')} GPUs)")


def _on_lower_bound(plan: Row, cap: Row | None) -> str | None:
    """The sentence a deficit carries when it rests on a capacity figure that is not a verified measurement: the
    peak sizing divides by the capacity per GPU (the Erlang C plan does not use it)."""
    if cap is None or plan.get("binding_sizing") != "goodput":
        return None
    if cap.get("capacity_source") == "demonstrated":
        return LOWER_BOUND
    if cap.get("capacity_source") == "loadtest" and cap.get("capacity_verified") is False:
        return REFERENCE
    return None


def gpus_needed_line(review: Review, plan: Row) -> str | None:
    """One deployment's GPUs needed in words: the figure against the GPUs in force, what binds it (the Erlang C
    plan or the peak sizing, and the headroom policy on top; the headroom policy alone when the peak fits in the
    GPUs in force), the surplus or deficit as the sum of its parts, and the lower-bound sentence when a deficit
    rests on a lower-bound capacity."""
    needed, deployed = gpus_needed_of(plan), plan.get("gpus_deployed")
    if needed is None or deployed is None:
        return None
    several = sum(1 for p in review.plan if p["model"] == plan["model"]) > 1
    who = plan["model"] + (f" on {plan['deployment_id']}" if several else "")
    gap = deployed - needed
    text = f"{who}: GPUs needed {fmt(needed, 'gpus')} against {fmt(deployed, 'gpus')} in force, {_surplus(gap)}"
    parts, base = _headroom_gpus(plan), _sizing_base(plan)
    if parts is None or plan.get("binding_sizing") not in SIZING_NAMES:
        return text + "."
    pct, failure = parts
    basis = PEAK_BASIS.get(plan.get("peak_basis"), "planning peak")
    # The parts as printed add up to GPUs needed as printed: the base and the failure GPUs (whole replicas) are
    # rounded, and the percentages' GPUs are what is left, so a rounding cent lands there.
    failure_shown = _shown(failure)
    pct_shown = _shown(needed) - _shown(base) - failure_shown
    beyond = _shown(base) - deployed
    spare = f" with {fmt(-beyond, 'gpus')} to spare" if beyond < 0 else ""
    text += f". {_capital(_sizing_detail(plan))} needs {fmt(base, 'gpus')} GPUs before headroom"
    if gap < 0 and base > deployed:
        text += f", {fmt(beyond, 'gpus')} more than in force"
        if plan.get("binding_sizing") == "goodput" and plan.get("hours_over_capacity") == 0:
            text += f" (the {basis} ran over the capacity of the GPUs in force, though no whole hour did)"
    elif gap < 0:
        text += f", which the GPUs in force hold{spare}: the headroom policy binds"
    replicas, total = plan.get("headroom_failure_replicas"), plan.get("headroom_pct_total")
    text += (f"; the headroom policy adds {fmt(pct_shown, 'gpus')}"
             + (f" ({fmt(total, 'pct')} for scaling lag, forecast error, release and jitter)" if total is not None
                else "")
             + f" and {fmt(failure_shown, 'gpus')}"
             + (f" so that {replicas} replica(s) may fail" if replicas is not None else " for failures"))
    if gap < 0 and base > deployed:
        text += (f": deficit {fmt(-gap, 'gpus')} = {fmt(beyond, 'gpus')} + {fmt(pct_shown, 'gpus')} + "
                 f"{fmt(failure_shown, 'gpus')}")
    elif gap < 0:
        text += (f": deficit {fmt(-gap, 'gpus')} = {fmt(pct_shown, 'gpus')} + {fmt(failure_shown, 'gpus')} of "
                 "headroom" + (f" - {fmt(-beyond, 'gpus')} spare" if beyond < 0 else ""))
    other = "goodput" if plan.get("binding_sizing") == "erlang_c" else "erlang_c"
    other_needed = plan.get("gpus_needed_goodput" if other == "goodput" else "gpus_needed")
    if other_needed is not None:
        text += f". The {SIZING_NAMES[other]} with the same headroom needs {fmt(other_needed, 'gpus')}"
    text += "."
    cap = next((c for c in review.capacity if c["deployment_id"] == plan["deployment_id"]), None)
    if gap < 0 and (caveat := _on_lower_bound(plan, cap)) is not None:
        erlang = plan.get("gpus_needed")
        firm = (f"; at least {fmt(erlang - deployed, 'gpus')} by the Erlang C plan, which does not use the capacity "
                "figure" if erlang is not None and erlang > deployed else "")
        text += f" {_capital(caveat)} (the deficit is at most {fmt(-gap, 'gpus')}{firm})."
    return text


def _shown(value: float) -> float:
    """A GPU figure as `fmt(value, 'gpus')` prints it (two decimals)."""
    return round(value, 2)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def gpus_needed_lines(review: Review) -> list[str]:
    """GPUs needed in words for every GPU deployment the verdict judges, in its order."""
    models = set(_models(review))
    return [line for p in sorted(review.plan, key=lambda p: (p["model"], p["deployment_id"]))
            if p["model"] in models and (line := gpus_needed_line(review, p))]


def _verdicts_of(review: Review, model: str) -> list[Row]:
    """The model's GPU deployments' rows of infra.capacity_verdict_daily."""
    return sorted((v for v in review.verdict if v["model"] == model and v.get("kind", "gpu") == "gpu"),
                  key=lambda v: v["deployment_id"])


def verdict_sizing_text(verdict: Row) -> str:
    """What sets GPUs needed, short, from a verdict row: 'peak sizing 1.12 + headroom 1.37' (the binding sizing's
    GPUs before headroom, gpus_in_force + gap_slo_capacity, and what the headroom policy adds), '—' without one."""
    name = SIZING_NAMES.get(verdict.get("gpus_needed_rule"))
    needed = verdict.get("gpus_needed")
    if needed is None or name is None:
        return "—"
    if verdict.get("gap_slo_capacity") is None or verdict.get("gpus_in_force") is None:
        return f"{name} with the headroom policy"
    base = verdict["gap_slo_capacity"] + verdict["gpus_in_force"]
    return f"{name} {fmt(base, 'gpus')} + headroom {fmt(_shown(needed) - _shown(base), 'gpus')}"


def verdict_table(review: Review) -> Table:
    """The answer first (seed 002's review leads with its verdict): per model, SLO met or missed and which figure
    missed, GPUs needed against GPUs in force with the surplus or deficit, $/MTok under SLO, the capacity basis
    and the hours over capacity.

    Every figure and word of the verdict is infra.capacity_verdict_daily's (`review.verdict`), summed over the
    model's deployments where it is a count of GPUs; the review decides none of it. $/MTok under SLO is the model's
    over all its deployments (finance.cost_per_mtok_daily), as the table's is per deployment."""
    rows = []
    for model in _models(review):
        verdicts = _verdicts_of(review, model)
        met, misses = model_verdict(review, model)
        slo = "not judged" if met is None else "met" if met else "missed"
        needed = [v.get("gpus_needed") for v in verdicts]
        in_force = [v.get("gpus_in_force") for v in verdicts]
        # A sum over the model's deployments only when every one of them has the figure: a partial sum would read
        # as the model's.
        sized = bool(verdicts) and None not in needed and None not in in_force
        gpus = f"{fmt(sum(needed), 'gpus')} / {fmt(sum(in_force), 'gpus')}" if sized else "—"
        surplus = _surplus(sum(in_force) - sum(needed)) if sized else "—"
        if sized and sum(in_force) < sum(needed) and any(v.get("gpus_needed_at_most") for v in verdicts):
            surplus += " (at most: lower-bound capacity)"
        several = len(verdicts) > 1
        set_by = "; ".join((f"{v['deployment_id']}: " if several else "") + verdict_sizing_text(v)
                           for v in verdicts) if sized else "—"
        cost, currency = model_cost_per_mtok(review, model)
        basis = "; ".join((f"{v['deployment_id']}: " if several else "") + v["capacity_basis"]
                          for v in verdicts if v.get("capacity_basis") is not None)
        hours = max((v["hours_over_capacity"] for v in verdicts if v.get("hours_over_capacity") is not None),
                    default=None)
        rows.append([model, slo, misses or ("—" if met is not False else "see buckets"),
                     gpus, surplus, set_by, fmt(cost, "money_mtok", currency), basis, fmt(hours, "int")])
    return Table("Verdict per model", ["model", "SLO", "missed figure", "GPUs needed / in force",
                                       "surplus (deficit)", "GPUs needed set by", "$/MTok under SLO",
                                       "capacity basis", "hours over capacity"], rows, numeric={3, 6, 8})


def model_cost_per_mtok_delivered(review: Review, model: str) -> tuple[float | None, str | None]:
    """The model's $/MTok delivered on the day: its cost over the output it produced, in its one currency.

    The output is finance.cost_per_mtok_daily's `output_tokens` (successful requests) where the cost rows carry it;
    the Review's cost history holds only the columns of $/MTok under SLO, and then the output is
    infra.token_split_daily's (every request that reached the model: the same unless failed requests returned
    tokens)."""
    rows = [r for r in review.cost_history if r["day"] == review.day and r["model"] == model
            and r.get("cost_total") is not None]
    currencies = {r["currency"] for r in rows}
    if len(currencies) != 1:
        return None, None
    if all(r.get("output_tokens") is not None for r in rows):
        tokens = sum(r["output_tokens"] for r in rows)
    else:
        tokens = _tokens_of(review, model).get("output_tokens")
    cost = sum(float(r["cost_total"]) for r in rows)
    return (cost / tokens * 1e6 if tokens else None), currencies.pop()


def _input_split(tok: Row) -> str:
    """Input as its three figures with the cache share: '3,055,202 = 2,400,768 cached + 654,434 recomputed (78.6%
    cached)'."""
    if tok.get("input_total") is None:
        return "—"
    return (f"{fmt(tok['input_total'], 'tokens')} = {fmt(tok.get('input_cached'), 'tokens')} cached + "
            f"{fmt(tok.get('input_recomputed'), 'tokens')} recomputed ({fmt(tok.get('cache_hit_ratio'), 'pct')} "
            "cached)")


def _latency_text(review: Review, model: str) -> str:
    """What the logs say of latency: TTFT P99 and attainment of the whole model, or that they carry none."""
    whole = _whole_row(review, model)
    if whole is None:
        return "—"
    if not _latency_logged(review, model):
        return "not in the logs (usage only): success rate judged alone"
    text = f"TTFT P99 {fmt(whole.get('ttft_p99_ms'), 'ms')}, attainment {fmt(whole.get('attainment'), 'ratio')}"
    unknown = whole.get("itl_unknown_share")
    return text + (f" (ITL not logged for {fmt(unknown, 'pct')})" if unknown else "")


def _rate_limit_use(review: Review, model: str) -> tuple[float | None, float | None, int]:
    """The busiest minute's share of the provider's RPM and TPM limits and the hours over a limit
    (infra.load_hourly; None where the inventory gives no limit)."""
    hours = [r for r in review.load if r["model"] == model]
    rpm = [r["peak_minute_rpm_utilization"] for r in hours if r.get("peak_minute_rpm_utilization") is not None]
    tpm = [r["peak_minute_tpm_utilization"] for r in hours if r.get("peak_minute_tpm_utilization") is not None]
    return max(rpm, default=None), max(tpm, default=None), sum(1 for r in hours if r.get("over_rate_limit"))


def _rate_limit_text(review: Review, model: str) -> str:
    """'busiest minute 50.0% of the RPM limit and 25.0% of the TPM limit, 1 hour(s) over a rate limit', or ''."""
    rpm, tpm, over = _rate_limit_use(review, model)
    parts = ([f"{fmt(rpm, 'pct')} of the RPM limit"] if rpm is not None else []) + (
        [f"{fmt(tpm, 'pct')} of the TPM limit"] if tpm is not None else [])
    text = f"busiest minute {' and '.join(parts)}" if parts else ""
    if over:
        text += f"{', ' if text else ''}{over} hour(s) over a rate limit"
    return text


def _rate_limit_cell(review: Review, model: str) -> str:
    """The verdict's short form: 'RPM 50.0%, TPM 25.0%', with '; 1 h over' when an hour went over a limit."""
    rpm, tpm, over = _rate_limit_use(review, model)
    parts = ([f"RPM {fmt(rpm, 'pct')}"] if rpm is not None else []) + (
        [f"TPM {fmt(tpm, 'pct')}"] if tpm is not None else [])
    return (", ".join(parts) or "—") + (f"; {over} h over" if over else "")


def hosted_verdict_table(review: Review) -> Table:
    """Per hosted-API model (a provider-managed deployment: no GPU of ours, so no capacity figure): its requests,
    SLO verdict and missed figure, the latency the logs carry, input with its cache share, output, and $/MTok
    delivered and under SLO; the capacity column says provider-managed, the last the rate limits' use."""
    rows = []
    for model in _hosted_models(review):
        tok = _tokens_of(review, model)
        met, misses = model_verdict(review, model)
        delivered, delivered_currency = model_cost_per_mtok_delivered(review, model)
        cost, currency = model_cost_per_mtok(review, model)
        under_slo = fmt(cost, "money_mtok", currency)
        if cost is None and not _latency_logged(review, model):
            under_slo = "— (no latency)"
        rows.append([model, fmt(_day_requests(review, model), "int"),
                     "not judged" if met is None else "met" if met else "missed",
                     misses or ("—" if met is not False else "see buckets"),
                     _latency_text(review, model), _input_split(tok), fmt(tok.get("output_tokens"), "tokens"),
                     fmt(delivered, "money_mtok", delivered_currency), under_slo, "no capacity: provider-managed",
                     _rate_limit_cell(review, model)])
    return Table("Verdict per hosted-API model (provider-managed)",
                 ["model", "requests", "SLO", "missed figure", "latency", "input: total = cached + recomputed",
                  "output tokens", "$/MTok delivered", "$/MTok under SLO", "capacity",
                  "busiest minute / rate limits"], rows, numeric={1, 6, 7, 8})


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
            f"{fmt(gpus_needed_of(plan), 'gpus')} / {fmt(plan.get('gpus_deployed'), 'gpus')}", sizing_text(plan),
        ])
    return Table("Capacity per model and configuration",
                 ["model", "deployment", "configuration", "capacity (tok/s per GPU)", "source",
                  "daily capacity (output tokens)", "utilization", "$/MTok under SLO", "daily value",
                  "daily cost at capacity", "GPUs needed / deployed", "GPUs needed set by"], rows,
                 numeric={3, 5, 6, 7, 8, 9, 10})


def slo_table(review: Review, model: str) -> Table:
    """The commitments per ISL bucket beside what the day measured (infra.slo_daily), E2E P99 beside TTFT and TPOT."""
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
            fmt(r["itl_p99_ms"], "ms"), fmt(r["tpot_p99_ms"], "ms"), fmt(r.get("e2e_p99_ms"), "ms"), verdict,
        ])
    return Table(f"SLO of {model}: commitments and the day's figures",
                 ["ISL bucket", "TTFT limit", "effective requests", "attainment", "commitment", "success rate",
                  "TTFT P99", "queue P99", "ITL P99", "TPOT P99", "E2E P99", "verdict"], rows,
                 numeric={1, 2, 3, 5, 6, 7, 8, 9, 10})


def _tokens_of(review: Review, model: str) -> Row:
    return next((r for r in review.tokens if r["model"] == model), {})


def workload_table(review: Review, model: str) -> Table:
    """Seed 002's Workload: the ISL and OSL distributions of the requests served in full (quantiles)."""
    tok = _tokens_of(review, model)
    rows = []
    for name, key in (("ISL (input tokens)", "isl"), ("OSL (output tokens)", "osl")):
        rows.append([name, fmt(tok.get(f"{key}_mean"), "tokens"),
                     *[fmt(tok.get(f"{key}_p{q}"), "tokens") for q in (10, 50, 90, 99)],
                     fmt(tok.get(f"{key}_max"), "tokens")])
    corr = tok.get("isl_osl_correlation")
    caption = (f"Workload of {model}: {fmt(tok.get('workload_requests'), 'int')} requests served in full"
               + (f", ISL-OSL correlation {corr:.2f}" if corr is not None else ""))
    return Table(caption, ["length", "mean", "P10", "P50", "P90", "P99", "max"], rows, numeric={1, 2, 3, 4, 5, 6})


def input_table(review: Review, model: str) -> Table:
    """Input three ways (total, cached, recomputed) and how much a total-only report overstates input compute."""
    tok = _tokens_of(review, model)
    over = tok.get("input_overstatement")
    return Table(f"Input tokens of {model}, three figures together", [
        "input total", "cached", "recomputed", "cache hit ratio", "overstatement (total / recomputed)",
        "input : output"], [[
            fmt(tok.get("input_total"), "tokens"), fmt(tok.get("input_cached"), "tokens"),
            fmt(tok.get("input_recomputed"), "tokens"), fmt(tok.get("cache_hit_ratio"), "pct"),
            "—" if over is None else f"{over:,.1f}×",
            "—" if tok.get("input_output_ratio") is None else f"{tok['input_output_ratio']:,.0f} : 1"]],
        numeric={0, 1, 2, 3, 4, 5})


def whatif_finding(review: Review, model: str) -> str:
    """One line per model from infra.cache_whatif_daily: the input the best configured prefix cache would have found
    cached, beside the observed share, and what that changes in input cost per 1M input tokens.

    Figures are per model (its deployments' tokens and cost changes summed), per scenario replayed on all of them.
    The best is the highest hit ratio among the caches one could run (LRU), the infinite cache being only their
    upper bound; ties go to the fewest blocks. Only the infinite cache configured: it is the one shown."""
    rows = [r for r in review.whatif if r["model"] == model]
    if not rows:
        return (f"Prefix-cache what-if: no infra.cache_whatif_daily rows for {model} this day, so no prefix-cache "
                "scenario was replayed.")
    rows = [r for r in rows if r.get("requests_simulated")]
    if not rows:
        return "Prefix-cache what-if: no request of the day carried prefix block hashes, so none was replayed."
    deployments = {r["deployment_id"] for r in rows}
    scenarios: dict[str, list[Row]] = {}
    for r in rows:
        if r.get("simulated_cached_tokens") is not None:
            scenarios.setdefault(r["scenario"], []).append(r)
    # A scenario counts when it was replayed on every deployment of the model, over some input: a share of no
    # input tokens is no figure.
    scenarios = {k: v for k, v in scenarios.items() if {r["deployment_id"] for r in v} == deployments
                 and sum(r["input_tokens"] or 0 for r in v) > 0}
    if not scenarios:
        return ("Prefix-cache what-if: no configured scenario could be replayed on the model (see the notes of "
                "infra.cache_whatif_daily).")

    def figures(name: str) -> tuple[float, float, float | None, str | None]:
        group = scenarios[name]
        tokens = sum(r["input_tokens"] or 0 for r in group)
        hit = sum(r["simulated_cached_tokens"] for r in group) / tokens
        observed = sum(r["observed_cached_tokens"] or 0 for r in group) / tokens
        currencies = {r["currency"] for r in group}
        valued = len(currencies) == 1 and None not in currencies and all(r["cost_change"] is not None for r in group)
        change = sum(float(r["cost_change"]) for r in group) / tokens * 1e6 if valued else None
        return hit, observed, change, currencies.pop() if valued else None

    def size(name: str) -> float:
        return sum((r["cache_blocks"] or 0) * (r["caches"] or 1) for r in scenarios[name])

    lru = [k for k in scenarios if scenarios[k][0]["cache"] != "infinite"]
    best = min(lru or scenarios, key=lambda k: (-figures(k)[0], size(k), k))
    hit, observed, change, currency = figures(best)
    bound = next((k for k in scenarios if scenarios[k][0]["cache"] == "infinite" and k != best), None)
    beside = f"observed {fmt(observed, 'pct')}" + (f", infinite cache {fmt(figures(bound)[0], 'pct')}" if bound else "")
    cost = ("input cost change not valued" if change is None else
            f"input cost change {'+' if change > 0 else ''}{fmt(change, 'money_mtok', currency)} per 1M input tokens")
    return (f"Prefix-cache what-if, best configured cache {best}: {fmt(hit, 'pct')} of input cached ({beside}); {cost}."
            + _estimated(scenarios[best], best))


def _estimated(rows: list[Row], scenario: str) -> str:
    """A sentence when the scenario's figure on some deployment is a SHARDS estimate, not an exact replay
    (infra.cache_whatif_daily.method; docs/adr/0084-lru-caches-of-large-days-are-sampled.md)."""
    sampled = [r for r in rows if r.get("method") == "shards"]
    if not sampled:
        return ""
    rates = ", ".join(f"1/{round(1 / rate)}" for rate in sorted({r["sampling_rate"] for r in sampled}, reverse=True))
    replayed = sum(r.get("sampled_accesses") or 0 for r in sampled)
    accesses = sum(r.get("block_accesses") or 0 for r in sampled)
    return (f" {scenario} is an estimate from a SHARDS sample of the blocks (rate {rates}: {fmt(replayed, 'int')} of "
            f"{fmt(accesses, 'int')} block accesses replayed), not an exact replay.")


def growth_forecast(points: Sequence[tuple[date, float]], day: date, window_days: int = 28,
                    min_days: int = 14) -> dict[str, Any]:
    """Seed 002's Peak growth forecast: a least-squares line through the published days of the trailing
    `window_days` (calendar window, a missing day is absent, never a zero), given once `min_days` of them exist.

    Returns `days` (the count), and with enough: `slope_per_day`, `fitted` (the line at `day`), `weekly_growth`
    (slope x 7 / fitted) and `forecast` (the line `window_days` days after `day`).
    """
    used = sorted((d, v) for d, v in points if 0 <= (day - d).days < window_days and v is not None)
    out: dict[str, Any] = {"days": len(used)}
    if len(used) < min_days:
        return out
    xs = [(d - day).days for d, _ in used]
    ys = [v for _, v in used]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    fitted = my - slope * mx
    out.update(slope_per_day=slope, fitted=fitted, forecast=fitted + slope * window_days,
               weekly_growth=(slope * 7 / fitted) if fitted else None)
    return out


def _peak_history(review: Review, model: str) -> list[tuple[date, float]]:
    """The model's planning-peak output token rate per published day (its deployments' peaks summed)."""
    per_day: dict[date, float] = {}
    for r in review.plan_history:
        if r["model"] == model and r.get("peak_output_token_rate") is not None:
            per_day[r["day"]] = per_day.get(r["day"], 0.0) + r["peak_output_token_rate"]
    return sorted(per_day.items())


def hourly_findings(review: Review, model: str) -> list[str]:
    """What the hours show that the day's figures hide: bucket-hours that missed attainment (infra.slo_hourly) and
    the capacity-top hours, raw throughput up while SLO goodput fell (infra.goodput_hourly)."""
    out = []
    missed = [r for r in review.slo_hourly if r["model"] == model and r["isl_bucket"] != "all"
              and r.get("attainment_met") is False]
    if missed:
        shown = ", ".join(f"{r['hour']:02d}:00 {r['isl_bucket']} {fmt(r['attainment'], 'ratio')}"
                          for r in sorted(missed, key=lambda r: (r["hour"], r["isl_bucket"]))[:8])
        more = f" and {len(missed) - 8} more" if len(missed) > 8 else ""
        out.append(f"Bucket-hours below the attainment commitment: {shown}{more}.")
    elif any(r["model"] == model and r["isl_bucket"] != "all" and r.get("attainment_met") is not None
             for r in review.slo_hourly):
        out.append("Every judged bucket met its attainment commitment in every hour.")
    tops = sorted({r["hour"] for r in review.goodput if r["model"] == model and r.get("capacity_top")})
    if tops:
        out.append("Capacity-top hours (raw throughput up, SLO goodput down from the hour before): "
                   + ", ".join(f"{h:02d}:00" for h in tops) + ".")
    return out


def power_text(review: Review, cap: Row) -> str:
    """The baseline's measured figures: goodput per GPU and per watt on the power basis the day had, beside the
    nominal, and seed 003's warning when goodput per watt fell against the deployment's previous day while raw
    throughput rose (capacity bought by power, not efficiency)."""
    rows = sorted((r for r in review.gpu_usage_history if r["deployment_id"] == cap["deployment_id"]),
                  key=lambda r: r["day"])
    today = next((r for r in rows if r["day"] == review.day), None)
    if today is None:
        return ""
    basis = today["power_basis"]
    text = (f"; goodput {fmt(cap['goodput_per_gpu'], 'rate')} tok/s per GPU and "
            f"{fmt(today['goodput_per_watt'], 'rate')} tok/s per {'measured ' if basis != 'nominal' else ''}watt "
            f"({basis} power {fmt(today['power_w'], 'rate')} W mean"
            + (f", {fmt(today['gpus_measured'], 'int')} of {fmt(today['gpus'], 'gpus')} GPUs sampled"
               if basis != "nominal" else "") + f"; nominal {fmt(today['goodput_per_watt_nominal'], 'rate')})")
    before = [r for r in rows if r["day"] < review.day]
    warning = power_warning(before[-1] if before else None, today)
    return text + (f"; {warning}" if warning else "")


# How far goodput per watt must fall below the previous day's to be flagged: day-to-day noise in measured power
# moves it by a percent or two.
POWER_DROP = 0.05


def power_warning(previous: Row | None, today: Row) -> str | None:
    """Seed 003's sign of capacity bought by piling on power: goodput per watt more than POWER_DROP below the
    previous day's while raw throughput rose. None when it did not happen or cannot be told."""
    values = (previous or {}).get("goodput_per_watt"), today.get("goodput_per_watt")
    raw = (previous or {}).get("raw_throughput"), today.get("raw_throughput")
    if None in values or None in raw or not (values[1] < (1 - POWER_DROP) * values[0] and raw[1] > raw[0]):
        return None
    return (f"WARNING: goodput per watt fell from {fmt(values[0], 'rate')} to {fmt(values[1], 'rate')} while raw "
            f"throughput rose from {fmt(raw[0], 'rate')} to {fmt(raw[1], 'rate')} tok/s against {previous['day']}: "
            "the extra output was bought with power, not efficiency")


def template_table(review: Review, cap: Row) -> Table:
    """Seed 002's capacity review template for one deployment: one item per row, with its basis."""
    plan = _plan_of(review, cap["deployment_id"])
    policy = review.policy.get(cap["model"], {})
    inventory = review.deployments.get(cap["deployment_id"], {})
    currency = cap["currency"]
    tok = _tokens_of(review, cap["model"])
    buckets = ", ".join(f"{b['isl_bucket']} {fmt(b['ttft_limit_ms'], 'ms')}" for b in policy.get("isl_buckets", []))
    all_row = next((r for r in _slo_rows(review, cap["model"]) if r["isl_bucket"] == "all"), None)
    slo_met, misses = model_verdict(review, cap["model"])
    met = "—" if slo_met is None else ("met" if slo_met else "missed")
    slo = (f"compliant = success, TTFT within its ISL bucket's limit ({buckets}) and ITL ≤ "
           f"{fmt(policy.get('itl_limit_ms'), 'ms')}; attainment ≥ {policy.get('attainment_target', '—')} per bucket; "
           f"success rate ≥ {policy.get('success_rate_target', '—')}; P99 queue ≤ "
           f"{fmt(policy.get('queue_p99_ms'), 'ms')}, ITL ≤ {fmt(policy.get('itl_p99_ms'), 'ms')}, TPOT ≤ "
           f"{fmt(policy.get('tpot_p99_ms'), 'ms')} (SLO {cap['slo_version']}). The day: {met}"
           + (f" ({misses})" if misses else "")
           + (f"; P99 TTFT {fmt(all_row['ttft_p99_ms'], 'ms')}, TPOT {fmt(all_row['tpot_p99_ms'], 'ms')}, "
              f"E2E {fmt(all_row.get('e2e_p99_ms'), 'ms')}" if all_row else "") + ".")
    replicas = plan.get("gpus_deployed") and inventory.get("gpus_per_replica")
    slots = plan.get("slots_per_replica_used", inventory.get("slots_per_replica"))
    workload = (f"{cap['model']} on {configuration(cap, inventory)}"
                + (f" ({plan['gpus_deployed'] / inventory['gpus_per_replica']:g} replicas of "
                   f"{inventory['gpus_per_replica']} GPUs, {fmt(slots, 'rate')} slots each"
                   + (" measured at the highest load-test rate within SLO"
                      if plan.get("slots_per_replica_source") == "loadtest" else "")
                   + ")" if replicas else "")
                + f"; {fmt(plan.get('requests'), 'int')} requests, {fmt(cap['output_tokens'], 'tokens')} output "
                  f"tokens produced; ISL P50 {fmt(tok.get('isl_p50'), 'tokens')} / P99 "
                  f"{fmt(tok.get('isl_p99'), 'tokens')}, OSL P50 {fmt(tok.get('osl_p50'), 'tokens')} / P99 "
                  f"{fmt(tok.get('osl_p99'), 'tokens')} (the model's workload table); input "
                  f"{fmt(tok.get('input_total'), 'tokens')} total = {fmt(tok.get('input_cached'), 'tokens')} cached + "
                  f"{fmt(tok.get('input_recomputed'), 'tokens')} recomputed, overstatement "
                  f"{fmt(tok.get('input_overstatement'), 'rate')}×; "
                  f"{fmt(cap['mean_output_per_step'], 'rate')} output tokens per agent step "
                  f"({cap['mean_output_per_step_source']}), {fmt(cap['sessions'], 'int')} agent sessions")
    baseline = (f"{identity(cap)}; {fmt(cap['capacity_goodput_per_gpu'], 'rate')} tok/s per GPU under SLO, "
                f"{source_label(cap)}"
                + (f", highest load-test rate within SLO {fmt(cap['lambda_slo_max'], 'rate')} req/s"
                   if cap["lambda_slo_max"] else "")
                + f"; daily capacity {fmt(cap['daily_capacity_tokens'], 'tokens')} output tokens, utilization "
                  f"{fmt(cap['utilization'], 'pct')}; the day ran {fmt(cap['goodput_per_gpu'], 'rate')} tok/s per "
                  f"GPU and {fmt(cap.get('goodput_per_watt'), 'rate')} tok/s per watt under SLO; $/MTok under SLO "
                  f"{fmt(cap['cost_per_mtok_goodput'], 'money_mtok', currency)}, "
                  f"daily value {fmt(cap['daily_value'], 'money', currency)}, daily cost at capacity "
                  f"{fmt(cap['daily_cost_at_capacity'], 'money', currency)}; supported agent steps "
                  f"{fmt(cap['supported_agent_steps'], 'tokens')}; task attainment "
                  f"{fmt(cap['task_attainment'], 'ratio')} against the expected (the model's attainment to the "
                  "power of the mean steps per task) "
                  f"{fmt(cap['expected_task_attainment'], 'ratio')}"
                + power_text(review, cap))
    peak = _peak_text(review, cap["model"], plan)
    failure = (f"N-{plan.get('headroom_failure_replicas', '—')}: {plan.get('headroom_failure_replicas', '—')} "
               f"replica(s) out keep the SLO = {fmt(plan.get('headroom_failure_gpus'), 'gpus')} GPUs"
               + _failures_text(review, cap["model"]))
    lag = _lag_text(plan)
    headroom = (f"Erlang C plan: {fmt(plan.get('erlang_c_slots'), 'int')} slots for the peak's concurrency "
                f"(Little's law {fmt(plan.get('littles_law_concurrency'), 'rate')} in flight) = "
                f"{fmt(plan.get('replicas_needed_erlang'), 'int')} replica(s) = {fmt(plan.get('base_gpus'), 'gpus')} "
                f"GPUs, {fmt(plan.get('gpus_needed'), 'gpus')} with the headroom policy (the concurrency rule, for "
                f"comparison: {fmt(plan.get('replicas_needed_seed_rule'), 'int')} replica(s) at redundancy "
                f"{plan.get('seed_rule_redundancy', '—')}). Peak sizing: "
                f"{fmt(plan.get('peak_output_token_rate'), 'rate')} output tok/s at the peak / "
                f"{fmt(plan.get('capacity_goodput_per_gpu'), 'rate')} tok/s per GPU = "
                f"{fmt(plan.get('goodput_sizing_base_gpus'), 'gpus')} GPUs, "
                f"{fmt(plan.get('gpus_needed_goodput'), 'gpus')} with the headroom policy. Headroom policy: "
                f"scaling lag {fmt(plan.get('headroom_scaling_lag_pct'), 'pct')}, forecast error "
                f"{fmt(plan.get('headroom_forecast_error_pct'), 'pct')}, release "
                f"{fmt(plan.get('headroom_release_pct'), 'pct')}, jitter {fmt(plan.get('headroom_jitter_pct'), 'pct')}"
                f" ({fmt(plan.get('headroom_pct_total'), 'pct')} in all, each on top of the ones before; on the "
                f"Erlang C plan's base {fmt(plan.get('headroom_scaling_lag_gpus'), 'gpus')} + "
                f"{fmt(plan.get('headroom_forecast_error_gpus'), 'gpus')} + "
                f"{fmt(plan.get('headroom_release_gpus'), 'gpus')} + {fmt(plan.get('headroom_jitter_gpus'), 'gpus')}"
                f" GPUs) and {fmt(plan.get('headroom_failure_gpus'), 'gpus')} GPUs for failed replicas. "
                + (gpus_needed_line(review, plan) or f"GPUs needed {fmt(gpus_needed_of(plan), 'gpus')}."))
    validation = ("measured by a load test" if cap["capacity_source"] == "loadtest"
                  else "demonstrated from production logs" if cap["capacity_source"] == "demonstrated"
                  else "no capacity figure") + f": {cap['capacity_note'] or '—'}"
    validation += (f". Load-test run {cap['loadtest_run_id'] or 'none'}; figures published by Dagster run "
                   f"{review.published_run_id or '—'}, review written by run {review.run_id or '—'}; price "
                   f"version {cap.get('price_version') or '—'}, SLO version {cap['slo_version']}")
    return Table(f"Capacity review of {cap['deployment_id']} ({cap['model']})", ["item", "content"], [
        ["SLO", slo], ["Workload", workload], ["Baseline", baseline], ["Peak", peak], ["Failure", failure],
        ["Lag", lag], ["Headroom", headroom], ["Validation", validation],
    ])


def _peak_text(review: Review, model: str, plan: Row) -> str:
    """Seed 002's Peak: the planning peak, the peaks beyond the minute, how long bursts lasted, the load against
    capacity, and the growth forecast from the trailing 28 days."""
    basis = PEAK_BASIS.get(plan.get("peak_basis"), "—")
    hours = [r for r in review.load if r["model"] == model]
    burst = max(hours, key=lambda r: (r.get("burst_seconds") or 0, -r["hour"]), default=None)
    text = (f"{basis} {_hhmm(plan.get('peak_window_start'))}–{_hhmm(plan.get('peak_window_end'))} UTC: "
            f"{fmt(plan.get('peak_requests'), 'int')} requests, {fmt(plan.get('peak_arrival_rate'), 'rate')} req/s, "
            f"{fmt(plan.get('peak_output_token_rate'), 'rate')} output tok/s")
    if hours:
        def top(key: str) -> float:
            return max(r.get(key) or 0 for r in hours)

        text += (f"; busiest second {fmt(top('peak_second_arrival_rate'), 'rate')} "
                 f"req/s, busiest minute {fmt(top('peak_minute_arrival_rate'), 'rate')} req/s, "
                 f"{fmt(top('peak_minute_output_token_rate'), 'rate')} output and "
                 f"{fmt(top('peak_minute_input_token_rate'), 'rate')} input tok/s")
        if burst and burst.get("burst_seconds"):
            text += (f"; longest burst above the planning rate {burst['burst_seconds'] / 60:g} min from "
                     f"{burst['hour']:02d}:00")
    text += (f"; peak-to-mean {fmt(plan.get('peak_to_mean'), 'rate')}; "
             f"{fmt(plan.get('hours_over_capacity'), 'int')} hour(s) over capacity, largest backlog "
             f"{fmt(plan.get('max_backlog_tokens'), 'tokens')} tokens")
    forecast = growth_forecast(_peak_history(review, model), review.day)
    if "forecast" in forecast:
        growth = forecast["weekly_growth"]
        text += (f"; growth {'—' if growth is None else f'{growth:+.1%}'} a week over {forecast['days']} published "
                 f"days, peak forecast in 28 days {fmt(forecast['forecast'], 'rate')} output tok/s")
    else:
        text += (f"; growth forecast needs 14 published days in the last 28 ({forecast['days']} so far)")
    return text


def _failures_text(review: Review, model: str) -> str:
    hours = [r for r in review.load if r["model"] == model]
    if not hours or "timeout_requests" not in hours[0]:
        return ""
    total = {k: sum(r.get(k) or 0 for r in hours)
             for k in ("error_requests", "timeout_requests", "disconnected_requests", "rejected_requests")}
    return (f"; the day's failures: {total['timeout_requests']:,} timeouts, {total['disconnected_requests']:,} "
            f"disconnects, {total['error_requests']:,} errors, {total['rejected_requests']:,} rejected")


def _lag_text(plan: Row) -> str:
    if plan.get("lag_minutes") is None:
        return ("scale-out and warm-up time not configured (scale_out_minutes, warmup_minutes in deployments.yaml); "
                f"the policy's scaling lag {fmt(plan.get('headroom_scaling_lag_pct'), 'pct')} = "
                f"{fmt(plan.get('headroom_scaling_lag_gpus'), 'gpus')} GPUs")
    return (f"scale-out {fmt(plan.get('scale_out_minutes'), 'rate')} + warm-up "
            f"{fmt(plan.get('warmup_minutes'), 'rate')} = {plan['lag_minutes']} min; over that time before the "
            f"peak the output rate grows by "
            f"{fmt(plan.get('lag_growth_token_rate'), 'rate')} tok/s = {fmt(plan.get('lag_gpus'), 'gpus')} GPUs at "
            f"{fmt(plan.get('capacity_goodput_per_gpu'), 'rate')} tok/s per GPU, against the policy's scaling lag "
            f"{fmt(plan.get('headroom_scaling_lag_pct'), 'pct')} = {fmt(plan.get('headroom_scaling_lag_gpus'), 'gpus')}"
            " GPUs")


def _measured_items(review: Review, cap: Row) -> list[tuple[str, str]]:
    today = next((r for r in review.gpu_usage_history
                  if r["deployment_id"] == cap["deployment_id"] and r["day"] == review.day), None)
    if today is None:
        return []
    return [(f"goodput per watt, {today['power_basis']} power (tok/s per W)", fmt(today["goodput_per_watt"], "rate")),
            (f"mean total GPU power, {today['power_basis']} (W)", fmt(today["power_w"], "rate"))]


def figures_table(review: Review, cap: Row) -> Table:
    """One published figure per row, as it was published, so the review can be signed figure by figure."""
    plan = _plan_of(review, cap["deployment_id"])
    currency = cap["currency"]
    items: list[tuple[str, str]] = [
        ("capacity goodput per GPU (tok/s)", fmt(cap["capacity_goodput_per_gpu"], "rate")),
        ("capacity source", source_label(cap)),
        ("highest load-test rate within SLO (req/s)", fmt(cap["lambda_slo_max"], "rate")),
        ("goodput per GPU, the day (tok/s)", fmt(cap["goodput_per_gpu"], "rate")),
        ("goodput per watt, the day (tok/s per W)", fmt(cap.get("goodput_per_watt"), "rate")),
        *_measured_items(review, cap),
        ("daily capacity (output tokens)", fmt(cap["daily_capacity_tokens"], "tokens")),
        ("output produced (tokens)", fmt(cap["output_tokens"], "tokens")),
        ("utilization", fmt(cap["utilization"], "pct")),
        ("$/MTok under SLO", fmt(cap["cost_per_mtok_goodput"], "money_mtok", currency)),
        ("daily value", fmt(cap["daily_value"], "money", currency)),
        ("daily cost at capacity", fmt(cap["daily_cost_at_capacity"], "money", currency)),
        ("supported agent steps", fmt(cap["supported_agent_steps"], "tokens")),
        ("task attainment", fmt(cap["task_attainment"], "ratio")),
        ("expected task attainment (attainment to the power of mean steps)",
         fmt(cap["expected_task_attainment"], "ratio")),
        ("peak arrival rate (req/s)", fmt(plan.get("peak_arrival_rate"), "rate")),
        ("peak output token rate (tok/s)", fmt(plan.get("peak_output_token_rate"), "rate")),
        ("Little's law concurrency", fmt(plan.get("littles_law_concurrency"), "rate")),
        ("Erlang C slots", fmt(plan.get("erlang_c_slots"), "int")),
        ("slots per replica (source)", f"{fmt(plan.get('slots_per_replica_used'), 'rate')} "
                                       f"({plan.get('slots_per_replica_source') or '—'})"),
        ("replicas (Erlang C plan / concurrency rule)",
         f"{fmt(plan.get('replicas_needed_erlang'), 'int')} / {fmt(plan.get('replicas_needed_seed_rule'), 'int')}"),
        ("Erlang C plan with headroom (GPUs)", fmt(plan.get("gpus_needed"), "gpus")),
        ("peak sizing with headroom (GPUs)", fmt(plan.get("gpus_needed_goodput"), "gpus")),
        ("peak sizing minus Erlang C plan (GPUs)", fmt(plan.get("gpus_needed_difference"), "gpus")),
        ("GPUs needed (the larger, with headroom)", fmt(gpus_needed_of(plan), "gpus")),
        ("GPUs needed set by", sizing_text(plan)),
        ("GPUs deployed", fmt(plan.get("gpus_deployed"), "gpus")),
        ("GPU surplus against GPUs needed (negative: deficit)",
         fmt(plan.get("gpu_surplus_binding", plan.get("gpu_surplus")), "gpus")),
        ("lag (min) / lag GPUs", f"{fmt(plan.get('lag_minutes'), 'int')} / {fmt(plan.get('lag_gpus'), 'gpus')}"),
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


def _whole_row(review: Review, model: str) -> Row | None:
    return next((r for r in _slo_rows(review, model) if r["isl_bucket"] == "all"), None)


def _day_requests(review: Review, model: str) -> int | None:
    """The model's requests on the day: infra.token_split_daily's count (every model in force has a row, zeros when
    none came), else the effective requests of its infra.slo_daily 'all' row; None when neither was given."""
    tok = _tokens_of(review, model)
    if tok.get("requests") is not None:
        return tok["requests"]
    whole = _whole_row(review, model)
    return None if whole is None else whole.get("effective_requests")


def _all_models(review: Review) -> set[str]:
    """Every model the day's rows name: the GPU deployments in force and whatever had requests or cost."""
    return ({c["model"] for c in review.capacity} | {r["model"] for r in review.tokens}
            | {r["model"] for r in review.slo} | {r["model"] for r in review.load}
            | {r["model"] for r in review.cost_history if r["day"] == review.day})


def _models(review: Review) -> list[str]:
    """The GPU-served models the review judges: those with a deployment in infra.capacity_daily (a row per GPU
    deployment in force) and requests on the day. A model without a request is named in one line instead."""
    return sorted(m for m in {c["model"] for c in review.capacity} if _day_requests(review, m) != 0)


def _hosted_models(review: Review) -> list[str]:
    """The hosted-API models the review judges: a model with rows but no GPU deployment in infra.capacity_daily
    (which has a row for every GPU deployment in force) is served by provider-managed deployments (kind api) only;
    those with requests on the day."""
    gpu = {c["model"] for c in review.capacity}
    return sorted(m for m in _all_models(review) - gpu if _day_requests(review, m) != 0)


def _idle_models(review: Review) -> list[str]:
    return sorted(m for m in _all_models(review) if _day_requests(review, m) == 0)


def _latency_logged(review: Review, model: str) -> bool:
    """Whether the model's logs carry latency: usage-only logs (a hosted API's usage export) leave TTFT, queue and
    ITL NULL, so no request is judged against the TTFT limits and attainment is NULL."""
    return any(r.get("ttft_p99_ms") is not None or r.get("attainment") is not None or r.get("judged_requests")
               for r in _slo_rows(review, model))


def idle_line(review: Review) -> str | None:
    """One line naming the models in force without a request on the day (GPU ones with their GPUs in force)."""
    idle = _idle_models(review)
    if not idle:
        return None
    gpus: dict[str, float] = {}
    for c in review.capacity:
        if c.get("gpus") is not None:
            gpus[c["model"]] = gpus.get(c["model"], 0.0) + c["gpus"]
    gpu = {c["model"] for c in review.capacity}
    named = [f"{m} ({fmt(gpus[m], 'gpus')} GPUs in force)" if m in gpus else m if m in gpu
             else f"{m} (provider-managed)" for m in idle]
    return (f"No request reached {', '.join(named)} on this day: not judged, left out of the verdict and the model "
            "sections.")


def verdict_notes(review: Review) -> list[str]:
    """Why the verdict has no GPU rows, when it has none, and the models without a request."""
    out = []
    if not _models(review):
        if not _all_models(review):
            out.append("No published rows for this day: no deployment was in force and no request came, so there "
                       "is nothing to judge.")
        elif not review.capacity:
            out.append("No GPU deployment was in force on this day (no infra.capacity_daily rows): "
                       + ("the review is of the hosted-API traffic alone." if _hosted_models(review)
                          else "no GPU verdict."))
        elif all(_day_requests(review, m) == 0 for m in _all_models(review)):
            out.append("No request reached any model on this day: nothing to judge.")
    line = idle_line(review)
    if line:
        out.append(line)
    return out


SUMMARY_NOTE = ("Capacity per configuration: no capacity rows for this day (infra.capacity_daily), as no GPU "
                "deployment was in force.")
HOSTED_SUMMARY_NOTE = " A hosted-API model has no capacity figure: its capacity is provider-managed."


def cost_notes(review: Review) -> list[str]:
    """Why the $/MTok chart is left out, or why it has no point on the day (finance.cost_per_mtok_daily)."""
    history = [r for r in review.cost_history if r["day"] <= review.day]
    today = [r for r in history if r["day"] == review.day]
    if not today:
        return ["No cost rows for this day: no bill and no priced API usage"
                + (", so there is no $/MTok chart." if not _cost_series(history) else "; the chart shows the days "
                   "before.")]
    if not _cost_series(history):
        return ["No $/MTok under SLO up to this day: no costed deployment had compliant output (or its cost is "
                "not known), so there is no $/MTok chart."]
    return []


def _cost_series(history: Sequence[Row]) -> bool:
    return any(r.get("cost_per_mtok_goodput") is not None for r in history)


def load_note(review: Review, model: str) -> str | None:
    if any(r["model"] == model for r in review.load):
        return None
    return f"No load chart for {model}: no infra.load_hourly rows this day."


def attainment_note(review: Review, model: str) -> str | None:
    """Why the attainment chart is left out: no SLO rows, no effective request, or no latency in the logs."""
    rows = _slo_rows(review, model)
    if any(r["isl_bucket"] != "all" and r.get("attainment") is not None for r in rows):
        return None
    if not rows:
        why = "no infra.slo_daily rows this day"
    elif not (_whole_row(review, model) or {}).get("effective_requests"):
        why = "no effective request on the day"
    elif not _latency_logged(review, model):
        why = "the logs carry no latency (TTFT and ITL are NULL: usage-only logs), so no request was judged"
    else:
        why = "no ISL bucket has an attainment figure"
    return f"No attainment chart for {model}: {why}."


def slo_notes(review: Review, model: str) -> list[str]:
    """Why the SLO table is left out, or what a day without latency judges."""
    if not _slo_rows(review, model):
        return [f"No SLO table for {model}: no infra.slo_daily rows this day."]
    if (_whole_row(review, model) or {}).get("effective_requests") and not _latency_logged(review, model):
        return [f"{model}'s logs carry no latency (usage only: TTFT, queue and ITL are NULL): attainment is not "
                "measured, the success rate is judged alone."]
    return []


def token_parts(review: Review, model: str) -> list[Table | str]:
    """The workload and input tables, each left out with the reason when its rows are missing."""
    tok = _tokens_of(review, model)
    if not tok:
        return [f"No workload or input tables for {model}: no infra.token_split_daily row this day."]
    if tok.get("workload_requests") == 0:
        return [input_table(review, model),
                f"Workload of {model}: no request was served in full, so there are no ISL/OSL quantiles."]
    return [workload_table(review, model), input_table(review, model)]


# --- charts (inline SVG) -------------------------------------------------------------------------------------------

# A model's two charts share the page's width side by side (W each); the fleet's cost chart takes all of it (WIDE).
# The SVG scales to its column, so the viewBox width is the width it is drawn at on a 1400 px screen and the
# 12 px labels print at about 12 px.
W, H = 600, 260
WIDE = 1200
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


def _y_axis(lo: float, hi: float, label: str, formatter: Callable[[float], str], ticks: int = 4,
            width: int = W) -> list[str]:
    parts = []
    plot_h = H - TOP - BOTTOM
    for i in range(ticks + 1):
        value = lo + (hi - lo) * i / ticks
        y = TOP + plot_h * (1 - i / ticks)
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e7eb"/>')
        parts.append(_text(LEFT - 6, y + 4, formatter(value), anchor="end"))
    parts.append(_text(14, TOP + plot_h / 2, label, transform=f"rotate(-90 14 {TOP + plot_h / 2:.1f})"))
    return parts


NO_CAPACITY = "no capacity figure"
PROVIDER_MANAGED = "provider-managed: no capacity line"


def load_chart(model: str, hours: Sequence[Row], no_capacity: str = NO_CAPACITY) -> str:
    """Hourly demand (output token rate) as bars against the capacity token rate as a line; hours over capacity
    are shaded and their bars drawn in the warning colour. Without a capacity figure the legend says
    `no_capacity`."""
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
        legend = no_capacity
    body.append(_text(LEFT + plot_w / 2, H - 8, f"UTC hour — demand bars (red: over capacity), {legend}"))
    return _svg("load", f"Load against capacity, {model}", body)


def attainment_chart(model: str, rows: Sequence[Row], target: float | None) -> str:
    """Attainment per ISL bucket as bars against the commitment line; buckets not judged are drawn pale. Each value
    sits above its own bar and the commitment is named in the legend under the axis, so no label covers a bar."""
    buckets = [r for r in rows if r["isl_bucket"] != "all"]
    values = [r["attainment"] for r in buckets if r["attainment"] is not None]
    lo = min(values + ([target] if target is not None else []) + [1.0])
    lo = max(0.0, math.floor((lo - 0.01) * 20) / 20)
    height = H + 30
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = plot_w / max(len(buckets), 1)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - lo) / (1.0 - lo or 1.0))

    # Ticks at their exact value (0.9875, not 0.988, which no gridline is at).
    body = _y_axis(lo, 1.0, "attainment", lambda v: f"{v:.4f}".rstrip("0").rstrip("."))
    misses = [bucket_misses(r) for r in buckets]
    height += 14 * max((len(m) for m in misses), default=0)
    for i, row in enumerate(buckets):
        x = LEFT + i * slot
        verdict = bucket_verdict(row)
        value = row["attainment"]
        # The bucket's verdict in the SLO table (every commitment, not the attainment alone): a bucket that missed
        # on its success rate is red even with its attainment above the line, and says why under its bar.
        colour = "#cbd2d9" if verdict is None else PALETTE[2] if verdict else PALETTE[6]
        if value is not None:
            body.append(f'<rect x="{x + slot * 0.2:.1f}" y="{y(value):.1f}" width="{slot * 0.6:.1f}" '
                        f'height="{TOP + plot_h - y(value):.1f}" fill="{colour}"><title>'
                        + html.escape(f"{row['isl_bucket']}: " + ("not judged" if verdict is None else "met"
                                                                  if verdict else "missed " + ", ".join(misses[i])))
                        + "</title></rect>")
            body.append(_text(x + slot / 2, y(value) - 4, f"{value:.4f}"))
        note = "" if verdict is not None else " (not judged)"
        body.append(_text(x + slot / 2, H - BOTTOM + 14, f"{row['isl_bucket']}{note}"))
        body.append(_text(x + slot / 2, H - BOTTOM + 27, f"{fmt(row['effective_requests'], 'int')} requests",
                          class_="muted"))
        for n, missed in enumerate(misses[i]):
            body.append(_text(x + slot / 2, H - BOTTOM + 41 + 14 * n, missed, style=f"fill: {PALETTE[6]}"))
    if target is not None:
        body.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(target):.1f}" y2="{y(target):.1f}" '
                    f'stroke="{PALETTE[1]}" stroke-width="2" stroke-dasharray="5 3"/>')
        body.append(f'<line x1="{LEFT}" x2="{LEFT + 22}" y1="{height - 23}" y2="{height - 23}" '
                    f'stroke="{PALETTE[1]}" stroke-width="2" stroke-dasharray="5 3"/>')
        body.append(_text(LEFT + 28, height - 19, f"attainment commitment {target:g} (dashed); bar colour: the "
                                                  "bucket's verdict,", anchor="start"))
        body.append(_text(LEFT + 28, height - 5, "green met every commitment, red missed one (named under it), "
                                                 "pale not judged", anchor="start"))
    return _svg("attainment", f"Attainment by ISL bucket, {model}", body, height=height)


_BUCKET_COMMITMENTS = (("attainment_met", "attainment"), ("success_rate_met", "success rate"),
                       ("queue_p99_met", "P99 queue"), ("itl_p99_met", "P99 ITL"), ("tpot_p99_met", "P99 TPOT"))


def bucket_verdict(row: Row) -> bool | None:
    """A bucket's verdict as the SLO table prints it (all_met: every commitment), its attainment's where a row
    has no all_met."""
    return row["all_met"] if row.get("all_met") is not None else row.get("attainment_met")


def bucket_misses(row: Row) -> list[str]:
    """The commitments a bucket missed, in words ('success rate', 'P99 queue')."""
    return [label for key, label in _BUCKET_COMMITMENTS if row.get(key) is False]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values of a log axis from lo to hi (powers of ten): each power, with 2 and 5 between over 2 decades
    or less."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    return [m * 10.0 ** e for e in range(first, last + 1) for m in steps if lo <= m * 10.0 ** e <= hi]


def cost_chart(history: Sequence[Row], day: date) -> str:
    """$/MTok under SLO per deployment (and currency) over the published days up to `day`: money compares across
    models, so every configuration shares one chart. The x-axis is a date axis (a day not published is a gap, and
    the line is not drawn across it); when the series differ by 10x or more the y-axis is logarithmic, so that the
    cheaper models are not flattened against zero."""
    history = [r for r in history if r["day"] <= day]
    days = sorted({r["day"] for r in history})
    series: dict[tuple[str, str, str], dict[date, float]] = {}
    for r in history:
        if r["cost_per_mtok_goodput"] is not None:
            key = (r["model"], r["deployment_id"], r["currency"])
            series.setdefault(key, {})[r["day"]] = r["cost_per_mtok_goodput"]
    values = [v for s in series.values() for v in s.values()]
    positive = [v for v in values if v > 0]
    log = bool(positive) and len(positive) == len(values) and max(positive) >= 10 * min(positive)
    height = H + 18 * len(series)
    plot_w, plot_h = WIDE - LEFT - RIGHT, H - TOP - BOTTOM
    span = (days[-1] - days[0]).days if days else 0

    def x(d: date) -> float:
        return LEFT + (plot_w * (d - days[0]).days / span if span else plot_w / 2)

    if log:
        lo = 10.0 ** math.floor(math.log10(min(positive)))
        hi = 10.0 ** math.ceil(math.log10(max(positive)))

        def y(v: float) -> float:
            return TOP + plot_h * (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))

        body = []
        for tick in _log_ticks(lo, hi):
            body.append(f'<line x1="{LEFT}" x2="{WIDE - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
                        'stroke="#e4e7eb"/>')
            body.append(_text(LEFT - 6, y(tick) + 4, _tick(tick), anchor="end"))
        body.append(_text(14, TOP + plot_h / 2, "$/MTok under SLO (log scale)",
                          transform=f"rotate(-90 14 {TOP + plot_h / 2:.1f})"))
    else:
        top = _nice_max(max(values + [0.0]) * 1.05)

        def y(v: float) -> float:
            return TOP + plot_h * (1 - v / top)

        body = _y_axis(0, top, "$/MTok under SLO", _tick, width=WIDE)
    step = max(1, math.ceil((span + 1) / 8))
    for i in range(0, span + 1 if days else 0, step):
        d = days[0] + timedelta(days=i)
        body.append(_text(x(d), H - BOTTOM + 14, d.strftime("%m-%d")))
    # A deployment costed in no currency sorts first rather than failing against a named one.
    for n, ((model, deployment, currency), points) in enumerate(sorted(series.items(),
                                                                       key=lambda s: tuple(k or "" for k in s[0]))):
        colour = PALETTE[n % len(PALETTE)]
        ordered = sorted(points.items())
        # A line joins consecutive calendar days only: a missing day breaks it.
        runs: list[list[tuple[date, float]]] = []
        for d, v in ordered:
            if runs and (d - runs[-1][-1][0]).days == 1:
                runs[-1].append((d, v))
            else:
                runs.append([(d, v)])
        for run in runs:
            if len(run) > 1:
                coords = " ".join(f"{x(d):.1f},{y(v):.1f}" for d, v in run)
                body.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for d, v in ordered:
            body.append(f'<circle cx="{x(d):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}">'
                        f"<title>{html.escape(f'{d} {deployment}: {v:,.4f} {currency}')}</title></circle>")
        ly = H + 4 + 18 * n
        body.append(f'<rect x="{LEFT}" y="{ly:.1f}" width="12" height="4" fill="{colour}"/>')
        body.append(_text(LEFT + 18, ly + 5, f"{model} / {deployment} ({currency})", anchor="start"))
    if not series:
        body.append(_text(LEFT + plot_w / 2, TOP + plot_h / 2, "no cost per MTok under SLO published yet"))
    return _svg("cost", "$/MTok under SLO over time", body, width=WIDE, height=height)


# --- documents -----------------------------------------------------------------------------------------------------

INTRO = ("Every figure is bound to a model and its serving configuration (model and engine versions, GPU type, "
         "parallelism, quantization, cache policy): token counts of different models are never compared; money is. "
         "Capacity is SLO goodput per GPU (output tokens of compliant requests per second), from a verified load "
         "test of the same configuration or, as a lower bound, from the best production window in which every "
         "commitment held. GPUs needed is the larger of the Erlang C plan (the peak's concurrency) and the peak "
         "sizing (the peak's output tokens over the capacity per GPU), each with the headroom policy on top. A "
         "hosted-API "
         "model is provider-managed: it has no capacity figure and is judged on its SLO (as far as its logs carry "
         "latency) and its cost. Source: the published infra.capacity_daily, infra.capacity_plan_daily, "
         "infra.load_hourly, infra.slo_daily, infra.slo_hourly, infra.goodput_hourly, infra.token_split_daily, "
         "infra.cache_whatif_daily and finance.cost_per_mtok_daily (definitions: docs/metrics.md, sections 2-6).")
# Cells of these columns are coloured by their verdict word.
_VERDICT_COLUMNS = ("verdict", "SLO")


@dataclass(frozen=True)
class Section:
    """An HTML <section id=...> opening (`close` False) or closing; Markdown has none."""

    id: str
    close: bool = False


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    html_only: bool = False


@dataclass(frozen=True)
class Charts:
    """Figures (svg, caption) and, for the charts left out, the line saying why: HTML only, as Markdown has no
    charts."""

    figures: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Lede:
    text: str


@dataclass(frozen=True)
class SideBySide:
    """Tables the HTML sets side by side; Markdown prints them one after the other."""

    tables: list[Table]


# A note is a str: one line both renderings print (why a table or a chart is left out, a finding).
Block = Section | Heading | Charts | Lede | SideBySide | Table | str


def _model_head(review: Review, model: str, hosted: bool) -> list[Block]:
    """A model's charts, SLO table, hourly findings, workload and input tables: the same for GPU and hosted
    models, but that a hosted model's load has no capacity line."""
    policy = review.policy.get(model, {})
    hours = [r for r in review.load if r["model"] == model]
    rows = _slo_rows(review, model)
    figures, notes = [], []
    if (note := load_note(review, model)) is None:
        figures.append((load_chart(model, hours, PROVIDER_MANAGED if hosted else NO_CAPACITY),
                        "Demand (output tokens/s of requests that reached the model) per UTC hour "
                        + ("(provider-managed: no capacity line)." if hosted else
                           "against the capacity token rate (each model on its own scale).")))
    else:
        notes.append(note)
    if (note := attainment_note(review, model)) is None:
        figures.append((attainment_chart(model, rows, policy.get("attainment_target")),
                        "Attainment per ISL bucket against the commitment (pale: too few requests to judge)."))
    else:
        notes.append(note)
    heading = f"Model {model}" + (" (hosted API, provider-managed)" if hosted else "")
    out: list[Block] = [Section(f"model-{_anchor(model)}"), Heading(2, heading), Charts(figures, notes)]
    if rows:
        out.append(slo_table(review, model))
    out += slo_notes(review, model)
    out += hourly_findings(review, model)
    parts = token_parts(review, model)
    return out + [SideBySide([p for p in parts if isinstance(p, Table)]), *[p for p in parts if isinstance(p, str)]]


def _gpu_model_blocks(review: Review, model: str) -> list[Block]:
    out = _model_head(review, model, hosted=False)
    out.append(whatif_finding(review, model))
    for cap in [c for c in review.capacity if c["model"] == model]:
        inventory = review.deployments.get(cap["deployment_id"])
        out += [Section(f"deployment-{_anchor(cap['deployment_id'])}"),
                Heading(3, f"{cap['deployment_id']}: {configuration(cap, inventory)}"),
                template_table(review, cap), figures_table(review, cap), Section("", close=True)]
    out.append(Section("", close=True))
    return out


def _hosted_model_blocks(review: Review, model: str) -> list[Block]:
    """A hosted-API model's section: no capacity template or plan, as there is no GPU of ours to size; one line
    says so instead, with its deployments and the rate limits' use."""
    out = _model_head(review, model, hosted=True)
    if any(r["model"] == model for r in review.whatif):
        out.append(whatif_finding(review, model))
    else:
        out.append("Prefix-cache what-if: not replayed for a provider-managed model (its cache is the provider's).")
    deployments = sorted({r["deployment_id"] for r in review.cost_history
                          if r["day"] == review.day and r["model"] == model})
    limits = _rate_limit_text(review, model)
    out.append("No capacity: provider-managed" + (f" ({', '.join(deployments)})" if deployments else "")
               + ", so no GPU figure, capacity template or plan" + (f"; {limits}" if limits else "") + ".")
    out.append(Section("", close=True))
    return out


def document(review: Review) -> list[Block]:
    """The review in document order, for both renderings: its verdict first, then the summary, the cost trend and
    a section per model. A part without data is left out with one line saying why."""
    out: list[Block] = [Section("verdict")]
    if _models(review):
        out.append(verdict_table(review))
        out += gpus_needed_lines(review)
    if _hosted_models(review):
        out.append(hosted_verdict_table(review))
    out += verdict_notes(review)
    out += [Section("", close=True), Lede(INTRO), Heading(2, "Summary")]
    out.append(summary_table(review) if review.capacity else
               SUMMARY_NOTE + (HOSTED_SUMMARY_NOTE if _hosted_models(review) else ""))
    history = [r for r in review.cost_history if r["day"] <= review.day]
    charts = [(cost_chart(history, review.day), "Cost per million output tokens of compliant requests, per "
                                                "deployment, on every published day up to "
                                                f"{review.day.isoformat()} (a date axis: a day not published is a "
                                                "gap).")] if _cost_series(history) else []
    out += [Heading(2, "$/MTok under SLO over time", html_only=True), Charts(charts), *cost_notes(review)]
    for model in _models(review):
        out += _gpu_model_blocks(review, model)
    for model in _hosted_models(review):
        out += _hosted_model_blocks(review, model)
    return out


def _html_table(table: Table, css_class: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = []
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in table.numeric else ""
            if table.header[i] in _VERDICT_COLUMNS:
                cls = f' class="{"met" if cell == "met" else "missed" if cell == "missed" else "muted"}"'
            cells.append(f"<td{cls}>{html.escape(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    attr = f' class="{css_class}"' if css_class else ""
    return (f"<table{attr}><caption>{html.escape(table.caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def render_html(review: Review) -> str:
    """The review as one self-contained HTML page (inline CSS and SVG, nothing fetched), its verdict first."""
    title = f"Capacity review {review.day.isoformat()}"
    parts = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
             f"<style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)} (UTC)</h1>"]
    in_verdict = False
    for block in document(review):
        if isinstance(block, Section):
            in_verdict = block.id == "verdict"
            parts.append("</section>" if block.close else f'<section id="{html.escape(block.id)}">')
        elif isinstance(block, Heading):
            parts.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Charts):
            if block.figures:
                parts.append('<div class="charts">' + "".join(_figure(*f) for f in block.figures) + "</div>"
                             if len(block.figures) > 1 or block.notes else _figure(*block.figures[0]))
            parts += [_note(n) for n in block.notes]
        elif isinstance(block, Lede):
            parts.append(f'<p class="lede">{html.escape(block.text)}</p>')
        elif isinstance(block, SideBySide):
            if block.tables:
                parts.append('<div class="tables">' + "".join(_html_table(t) for t in block.tables) + "</div>")
        elif isinstance(block, Table):
            parts.append(_html_table(block, "verdict" if in_verdict else ""))
        else:
            parts.append(_note(block))
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
    """The review's tables and lines as Markdown (no charts), its verdict first."""
    parts = [f"# Capacity review {review.day.isoformat()} (UTC)", ""]
    for block in document(review):
        if isinstance(block, Heading) and not block.html_only:
            parts += [f"{'#' * block.level} {_md_cell(block.text)}", ""]
        elif isinstance(block, Lede):
            parts += [_md_cell(block.text), ""]
        elif isinstance(block, SideBySide):
            parts += [_md_table(t) for t in block.tables]
        elif isinstance(block, Table):
            parts.append(_md_table(block))
        elif isinstance(block, str):
            parts.append(_md_cell(block) + "\n")
    return "\n".join(parts)


def tables(review: Review) -> Iterable[Table]:
    """Every table of the review, in document order (the HTML and the Markdown print the same ones)."""
    for block in document(review):
        if isinstance(block, Table):
            yield block
        elif isinstance(block, SideBySide):
            yield from block.tables
