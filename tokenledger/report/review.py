"""The capacity review of one day, as a self-contained HTML page and as Markdown, rendered by Jinja2 templates
(tokenledger/report/templates/) from the day's published rows.

Pure functions over the day's published rows (`Review`): no I/O but the templates, no network. The page reads top
down: the verdict per deployment (infra.capacity_verdict_daily's words in their colour, both $/MTok, GPUs needed and
in force, hours over capacity, capacity basis, good tokens a day), one line per model answering how many good
tokens it can deliver a day, the cost per MTok over the days (one chart for every model: money compares across
models), then per model one screen: its load and attainment charts, its SLO per ISL bucket, and the rest (the
capacity template, the figures, workload, input, prefix-cache what-if) folded in `<details>`. A glossary at the end
defines every term a finance reader meets; the terms link to it. The HTML has inline CSS and inline SVG charts, no
script and no external reference; every piece of text is escaped. The Markdown has the same tables and lines without
the charts.

Every figure the review prints is a `Fig`: its text as `shown` formats it and the published cell it came from
(table, column, key), which the HTML carries as data attributes (`data-table`, `data-column`, `data-key`,
`data-format`), so that a reader, or a test, can trace any number to its cell.

The verdict is infra.capacity_verdict_daily's (sql/capacity/capacity_verdict_daily.sql): the review prints its
words and figures and decides none of them (docs/metrics.md, section 6). A model in force without a request on the
day, and any chart or table without data (no cost rows, no latency in usage-only logs, no what-if rows, no capacity
rows, an empty day), is left out with one line saying why.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from tokenledger.report.charts import (
    NO_CAPACITY,
    PROVIDER_MANAGED,
    attainment_chart,
    bucket_verdict,
    cost_chart,
    load_chart,
)

Row = Mapping[str, Any]

# The policy's peak_basis in words (the review and the plan's note).
PEAK_BASIS = {"busiest_5min": "busiest 5 minutes", "busiest_hour": "busiest hour"}
TEMPLATES = Path(__file__).parent / "templates"
# The verdict's four values (infra.capacity_verdict_daily.verdict), each printed in a colour of its own
# (templates/review.css: .v-ok, .v-policy, .v-short, .v-slo_missed), in words for the legend.
VERDICTS = (("ok", "ok"), ("policy", "policy: short only of the redundancy or headroom policy"),
            ("short", "short: the peak needs more GPUs than in force"), ("slo_missed", "SLO missed"))


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
    infra.capacity_verdict_daily rows (one per deployment), the verdict the review prints and never decides again;
    `sweep`: infra.loadtest_sweep_daily rows (the steps of the load test that speaks for each deployment);
    `work`: infra.capacity_model_daily rows (one per GPU deployment: its work model and its load test's likeness).
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
    # infra.gpu_memory_daily rows (one per GPU deployment): the memory budget each model's details print.
    memory: list[Row] = field(default_factory=list)
    sweep: list[Row] = field(default_factory=list)
    # infra.capacity_model_daily rows (one per GPU deployment): the work model and the load test checked against
    # production that each deployment's details print.
    work: list[Row] = field(default_factory=list)


# --- formatting -------------------------------------------------------------------------------------------------------

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


# The review's words for a sizing (infra.capacity_verdict_daily.gpus_needed_rule, the plan's binding_sizing).
SIZING_NAMES = {"erlang_c": "Erlang C plan", "goodput": "peak sizing"}


def shown(value: Any, kind: str = "number", currency: str | None = None) -> str:
    """A figure as the review prints it: `fmt`'s kinds and the review's own: text (as published), met (a
    commitment: met, missed, not judged), rule (a sizing in words), hour ('14:00'), hhmm (a time of day), g (a
    target as given: 0.99), times (an overstatement: 2.5×), to_one (a ratio: 26 : 1), signed_money_mtok (+0.0649
    USD), corr (a correlation, 2 decimals), minutes (seconds as minutes), one_in (a sampling rate: 1/9),
    gpus_short (2, 1.5), basis (the peak's basis in words), likeness (a load test's: representative,
    unrepresentative, not judged). A boolean prints as yes or no."""
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    if kind == "met":
        return "not judged" if missing else "met" if value else "missed"
    if kind == "likeness":  # a load test's likeness to production (infra.capacity_model_daily)
        return "not judged" if missing else "representative" if value else "unrepresentative"
    if missing:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if kind == "text":
        return str(value)
    if kind == "rule":
        return SIZING_NAMES.get(value, str(value))
    if kind == "basis":
        return PEAK_BASIS.get(value, str(value))
    if kind == "hour":
        return f"{int(value):02d}:00"
    if kind == "hhmm":
        return value.strftime("%H:%M")
    if kind == "g":
        return f"{float(value):g}"
    if kind == "times":
        return f"{value:,.1f}×"
    if kind == "to_one":
        return f"{value:,.0f} : 1"
    if kind == "signed_money_mtok":
        return ("+" if value > 0 else "") + fmt(value, "money_mtok", currency)
    if kind == "corr":
        return f"{value:.2f}"
    if kind == "minutes":
        return f"{value / 60:g} min"
    if kind == "one_in":
        return f"1/{round(1 / value)}"
    if kind == "gpus_short":
        return fmt(value, "gpus").rstrip("0").rstrip(".")
    return fmt(value, kind, currency)


# The published tables a figure comes from, with the columns that key a row of each (and `day`). `policy` is the
# SLO policy the day was judged by (its limits and targets), `run` the Dagster runs that published the day and
# wrote the review.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "infra.capacity_verdict_daily": ("model", "deployment_id"),
    "infra.capacity_daily": ("model", "deployment_id"),
    "infra.loadtest_sweep_daily": ("model", "deployment_id", "step_index"),
    "infra.capacity_plan_daily": ("model", "deployment_id"),
    "infra.gpu_memory_daily": ("model", "deployment_id"),
    "infra.capacity_model_daily": ("model", "deployment_id"),
    "infra.slo_daily": ("model", "isl_bucket"),
    "infra.slo_hourly": ("model", "hour", "isl_bucket"),
    "infra.goodput_hourly": ("model", "deployment_id", "hour"),
    "infra.load_hourly": ("model", "hour"),
    "infra.token_split_daily": ("model",),
    "infra.cache_whatif_daily": ("model", "deployment_id", "scenario"),
    "infra.gpu_usage_daily": ("deployment_id",),
    "finance.cost_per_mtok_daily": ("model", "deployment_id"),
    "policy": ("model", "isl_bucket"),
    "run": (),
}
# Tables whose rows of other days the review shows (the previous day's power): their figures name their day.
HISTORY_TABLES = {"infra.gpu_usage_daily"}


@dataclass(frozen=True)
class Fig:
    """A figure as printed and the published cell it came from: `table`, `column` and `key` (the row's key columns,
    in TABLE_KEYS' order, and its day when it is not the review's); `kind` and `currency` say how `shown` formats
    the cell into `text`. A `derived` figure is computed
    from published cells (its name says how) rather than being one. `verdict` is set on a verdict's words: its
    value (ok, policy, short, slo_missed) colours it."""

    text: str
    table: str | None = None
    column: str | None = None
    key: tuple[tuple[str, Any], ...] = ()
    kind: str = "number"
    currency: str | None = None
    derived: str | None = None
    verdict: str | None = None

    def __str__(self) -> str:
        return self.text

    def __html__(self) -> str:
        attrs = []
        if self.table is not None:
            values = dict(self.key)
            attrs += [("data-table", self.table), ("data-column", self.column or ""),
                      ("data-key", "|".join(str(values[k]) for k in TABLE_KEYS[self.table] if k in values)),
                      ("data-format", self.kind)]
            if "day" in values:
                attrs.append(("data-day", values["day"]))
            if self.currency:
                attrs.append(("data-currency", self.currency))
        if self.derived is not None:
            attrs.append(("data-derived", self.derived))
        if self.verdict is not None:
            attrs += [("class", f"v v-{self.verdict}"), ("data-verdict", self.verdict)]
        joined = "".join(f' {k}="{html.escape(str(v))}"' for k, v in attrs)
        return f"<span{joined}>{html.escape(self.text)}</span>"


def fig(row: Row | None, table: str, column: str, kind: str = "number", currency: str | None = None,
        text: str | None = None, verdict: str | None = None) -> Fig:
    """The cell `column` of a published `row` of `table`, shown as `kind` (or as `text` when the review words it)."""
    row = row or {}
    dated = ("day",) if table in HISTORY_TABLES else ()
    key = tuple((k, row[k]) for k in (*dated, *TABLE_KEYS[table]) if row.get(k) is not None)
    return Fig(shown(row.get(column), kind, currency) if text is None else text, table, column, key, kind, currency,
               verdict=verdict)


def derived(text: str, how: str) -> Fig:
    return Fig(text, derived=how)


@dataclass(frozen=True)
class Term:
    """A term of the glossary where it appears in the text: a link to its definition in the HTML."""

    text: str
    ref: str

    def __str__(self) -> str:
        return self.text

    def __html__(self) -> str:
        return f'<a class="term" href="#g-{html.escape(self.ref)}">{html.escape(self.text)}</a>'


class Text:
    """A line of text: plain strings, figures (`Fig`) and glossary terms (`Term`). str() is what Markdown prints,
    __html__ what the HTML does (each figure marked with its cell, each term a link)."""

    kind = "note"

    def __init__(self, *parts: Any) -> None:
        self.parts: list[Any] = []
        for part in parts:
            if isinstance(part, Text):
                self.parts += part.parts
            elif part is not None and part != "":
                self.parts.append(part)

    def __str__(self) -> str:
        return "".join(str(p) for p in self.parts)

    def __html__(self) -> str:
        return "".join(p.__html__() if hasattr(p, "__html__") else html.escape(str(p)) for p in self.parts)

    def __add__(self, other: Any) -> Text:
        return Text(self, other)

    def __radd__(self, other: Any) -> Text:
        return Text(other, self)

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"Text({str(self)!r})"

    def figs(self) -> list[Fig]:
        return [p for p in self.parts if isinstance(p, Fig)]


def join(parts: Iterable[Any], sep: str = ", ") -> Text:
    out: list[Any] = []
    for n, part in enumerate(parts):
        out += [sep, part] if n else [part]
    return Text(*out)


Cell = Fig | Text | Term | str


@dataclass(frozen=True)
class Head:
    """A column header, linked to the glossary when `term` names one of its entries."""

    text: str
    term: str | None = None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Table:
    """A table both templates print: a caption, a header and rows of cells (numbers right-aligned)."""

    caption: Text | str
    header: list[Head | str]
    rows: list[list[Cell]]
    numeric: set[int] = field(default_factory=set)
    css: str = ""
    kind: str = "table"

    def text_rows(self) -> list[list[str]]:
        """The rows as printed (each cell's text)."""
        return [[str(c) for c in row] for row in self.rows]

    def column(self, name: str) -> list[str]:
        i = [str(h) for h in self.header].index(name)
        return [str(row[i]) for row in self.rows]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


# --- what the day's rows hold -----------------------------------------------------------------------------------------

def _plan_of(review: Review, deployment_id: str) -> Row:
    return next((p for p in review.plan if p["deployment_id"] == deployment_id), {})


def _verdict_of(review: Review, deployment_id: str) -> Row:
    return next((v for v in review.verdict if v["deployment_id"] == deployment_id), {})


def _slo_rows(review: Review, model: str) -> list[Row]:
    return [r for r in review.slo if r["model"] == model]


def _whole_row(review: Review, model: str) -> Row | None:
    return next((r for r in _slo_rows(review, model) if r["isl_bucket"] == "all"), None)


def _tokens_of(review: Review, model: str) -> Row:
    return next((r for r in review.tokens if r["model"] == model), {})


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


def _policy_row(review: Review, model: str) -> dict[str, Any]:
    return {"model": model, **{k: v for k, v in review.policy.get(model, {}).items() if k != "isl_buckets"}}


def _pol(review: Review, model: str, column: str, kind: str = "number") -> Fig:
    """A limit or target of the model's SLO policy (the day's)."""
    return fig(_policy_row(review, model), "policy", column, kind)


# --- the configuration of a deployment --------------------------------------------------------------------------------

CAP = "infra.capacity_daily"
PLAN = "infra.capacity_plan_daily"
VERDICT = "infra.capacity_verdict_daily"
SLO = "infra.slo_daily"
TOKENS = "infra.token_split_daily"
LOAD = "infra.load_hourly"
WHATIF = "infra.cache_whatif_daily"
MEMORY = "infra.gpu_memory_daily"
WORK = "infra.capacity_model_daily"
SWEEP = "infra.loadtest_sweep_daily"


def configuration(cap: Row, inventory: Row | None = None) -> Text:
    """A deployment's configuration as one line: GPU type and count, parallelism, quantization, cache and engine."""
    text = Text(fig(cap, CAP, "gpu_type", "text"), " × ", fig(cap, CAP, "gpus", "gpus_short"), " GPUs, TP ",
                fig(cap, CAP, "tp", "text"), ", PP ", fig(cap, CAP, "pp", "text"), ", ",
                fig(cap, CAP, "quantization", "text"))
    if cap.get("cache_policy"):
        text += Text(", cache ", fig(cap, CAP, "cache_policy", "text"))
    elif (inventory or {}).get("cache_policy"):
        text += Text(", cache ", inventory["cache_policy"])
    if cap.get("engine"):
        text += Text(", ", fig(cap, CAP, "engine", "text"))
        if cap.get("engine_version"):
            text += Text(" ", fig(cap, CAP, "engine_version", "text"))
    return text


def identity(cap: Row) -> Text:
    """The model and engine versions the figure is bound to, 'not declared' where the inventory is silent."""
    engine = (join([fig(cap, CAP, k, "text") for k in ("engine", "engine_version") if cap.get(k)], " ")
              if cap.get("engine") or cap.get("engine_version") else "not declared")
    version = fig(cap, CAP, "model_version", "text") if cap.get("model_version") else "not declared"
    return Text("model ", fig(cap, CAP, "model", "text"), " version ", version, ", engine ", engine)



# --- the verdict: infra.capacity_verdict_daily's, printed, never decided here -----------------------------------------

def _judged_verdicts(review: Review) -> list[Row]:
    """The verdict rows of the models the review judges (requests on the day): GPU deployments first, then hosted
    ones, each by model and deployment."""
    gpu, hosted = set(_models(review)), set(_hosted_models(review))
    rows = [v for v in review.verdict if v["model"] in gpu | hosted]
    return sorted(rows, key=lambda v: (v["model"] not in gpu, v["model"], v["deployment_id"]))


def _cap_of(review: Review, deployment_id: str) -> Row | None:
    return next((c for c in review.capacity if c["deployment_id"] == deployment_id), None)


def verdict_table(review: Review) -> Table:
    """The answer first: per deployment (hosted-API ones too) the verdict in words and in its colour, $/MTok
    delivered and under SLO, the good output tokens it can deliver a day, GPUs needed against GPUs in force, the
    hours over capacity and the capacity basis. Every figure and word is infra.capacity_verdict_daily's but the
    daily capacity (infra.capacity_daily's)."""
    rows = []
    for v in _judged_verdicts(review):
        currency = v.get("currency")
        api = v.get("kind") == "api"
        cap = _cap_of(review, v["deployment_id"])
        under_slo: Cell = fig(v, VERDICT, "cost_per_mtok_goodput", "money_mtok", currency)
        if v.get("cost_per_mtok_goodput") is None and not _latency_logged(review, v["model"]):
            under_slo = Text(under_slo, " (no latency logged)")
        rows.append([
            fig(v, VERDICT, "model", "text"), fig(v, VERDICT, "deployment_id", "text"),
            fig(v, VERDICT, "verdict_text", "text", verdict=v["verdict"]),
            fig(v, VERDICT, "cost_per_mtok_delivered", "money_mtok", currency), under_slo,
            "provider-managed" if api else fig(cap, CAP, "daily_capacity_tokens", "tokens"),
            "provider-managed" if api else Text(fig(v, VERDICT, "gpus_needed", "gpus"), " / ",
                                                fig(v, VERDICT, "gpus_in_force", "gpus")),
            "—" if api else fig(v, VERDICT, "hours_over_capacity", "int"),
            fig(v, VERDICT, "capacity_basis", "text"),
        ])
    return Table("Verdict per deployment", [
        "model", "deployment", Head("verdict", "verdict"), Head("$/MTok delivered", "mtok-delivered"),
        Head("$/MTok under SLO (realized)", "mtok-under-slo"), Head("good tokens a day", "daily-capacity"),
        Head("GPUs needed / in force", "gpus-needed"), Head("hours over capacity", "hours-over-capacity"),
        Head("capacity basis", "capacity-basis")], rows, numeric={3, 4, 5, 6, 7}, css="verdict")


def answer_lines(review: Review) -> list[Text]:
    """Per deployment judged, one line answering the two questions: how many good output tokens it can deliver a day
    within its SLO (infra.capacity_daily's daily capacity, 'at least' on a demonstrated lower bound, 'about' on an
    unverified load test) and what a million of them cost (infra.capacity_verdict_daily's $/MTok under SLO)."""
    out = []
    several = {m for m in {v["model"] for v in review.verdict}
               if sum(1 for v in review.verdict if v["model"] == m) > 1}
    for v in _judged_verdicts(review):
        currency = v.get("currency")
        who = Text(fig(v, VERDICT, "model", "text"),
                   Text(" on ", fig(v, VERDICT, "deployment_id", "text")) if v["model"] in several else "", ": ")
        if v.get("cost_per_mtok_goodput") is not None:
            cost = Text(fig(v, VERDICT, "cost_per_mtok_goodput", "money_mtok", currency),
                        " per million good tokens (realized)")
        elif not _latency_logged(review, v["model"]):
            cost = Text("no latency logged, so no token is judged good (",
                        fig(v, VERDICT, "cost_per_mtok_delivered", "money_mtok", currency), " per million delivered)")
        else:
            cost = Text("no $/MTok under SLO (no cost or no compliant token)")
        if v.get("kind") == "api":
            out.append(Text(who, "provider-managed, its capacity is the provider's; ", cost, "."))
            continue
        cap = _cap_of(review, v["deployment_id"]) or {}
        if cap.get("daily_capacity_tokens") is None:
            out.append(Text(who, "good tokens a day not known (no capacity figure); ", cost, "."))
            continue
        bound = {"demonstrated": "at least ", "loadtest": "" if cap.get("capacity_verified") else "about "}.get(
            cap.get("capacity_source"), "")
        gpus = "GPU" if cap.get("gpus") == 1 else "GPUs"
        at_capacity = (Text(", ", fig(cap, CAP, "cost_per_mtok_at_capacity", "money_mtok", currency), " at capacity")
                       if cap.get("cost_per_mtok_at_capacity") is not None else "")
        out.append(Text(who, bound, fig(cap, CAP, "daily_capacity_tokens", "tokens"), " ",
                        Term("good output tokens a day", "daily-capacity"), " on ", fig(cap, CAP, "gpus", "gpus_short"),
                        f" {gpus} (", fig(cap, CAP, "utilization", "pct"), " used); ", cost, at_capacity, "."))
    return out


def idle_line(review: Review) -> Text | None:
    """One line naming the models in force without a request on the day (GPU ones with their GPUs in force)."""
    idle = _idle_models(review)
    if not idle:
        return None
    gpu = {c["model"] for c in review.capacity}
    named = []
    for m in idle:
        caps = [c for c in review.capacity if c["model"] == m and c.get("gpus") is not None]
        if len(caps) == 1:
            named.append(Text(m, " (", fig(caps[0], CAP, "gpus", "gpus"), " GPUs in force)"))
        else:
            named.append(Text(m) if m in gpu else Text(m, " (provider-managed)"))
    return Text("No request reached ", join(named), " on this day: not judged, left out of the verdict and the model "
                                                    "sections.")


def verdict_notes(review: Review) -> list[Text | str]:
    """Why the verdict has no rows, when it has none, and the models without a request."""
    out: list[Text | str] = []
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


# --- SLO per ISL bucket -----------------------------------------------------------------------------------------------

def slo_table(review: Review, model: str) -> Table:
    """The commitments per ISL bucket beside what the day measured (infra.slo_daily): TTFT limit, requests,
    attainment, success rate, TTFT P99 and the bucket's verdict; a bucket with too few judged requests keeps its
    figures and says 'too few requests to judge (40 of 50)', never 'missed'. The P99s of queue, ITL, TPOT and E2E
    are `latency_table`'s."""
    policy = review.policy.get(model, {})
    limits = {b["isl_bucket"]: b for b in policy.get("isl_buckets", [])}
    rows = []
    for r in _slo_rows(review, model):
        bucket = limits.get(r["isl_bucket"])
        rows.append([
            fig(r, SLO, "isl_bucket", "text"),
            fig({"model": model, **bucket}, "policy", "ttft_limit_ms", "ms") if bucket is not None else "—",
            fig(r, SLO, "effective_requests", "int"), fig(r, SLO, "attainment", "ratio"),
            fig(r, SLO, "success_rate", "ratio"), fig(r, SLO, "ttft_p99_ms", "ms"), _bucket_verdict_cell(r),
        ])
    commitments = [Text(Term("attainment", "attainment"), " ≥ ", _pol(review, model, "attainment_target", "g"),
                        " per bucket")] if policy.get("attainment_target") is not None else []
    if policy.get("success_rate_target") is not None:
        commitments.append(Text("success rate ≥ ", _pol(review, model, "success_rate_target", "g")))
    caption = Text("SLO", Text(": ", join(commitments)) if commitments else f" of {model}")
    return Table(caption, [Head("ISL bucket", "isl-bucket"), "TTFT limit", "requests", Head("attainment", "attainment"),
                           "success rate", Head("TTFT P99", "latency"), Head("verdict", "not-judged")], rows,
                 numeric={1, 2, 3, 4, 5}, css="slo")


def _bucket_verdict_cell(row: Row) -> Cell:
    """A bucket's verdict in the SLO table: met, missed, or for a bucket with judged requests under the policy's
    minimum 'too few requests to judge (40 of 50)' (its figures stay in the row, its requests in the 'all' row); a
    bucket without a judged request (none came, or no latency logged) 'not judged'."""
    if (row["isl_bucket"] != "all" and row.get("judged") is False and row.get("judged_requests")
            and row.get("min_requests_per_bucket") is not None):
        return Text("too few requests to judge (", fig(row, SLO, "judged_requests", "int"), " of ",
                    fig(row, SLO, "min_requests_per_bucket", "int"), ")")
    return fig(row, SLO, "all_met", "met", text=shown(bucket_verdict(row), "met"))


def latency_table(review: Review, model: str) -> Table:
    """The day's P99s per ISL bucket beyond TTFT (infra.slo_daily) against the policy's limits."""
    rows = [[fig(r, SLO, "isl_bucket", "text"), fig(r, SLO, "queue_p99_ms", "ms"), fig(r, SLO, "itl_p99_ms", "ms"),
             fig(r, SLO, "tpot_p99_ms", "ms"), fig(r, SLO, "e2e_p99_ms", "ms")] for r in _slo_rows(review, model)]
    limits = join(Text(name, " ≤ ", _pol(review, model, column, "ms"))
                  for name, column in (("queue", "queue_p99_ms"), ("ITL", "itl_p99_ms"), ("TPOT", "tpot_p99_ms"))
                  if review.policy.get(model, {}).get(column) is not None)
    return Table(Text(f"P99 latency of {model}", Text(" (limits: ", limits, ")") if limits.parts else ""),
                 ["ISL bucket", "queue P99", "ITL P99", "TPOT P99", "E2E P99"], rows, numeric={1, 2, 3, 4})


def slo_notes(review: Review, model: str) -> list[str]:
    """Why the SLO table is left out, or what a day without latency judges."""
    if not _slo_rows(review, model):
        return [f"No SLO table for {model}: no infra.slo_daily rows this day."]
    if (_whole_row(review, model) or {}).get("effective_requests") and not _latency_logged(review, model):
        return [f"{model}'s logs carry no latency (usage only: TTFT, queue and ITL are NULL): attainment is not "
                "measured (no attainment chart), the success rate is judged alone."]
    return []


def hourly_findings(review: Review, model: str) -> list[Text]:
    """What the hours show that the day's figures hide: bucket-hours that missed attainment (infra.slo_hourly) and
    the capacity-top hours, raw throughput up while SLO goodput fell (infra.goodput_hourly). A day without a missed
    bucket-hour says nothing: a sentence that all hours met would stand beside a day that missed on another
    figure."""
    out = []
    missed = sorted((r for r in review.slo_hourly if r["model"] == model and r["isl_bucket"] != "all"
                     and r.get("attainment_met") is False), key=lambda r: (r["hour"], r["isl_bucket"]))
    if missed:
        shown_ = join(Text(fig(r, "infra.slo_hourly", "hour", "hour"), " ",
                           fig(r, "infra.slo_hourly", "isl_bucket", "text"), " ",
                           fig(r, "infra.slo_hourly", "attainment", "ratio")) for r in missed[:8])
        more = f" and {len(missed) - 8} more" if len(missed) > 8 else ""
        out.append(Text("Bucket-hours below the attainment commitment: ", shown_, more, "."))
    tops = sorted((r for r in review.goodput if r["model"] == model and r.get("capacity_top")),
                  key=lambda r: (r["hour"], r.get("deployment_id") or ""))
    if tops:
        out.append(Text("Capacity-top hours (raw throughput up, SLO goodput down from the hour before): ",
                        join(fig(r, "infra.goodput_hourly", "hour", "hour") for r in tops), "."))
    return out


# --- workload, input, prefix-cache what-if ----------------------------------------------------------------------------

def workload_table(review: Review, model: str) -> Table:
    """The ISL and OSL distributions of the requests served in full (quantiles)."""
    tok = _tokens_of(review, model)
    rows = []
    for name, key in (("ISL (input tokens)", "isl"), ("OSL (output tokens)", "osl")):
        rows.append([name, fig(tok, TOKENS, f"{key}_mean", "tokens"),
                     *[fig(tok, TOKENS, f"{key}_p{q}", "tokens") for q in (10, 50, 90, 99)],
                     fig(tok, TOKENS, f"{key}_max", "tokens")])
    caption = Text(f"Workload of {model}: ", fig(tok, TOKENS, "workload_requests", "int"), " requests served in full",
                   Text(", ISL-OSL correlation ", fig(tok, TOKENS, "isl_osl_correlation", "corr"))
                   if tok.get("isl_osl_correlation") is not None else "")
    return Table(caption, ["length", "mean", "P10", "P50", "P90", "P99", "max"], rows, numeric={1, 2, 3, 4, 5, 6})


def input_table(review: Review, model: str) -> Table:
    """Input three ways (total, cached, recomputed) and how much a total-only report overstates input compute."""
    tok = _tokens_of(review, model)
    return Table(f"Input tokens of {model}, three figures together", [
        "input total", Head("cached", "cached-input"), Head("recomputed", "cached-input"), "cache hit ratio",
        Head("overstatement (total / recomputed)", "overstatement"), "input : output"], [[
            fig(tok, TOKENS, "input_total", "tokens"), fig(tok, TOKENS, "input_cached", "tokens"),
            fig(tok, TOKENS, "input_recomputed", "tokens"), fig(tok, TOKENS, "cache_hit_ratio", "pct"),
            fig(tok, TOKENS, "input_overstatement", "times"), fig(tok, TOKENS, "input_output_ratio", "to_one")]],
        numeric={0, 1, 2, 3, 4, 5})


def token_parts(review: Review, model: str) -> list[Table | str]:
    """The workload and input tables, each left out with the reason when its rows are missing."""
    tok = _tokens_of(review, model)
    if not tok:
        return [f"No workload or input tables for {model}: no infra.token_split_daily row this day."]
    if tok.get("workload_requests") == 0:
        return [input_table(review, model),
                f"Workload of {model}: no request was served in full, so there are no ISL/OSL quantiles."]
    return [workload_table(review, model), input_table(review, model)]


def _whatif_size(row: Row) -> float:
    return (row.get("cache_blocks") or 0) * (row.get("caches") or 1)


def whatif_findings(review: Review, model: str) -> list[Text | str]:
    """Per deployment of the model, one line from infra.cache_whatif_daily: the input share the best configured
    prefix cache (the LRU cache with the highest hit ratio, the fewest blocks on a tie; the infinite cache is only
    their upper bound) would have found cached, against the share observed, and what it changes in input cost per
    1M input tokens. When the observed share beats every configured cache, the line says so instead of calling one
    of them best."""
    rows = [r for r in review.whatif if r["model"] == model]
    if not rows:
        return [f"Prefix-cache what-if: no infra.cache_whatif_daily rows for {model} this day, so no prefix-cache "
                "scenario was replayed."]
    out: list[Text | str] = []
    for deployment in sorted({r["deployment_id"] for r in rows}):
        mine = [r for r in rows if r["deployment_id"] == deployment and r.get("requests_simulated")]
        if not mine:
            out.append(Text("Prefix-cache what-if on ", deployment, ": no request of the day carried prefix block "
                                                                     "hashes, so none was replayed."))
            continue
        scenarios = [r for r in mine if r.get("simulated_hit_ratio") is not None and r.get("input_tokens")]
        if not scenarios:
            out.append(Text("Prefix-cache what-if on ", deployment, ": no configured scenario could be replayed "
                                                                     "(see the notes of infra.cache_whatif_daily)."))
            continue
        lru = [r for r in scenarios if r["cache"] != "infinite"]
        best = min(lru or scenarios, key=lambda r: (-r["simulated_hit_ratio"], _whatif_size(r), r["scenario"]))
        bound = next((r for r in scenarios if r["cache"] == "infinite" and r is not best), None)
        infinite = Text(", infinite cache ", fig(bound, WHATIF, "simulated_hit_ratio", "pct")) if bound else ""
        observed = best.get("observed_hit_ratio")
        who = Text("Prefix-cache what-if on ", fig(best, WHATIF, "deployment_id", "text"), ": ")
        if observed is not None and best["simulated_hit_ratio"] < observed:
            line = Text(who, "the observed ", fig(best, WHATIF, "observed_hit_ratio", "pct"), " of input cached beats "
                        "every configured cache (the best, ", fig(best, WHATIF, "scenario", "text"), ", ",
                        fig(best, WHATIF, "simulated_hit_ratio", "pct"), infinite, ").")
        else:
            change = (Text("input cost change ", fig(best, WHATIF, "cost_change_per_mtok_input", "signed_money_mtok",
                                                     best.get("currency")), " per 1M input tokens")
                      if best.get("cost_change_per_mtok_input") is not None else "input cost change not valued")
            line = Text(who, "the best configured cache, ", fig(best, WHATIF, "scenario", "text"),
                        ", would have cached ",
                        fig(best, WHATIF, "simulated_hit_ratio", "pct"), " of input (observed ",
                        fig(best, WHATIF, "observed_hit_ratio", "pct"), infinite, "); ", change, ".")
        out.append(line + _estimated(best))
    return out


def _estimated(row: Row) -> Text | str:
    """A sentence when the scenario's figure is a SHARDS estimate, not an exact replay
    (infra.cache_whatif_daily.method; docs/adr/0084-lru-caches-of-large-days-are-sampled.md)."""
    if row.get("method") != "shards":
        return ""
    return Text(" ", fig(row, WHATIF, "scenario", "text"), " is an estimate from a SHARDS sample of the blocks (rate ",
                fig(row, WHATIF, "sampling_rate", "one_in"), ": ", fig(row, WHATIF, "sampled_accesses", "int"), " of ",
                fig(row, WHATIF, "block_accesses", "int"), " block accesses replayed), not an exact replay.")


def whatif_table(review: Review, model: str) -> Table | None:
    """Every prefix-cache scenario replayed on the model's deployments, as published."""
    rows = sorted((r for r in review.whatif if r["model"] == model and r.get("requests_simulated")
                   and r.get("simulated_hit_ratio") is not None),
                  key=lambda r: (r["deployment_id"], r["cache"] == "infinite", _whatif_size(r), r["scenario"]))
    if not rows:
        return None
    return Table(f"Prefix-cache scenarios of {model}", [
        "deployment", "scenario", "input cached, simulated", "observed", "input cost change per 1M input tokens",
        "method"], [[fig(r, WHATIF, "deployment_id", "text"), fig(r, WHATIF, "scenario", "text"),
                     fig(r, WHATIF, "simulated_hit_ratio", "pct"), fig(r, WHATIF, "observed_hit_ratio", "pct"),
                     fig(r, WHATIF, "cost_change_per_mtok_input", "signed_money_mtok", r.get("currency")),
                     fig(r, WHATIF, "method", "text")] for r in rows], numeric={2, 3, 4})


# --- hosted-API models ------------------------------------------------------------------------------------------------

def _busiest(review: Review, model: str, column: str) -> Row | None:
    """The model's hour of infra.load_hourly with the highest `column` (the earliest on a tie), None without one."""
    hours = [r for r in review.load if r["model"] == model and r.get(column) is not None]
    return max(hours, key=lambda r: (r[column], -r["hour"]), default=None)


def rate_limit_text(review: Review, model: str) -> Text | str:
    """'busiest minute 50.0% of the RPM limit and 25.0% of the TPM limit, hours over a rate limit 12:00', or ''."""
    parts = [Text(fig(row, LOAD, column, "pct"), f" of the {name} limit (", fig(row, LOAD, "hour", "hour"), ")")
             for column, name in (("peak_minute_rpm_utilization", "RPM"), ("peak_minute_tpm_utilization", "TPM"))
             if (row := _busiest(review, model, column)) is not None]
    text = Text("busiest minute ", join(parts, " and ")) if parts else Text()
    over = sorted((r for r in review.load if r["model"] == model and r.get("over_rate_limit")),
                  key=lambda r: r["hour"])
    if over:
        text += Text(", " if parts else "", "hours over a rate limit: ", join(fig(r, LOAD, "hour", "hour")
                                                                              for r in over))
    return text if text.parts else ""


def hosted_table(review: Review, model: str) -> Table:
    """What the verdict row of a hosted-API model leaves to its section: requests, the latency its logs carry, input
    with its cache share, output, and the rate limits' use."""
    tok, whole = _tokens_of(review, model), _whole_row(review, model) or {}
    if not _latency_logged(review, model):
        latency: Cell = "not in the logs (usage only): success rate judged alone"
    else:
        latency = Text("TTFT P99 ", fig(whole, SLO, "ttft_p99_ms", "ms"), ", attainment ",
                       fig(whole, SLO, "attainment", "ratio"))
        if whole.get("itl_unknown_share"):
            latency += Text(" (ITL not logged for ", fig(whole, SLO, "itl_unknown_share", "pct"), ")")
    items: list[tuple[str, Cell]] = [
        ("requests", fig(tok, TOKENS, "requests", "int") if tok.get("requests") is not None
         else fig(whole, SLO, "effective_requests", "int")),
        ("latency", latency),
        ("input: total = cached + recomputed",
         Text(fig(tok, TOKENS, "input_total", "tokens"), " = ", fig(tok, TOKENS, "input_cached", "tokens"),
              " cached + ", fig(tok, TOKENS, "input_recomputed", "tokens"), " recomputed (",
              fig(tok, TOKENS, "cache_hit_ratio", "pct"), " cached)") if tok.get("input_total") is not None else "—"),
        ("output tokens", fig(tok, TOKENS, "output_tokens", "tokens")),
        ("busiest minute against the rate limits", rate_limit_text(review, model) or "—"),
    ]
    return Table(f"Figures of {model} (hosted API)", ["figure", "value"], [[k, v] for k, v in items], numeric={1})


# --- the capacity template of a deployment (folded) -------------------------------------------------------------------

def growth_forecast(points: Sequence[tuple[date, float]], day: date, window_days: int = 28,
                    min_days: int = 14) -> dict[str, Any]:
    """The peak growth forecast: a least-squares line through the published days of the trailing `window_days`
    (calendar window, a missing day is absent, never a zero), given once `min_days` of them exist.

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


def power_parts(review: Review, cap: Row) -> Text:
    """The baseline's measured figures: goodput per GPU and per watt on the power basis the day had, beside the
    nominal, and the warning when goodput per watt fell against the deployment's previous day while raw throughput
    rose (capacity bought by power, not efficiency)."""
    rows = sorted((r for r in review.gpu_usage_history if r["deployment_id"] == cap["deployment_id"]),
                  key=lambda r: r["day"])
    today = next((r for r in rows if r["day"] == review.day), None)
    if today is None:
        return Text()
    usage = "infra.gpu_usage_daily"
    basis = today["power_basis"]
    text = Text("; goodput ", fig(cap, CAP, "goodput_per_gpu", "rate"), " tok/s per GPU and ",
                fig(today, usage, "goodput_per_watt", "rate"),
                f" tok/s per {'measured ' if basis != 'nominal' else ''}watt (",
                fig(today, usage, "power_basis", "text"),
                " power ", fig(today, usage, "power_w", "rate"), " W mean")
    if basis != "nominal":
        text += Text(", ", fig(today, usage, "gpus_measured", "int"), " of ", fig(today, usage, "gpus", "gpus"),
                     " GPUs sampled")
    text += Text("; nominal ", fig(today, usage, "goodput_per_watt_nominal", "rate"), ")")
    before = [r for r in rows if r["day"] < review.day]
    warning = _power_warning(before[-1] if before else None, today)
    return text + (Text("; ", warning) if warning else "")


def power_text(review: Review, cap: Row) -> str:
    """`power_parts` as plain text."""
    return str(power_parts(review, cap))


# How far goodput per watt must fall below the previous day's to be flagged: day-to-day noise in measured power
# moves it by a percent or two.
POWER_DROP = 0.05


def _power_warning(previous: Row | None, today: Row) -> Text | None:
    values = (previous or {}).get("goodput_per_watt"), today.get("goodput_per_watt")
    raw = (previous or {}).get("raw_throughput"), today.get("raw_throughput")
    if None in values or None in raw or not (values[1] < (1 - POWER_DROP) * values[0] and raw[1] > raw[0]):
        return None
    usage = "infra.gpu_usage_daily"
    return Text("WARNING: goodput per watt fell from ", fig(previous, usage, "goodput_per_watt", "rate"), " to ",
                fig(today, usage, "goodput_per_watt", "rate"), " while raw throughput rose from ",
                fig(previous, usage, "raw_throughput", "rate"), " to ", fig(today, usage, "raw_throughput", "rate"),
                " tok/s against ", fig(previous, usage, "day", "text"),
                ": the extra output was bought with power, not efficiency")


def power_warning(previous: Row | None, today: Row) -> str | None:
    """The sign of capacity bought by piling on power: goodput per watt more than POWER_DROP below the previous
    day's while raw throughput rose. None when it did not happen or cannot be told."""
    warning = _power_warning(previous, today)
    return None if warning is None else str(warning)


def _slo_item(review: Review, cap: Row) -> Text:
    model = cap["model"]
    policy = review.policy.get(model, {})
    buckets = join(Text(fig({"model": model, **b}, "policy", "isl_bucket", "text"), " ",
                        fig({"model": model, **b}, "policy", "ttft_limit_ms", "ms"))
                   for b in policy.get("isl_buckets", []))
    v = next((r for r in review.verdict if r["model"] == model), {})
    whole = _whole_row(review, model)
    text = Text("compliant = success, TTFT within its ISL bucket's limit (", buckets, ") and ITL ≤ ",
                _pol(review, model, "itl_limit_ms", "ms"), "; attainment ≥ ",
                _pol(review, model, "attainment_target", "g"), " per bucket; success rate ≥ ",
                _pol(review, model, "success_rate_target", "g"), "; P99 queue ≤ ",
                _pol(review, model, "queue_p99_ms", "ms"), ", ITL ≤ ", _pol(review, model, "itl_p99_ms", "ms"),
                ", TPOT ≤ ", _pol(review, model, "tpot_p99_ms", "ms"), " (SLO ", fig(cap, CAP, "slo_version", "text"),
                "). The day: ", fig(v, VERDICT, "slo_met", "met"))
    if v.get("missed_figures"):
        text += Text(" (", fig(v, VERDICT, "missed_figures", "text"), ")")
    if whole:
        text += Text("; P99 TTFT ", fig(whole, SLO, "ttft_p99_ms", "ms"), ", TPOT ",
                     fig(whole, SLO, "tpot_p99_ms", "ms"),
                     ", E2E ", fig(whole, SLO, "e2e_p99_ms", "ms"))
    return text + "."


def _workload_item(review: Review, cap: Row) -> Text:
    plan, tok = _plan_of(review, cap["deployment_id"]), _tokens_of(review, cap["model"])
    inventory = review.deployments.get(cap["deployment_id"], {})
    text = Text(fig(cap, CAP, "model", "text"), " on ", configuration(cap, inventory))
    if cap.get("gpus_per_replica"):
        text += Text(" (replicas of ", fig(cap, CAP, "gpus_per_replica", "int"), " GPUs, ",
                     fig(plan, PLAN, "slots_per_replica_used", "rate"), " slots each",
                     " measured at the highest load-test rate within SLO"
                     if plan.get("slots_per_replica_source") == "loadtest" else "", ")")
    return Text(text, "; ", fig(plan, PLAN, "requests", "int"), " requests, ", fig(cap, CAP, "output_tokens", "tokens"),
                " output tokens produced; ISL P50 ", fig(tok, TOKENS, "isl_p50", "tokens"), " / P99 ",
                fig(tok, TOKENS, "isl_p99", "tokens"), ", OSL P50 ", fig(tok, TOKENS, "osl_p50", "tokens"), " / P99 ",
                fig(tok, TOKENS, "osl_p99", "tokens"), "; input ", fig(tok, TOKENS, "input_total", "tokens"),
                " total = ", fig(tok, TOKENS, "input_cached", "tokens"), " cached + ",
                fig(tok, TOKENS, "input_recomputed", "tokens"), " recomputed, ", Term("overstatement", "overstatement"),
                " ", fig(tok, TOKENS, "input_overstatement", "times"), "; ",
                fig(cap, CAP, "mean_output_per_step", "rate"), " output tokens per agent step (",
                fig(cap, CAP, "mean_output_per_step_source", "text"), "), ", fig(cap, CAP, "sessions", "int"),
                " agent sessions")


def _baseline_item(review: Review, cap: Row) -> Text:
    text = Text(identity(cap), "; ", fig(cap, CAP, "capacity_goodput_per_gpu", "rate"), " tok/s per GPU under SLO (",
                fig(_verdict_of(review, cap["deployment_id"]), VERDICT, "capacity_basis", "text"), ")")
    if cap.get("lambda_slo_max"):
        text += Text(", highest load-test rate within SLO ", fig(cap, CAP, "lambda_slo_max", "rate"), " req/s")
    return Text(text, "; ", Term("daily capacity", "daily-capacity"), " ",
                fig(cap, CAP, "daily_capacity_tokens", "tokens"), " output tokens, ",
                Term("utilization", "utilization"),
                " ", fig(cap, CAP, "utilization", "pct"), "; the day ran ", fig(cap, CAP, "goodput_per_gpu", "rate"),
                " tok/s per GPU and ", fig(cap, CAP, "goodput_per_watt", "rate"), " tok/s per watt under SLO; ",
                capacity_point_text(cap), "; supported agent steps ",
                fig(cap, CAP, "supported_agent_steps", "tokens"), "; task attainment ",
                fig(cap, CAP, "task_attainment", "ratio"), " against the expected (the model's attainment to the power "
                "of the mean steps per task) ", fig(cap, CAP, "expected_task_attainment", "ratio"),
                power_parts(review, cap))


def capacity_point_text(cap: Row) -> Text:
    """The money and the input at the capacity point (infra.capacity_daily): $/MTok under SLO at capacity, daily
    value, the daily cost at capacity and revenue at the list price, beside the day's realized $/MTok under SLO; then
    the input at capacity per second and a day, total = cached + recomputed."""
    currency = cap.get("currency")
    text = Text("at capacity: ", Term("$/MTok under SLO", "mtok-under-slo"), " ",
                fig(cap, CAP, "cost_per_mtok_at_capacity", "money_mtok", currency), ", ",
                Term("daily value", "daily-value"), " ", fig(cap, CAP, "daily_value", "money", currency), " (",
                Term("daily cost at capacity", "daily-cost-at-capacity"), " ",
                fig(cap, CAP, "daily_cost_at_capacity", "money", currency), "), revenue at list price ",
                fig(cap, CAP, "revenue_at_list_price", "money", currency), "; realized: $/MTok under SLO ",
                fig(cap, CAP, "cost_per_mtok_goodput", "money_mtok", currency))
    if cap.get("input_total_rate_at_capacity") is None:
        return text + "; input at capacity not known (no capacity point with compliant output)"
    return Text(text, "; ", Term("input at capacity", "input-at-capacity"), " ",
                fig(cap, CAP, "input_total_rate_at_capacity", "rate"), " tok/s = ",
                fig(cap, CAP, "input_cached_rate_at_capacity", "rate"), " cached + ",
                fig(cap, CAP, "input_recomputed_rate_at_capacity", "rate"), " recomputed, a day ",
                fig(cap, CAP, "daily_input_capacity_total", "tokens"), " = ",
                fig(cap, CAP, "daily_input_capacity_cached", "tokens"), " + ",
                fig(cap, CAP, "daily_input_capacity_recomputed", "tokens"))


def _peak_item(review: Review, cap: Row) -> Text:
    """The planning peak, the peaks beyond the minute, how long bursts lasted, the load against capacity, and the
    growth forecast from the trailing 28 days."""
    plan, model = _plan_of(review, cap["deployment_id"]), cap["model"]
    text = Text(fig(plan, PLAN, "peak_basis", "basis"), " ", fig(plan, PLAN, "peak_window_start", "hhmm"), "–",
                fig(plan, PLAN, "peak_window_end", "hhmm"), " UTC: ", fig(plan, PLAN, "peak_requests", "int"),
                " requests, ", fig(plan, PLAN, "peak_arrival_rate", "rate"), " req/s, ",
                fig(plan, PLAN, "peak_output_token_rate", "rate"), " output tok/s")
    busiest = {c: _busiest(review, model, c) for c in ("peak_second_arrival_rate", "peak_minute_arrival_rate",
                                                        "peak_minute_output_token_rate", "peak_minute_input_token_rate",
                                                        "burst_seconds")}
    if busiest["peak_minute_arrival_rate"] is not None:
        text += Text("; busiest second ", fig(busiest["peak_second_arrival_rate"], LOAD, "peak_second_arrival_rate",
                                              "rate"),
                     " req/s, busiest minute ", fig(busiest["peak_minute_arrival_rate"], LOAD,
                                                    "peak_minute_arrival_rate", "rate"), " req/s, ",
                     fig(busiest["peak_minute_output_token_rate"], LOAD, "peak_minute_output_token_rate", "rate"),
                     " output and ", fig(busiest["peak_minute_input_token_rate"], LOAD,
                                         "peak_minute_input_token_rate", "rate"), " input tok/s")
    burst = busiest["burst_seconds"]
    if burst and burst.get("burst_seconds"):
        text += Text("; longest burst above the planning rate ", fig(burst, LOAD, "burst_seconds", "minutes"), " from ",
                     fig(burst, LOAD, "hour", "hour"))
    text += Text("; peak-to-mean ", fig(plan, PLAN, "peak_to_mean", "rate"), "; ",
                 fig(plan, PLAN, "hours_over_capacity", "int"), " ",
                 Term("hour(s) over capacity", "hours-over-capacity"),
                 ", largest backlog ", fig(plan, PLAN, "max_backlog_tokens", "tokens"), " tokens")
    forecast = growth_forecast(_peak_history(review, model), review.day)
    if "forecast" in forecast:
        growth = forecast["weekly_growth"]
        return Text(text, "; growth ", derived("—" if growth is None else f"{growth:+.1%}", "weekly growth"),
                    " a week over ", derived(str(forecast["days"]), "published days"),
                    " published days, peak forecast in 28 days ", derived(fmt(forecast["forecast"], "rate"),
                                                                          "peak forecast"), " output tok/s")
    return Text(text, "; growth forecast needs 14 published days in the last 28 (",
                derived(str(forecast["days"]), "published days"), " so far)")


def _failure_item(review: Review, cap: Row) -> Text:
    plan, whole = _plan_of(review, cap["deployment_id"]), _whole_row(review, cap["model"]) or {}
    if plan.get("headroom_failure_domain") in ("node", "rack"):
        # N-k of nodes or racks: a failed domain takes down every replica with a GPU in it.
        domain = fig(plan, PLAN, "headroom_failure_domain", "text")
        text = Text(Term("N+", "n-plus-1"), fig(plan, PLAN, "headroom_n_minus_k", "int"), " ", domain, ": ",
                    fig(plan, PLAN, "headroom_n_minus_k", "int"), " ", domain, "(s) of ",
                    fig(plan, PLAN, "gpus_per_failure_domain", "int"), " GPUs may fail, taking down ",
                    fig(plan, PLAN, "headroom_failure_replicas", "int"), " replica(s) of ",
                    fig(plan, PLAN, "gpus_per_replica", "int"), " GPUs, and the rest keep the SLO = ",
                    fig(plan, PLAN, "headroom_failure_gpus", "gpus"), " GPUs")
    else:
        text = Text(Term("N+", "n-plus-1"), fig(plan, PLAN, "headroom_failure_replicas", "int"), ": ",
                    fig(plan, PLAN, "headroom_failure_replicas", "int"),
                    " replica(s) may fail and the rest keep the SLO = ",
                    fig(plan, PLAN, "headroom_failure_gpus", "gpus"), " GPUs")
    if whole.get("timeout_requests") is not None:
        text += Text("; the day's failures: ", fig(whole, SLO, "timeout_requests", "int"), " timeouts, ",
                     fig(whole, SLO, "disconnected_requests", "int"), " disconnects, ",
                     fig(whole, SLO, "error_requests", "int"), " errors, ", fig(whole, SLO, "rejected_requests", "int"),
                     " rejected")
    return text


def _lag_item(plan: Row) -> Text:
    if plan.get("lag_minutes") is None:
        return Text("scale-out and warm-up time not configured (scale_out_minutes, warmup_minutes in "
                    "deployments.yaml); "
                    "the policy's scaling lag ", fig(plan, PLAN, "headroom_scaling_lag_pct", "pct"), " = ",
                    fig(plan, PLAN, "headroom_scaling_lag_gpus", "gpus"), " GPUs")
    return Text("scale-out ", fig(plan, PLAN, "scale_out_minutes", "rate"), " + warm-up ",
                fig(plan, PLAN, "warmup_minutes", "rate"), " = ", fig(plan, PLAN, "lag_minutes", "int"),
                " min; over that time before the peak the output rate grows by ",
                fig(plan, PLAN, "lag_growth_token_rate", "rate"), " tok/s = ", fig(plan, PLAN, "lag_gpus", "gpus"),
                " GPUs at ", fig(plan, PLAN, "capacity_goodput_per_gpu", "rate"),
                " tok/s per GPU, against the policy's "
                "scaling lag ", fig(plan, PLAN, "headroom_scaling_lag_pct", "pct"), " = ",
                fig(plan, PLAN, "headroom_scaling_lag_gpus", "gpus"), " GPUs")


def gpus_needed_text(review: Review, deployment_id: str) -> Text:
    """GPUs needed as infra.capacity_verdict_daily publishes it: the figure and its rule against the GPUs in force,
    and the gap's three parts (the peak, the headroom percentages, the redundancy replicas), each its cell."""
    v = _verdict_of(review, deployment_id)
    if v.get("gpus_needed") is None:
        return Text(Term("GPUs needed", "gpus-needed"), " not known: ", fig(v, VERDICT, "verdict_text", "text",
                                                                          verdict=v.get("verdict")), ".")
    return Text(Term("GPUs needed", "gpus-needed"), " ", fig(v, VERDICT, "gpus_needed", "gpus"), " (set by the ",
                fig(v, VERDICT, "gpus_needed_rule", "rule"), ") against ", fig(v, VERDICT, "gpus_in_force", "gpus"),
                " ", Term("in force", "gpus-in-force"), "; the gap in three parts: the peak ",
                fig(v, VERDICT, "gap_slo_capacity", "gpus"), " (negative: GPUs to spare at the peak), ",
                Term("headroom", "headroom"), " ", fig(v, VERDICT, "gap_headroom", "gpus"), ", redundancy ",
                fig(v, VERDICT, "gap_redundancy", "gpus"), ". ", fig(v, VERDICT, "verdict_text", "text",
                                                                     verdict=v.get("verdict")), ".")


def _headroom_item(review: Review, cap: Row) -> Text:
    plan = _plan_of(review, cap["deployment_id"])
    return Text(
        "Erlang C plan: ", fig(plan, PLAN, "erlang_c_slots", "int"), " slots for the peak's concurrency (Little's law ",
        fig(plan, PLAN, "littles_law_concurrency", "rate"), " in flight) = ",
        fig(plan, PLAN, "replicas_needed_erlang", "int"), " replica(s) = ", fig(plan, PLAN, "base_gpus", "gpus"),
        " GPUs, ", fig(plan, PLAN, "gpus_needed_erlang_c", "gpus"), " with the headroom policy (the rule of thumb, for "
        "comparison: ", fig(plan, PLAN, "replicas_needed_seed_rule", "int"), " replica(s) at redundancy ",
        fig(plan, PLAN, "rule_of_thumb_redundancy", "g"), "). Peak sizing: ",
        Text("peak work rate ", fig(plan, PLAN, "peak_work_rate", "rate"), " GPU-seconds per second / ",
             fig(plan, PLAN, "sustainable_work_per_gpu", "ratio"), " sustainable work per GPU")
        if plan.get("goodput_sizing_basis") == "work_model" else
        Text(fig(plan, PLAN, "peak_output_token_rate", "rate"), " output tok/s at the peak / ",
             fig(plan, PLAN, "capacity_goodput_per_gpu", "rate"), " tok/s per GPU"), " = ",
        fig(plan, PLAN, "goodput_sizing_base_gpus", "gpus"), " GPUs, ", fig(plan, PLAN, "gpus_needed_goodput", "gpus"),
        " with the headroom policy. Headroom policy: scaling lag ", fig(plan, PLAN, "headroom_scaling_lag_pct", "pct"),
        ", forecast error ", fig(plan, PLAN, "headroom_forecast_error_pct", "pct"), ", release ",
        fig(plan, PLAN, "headroom_release_pct", "pct"), ", jitter ", fig(plan, PLAN, "headroom_jitter_pct", "pct"),
        " (", fig(plan, PLAN, "headroom_pct_total", "pct"), " in all, each on top of the ones before; on the Erlang C "
        "plan's base ", fig(plan, PLAN, "headroom_scaling_lag_gpus", "gpus"), " + ",
        fig(plan, PLAN, "headroom_forecast_error_gpus", "gpus"), " + ",
        fig(plan, PLAN, "headroom_release_gpus", "gpus"),
        " + ", fig(plan, PLAN, "headroom_jitter_gpus", "gpus"), " GPUs) and ",
        fig(plan, PLAN, "headroom_failure_gpus", "gpus"), " GPUs for failed replicas. ",
        gpus_needed_text(review, cap["deployment_id"]), _units_text(plan))


def _units_text(plan: Row) -> Text:
    """GPUs needed in the unit the deployment is bought in (a node, a rack), when it is not a GPU."""
    if plan.get("bought_in") not in ("node", "rack") or plan.get("units_needed") is None:
        return Text()
    unit = fig(plan, PLAN, "bought_in", "text")
    return Text(" In the unit bought: ", fig(plan, PLAN, "units_needed", "int"), " ", unit, "(s) of ",
                fig(plan, PLAN, "gpus_per_unit", "int"), " GPUs needed against ",
                fig(plan, PLAN, "units_deployed", "gpus"), " in force (", fig(plan, PLAN, "unit_surplus", "gpus"),
                " to spare; negative: short); one ", unit, " delivers ",
                fig(plan, PLAN, "daily_capacity_tokens_per_unit", "tokens"), " output tokens a day within the SLO.")


def _validation_item(review: Review, cap: Row) -> Text:
    source = cap.get("capacity_source")
    return Text("measured by a load test" if source == "loadtest" else "demonstrated from production logs"
                if source == "demonstrated" else "no capacity figure", ": ",
                fig(cap, CAP, "capacity_note", "text"), ". Load-test run ",
                fig(cap, CAP, "loadtest_run_id", "text") if cap.get("loadtest_run_id") else "none",
                "; figures published by Dagster run ",
                fig({"run_id": review.published_run_id}, "run", "run_id", "text"), ", review written by run ",
                fig({"run_id": review.run_id}, "run", "run_id", "text"), "; price version ",
                fig(cap, CAP, "price_version", "text"), ", SLO version ", fig(cap, CAP, "slo_version", "text"))


def template_table(review: Review, cap: Row) -> Table:
    """The capacity review template for one deployment: one item per row, with its basis."""
    plan = _plan_of(review, cap["deployment_id"])
    return Table(f"Capacity review of {cap['deployment_id']} ({cap['model']})", ["item", "content"], [
        ["SLO", _slo_item(review, cap)], ["Workload", _workload_item(review, cap)],
        ["Baseline", _baseline_item(review, cap)], ["Peak", _peak_item(review, cap)],
        ["Failure", _failure_item(review, cap)], ["Lag", _lag_item(plan)], ["Headroom", _headroom_item(review, cap)],
        ["Validation", _validation_item(review, cap)]], css="template")


def figures_table(review: Review, cap: Row) -> Table:
    """One published figure per row, as it was published, so the review can be signed figure by figure."""
    plan, v = _plan_of(review, cap["deployment_id"]), _verdict_of(review, cap["deployment_id"])
    currency = cap.get("currency")
    today = next((r for r in review.gpu_usage_history
                  if r["deployment_id"] == cap["deployment_id"] and r["day"] == review.day), None)
    usage = "infra.gpu_usage_daily"
    measured: list[tuple[Cell, Cell]] = [] if today is None else [
        (Text("goodput per watt, ", fig(today, usage, "power_basis", "text"), " power (tok/s per W)"),
         fig(today, usage, "goodput_per_watt", "rate")),
        (Text("mean total GPU power, ", fig(today, usage, "power_basis", "text"), " (W)"),
         fig(today, usage, "power_w", "rate"))]
    items: list[tuple[Cell, Cell]] = [
        ("capacity goodput per GPU (tok/s)", fig(cap, CAP, "capacity_goodput_per_gpu", "rate")),
        ("capacity source", fig(cap, CAP, "capacity_source", "text")),
        ("capacity verified", fig(cap, CAP, "capacity_verified", "text")),
        ("highest load-test rate within SLO (req/s)", fig(cap, CAP, "lambda_slo_max", "rate")),
        ("goodput per GPU, the day (tok/s)", fig(cap, CAP, "goodput_per_gpu", "rate")),
        ("goodput per watt, the day (tok/s per W)", fig(cap, CAP, "goodput_per_watt", "rate")),
        *measured,
        ("daily capacity (output tokens)", fig(cap, CAP, "daily_capacity_tokens", "tokens")),
        ("output produced (tokens)", fig(cap, CAP, "output_tokens", "tokens")),
        ("utilization", fig(cap, CAP, "utilization", "pct")),
        ("$/MTok under SLO at capacity", fig(cap, CAP, "cost_per_mtok_at_capacity", "money_mtok", currency)),
        ("daily value (daily capacity × $/MTok under SLO at capacity)",
         fig(cap, CAP, "daily_value", "money", currency)),
        ("daily cost at capacity", fig(cap, CAP, "daily_cost_at_capacity", "money", currency)),
        ("revenue at list price (daily capacity × list price)",
         fig(cap, CAP, "revenue_at_list_price", "money", currency)),
        ("$/MTok under SLO realized (the day's cost over its compliant output)",
         fig(cap, CAP, "cost_per_mtok_goodput", "money_mtok", currency)),
        ("input at capacity, total / cached / recomputed (tok/s)",
         Text(fig(cap, CAP, "input_total_rate_at_capacity", "rate"), " / ",
              fig(cap, CAP, "input_cached_rate_at_capacity", "rate"), " / ",
              fig(cap, CAP, "input_recomputed_rate_at_capacity", "rate"))),
        ("daily input capacity, total / cached / recomputed (tokens)",
         Text(fig(cap, CAP, "daily_input_capacity_total", "tokens"), " / ",
              fig(cap, CAP, "daily_input_capacity_cached", "tokens"), " / ",
              fig(cap, CAP, "daily_input_capacity_recomputed", "tokens"))),
        ("raw throughput, effective / successful requests (tok/s)",
         Text(fig(cap, CAP, "raw_throughput", "rate"), " / ", fig(cap, CAP, "raw_throughput_successful", "rate"))),
        ("supported agent steps", fig(cap, CAP, "supported_agent_steps", "tokens")),
        ("task attainment", fig(cap, CAP, "task_attainment", "ratio")),
        ("expected task attainment (attainment to the power of mean steps)",
         fig(cap, CAP, "expected_task_attainment", "ratio")),
        ("peak arrival rate (req/s)", fig(plan, PLAN, "peak_arrival_rate", "rate")),
        ("peak output token rate (tok/s)", fig(plan, PLAN, "peak_output_token_rate", "rate")),
        ("Little's law concurrency", fig(plan, PLAN, "littles_law_concurrency", "rate")),
        ("Erlang C slots", fig(plan, PLAN, "erlang_c_slots", "int")),
        ("slots per replica (source)", Text(fig(plan, PLAN, "slots_per_replica_used", "rate"), " (",
                                            fig(plan, PLAN, "slots_per_replica_source", "text"), ")")),
        ("replicas (Erlang C plan before headroom / rule of thumb)",
         Text(fig(plan, PLAN, "replicas_needed_erlang", "int"), " / ",
              fig(plan, PLAN, "replicas_needed_seed_rule", "int"))),
        ("Erlang C plan with headroom (GPUs)", fig(plan, PLAN, "gpus_needed_erlang_c", "gpus")),
        ("peak sizing with headroom (GPUs)", fig(plan, PLAN, "gpus_needed_goodput", "gpus")),
        ("peak sizing minus Erlang C plan (GPUs)", fig(plan, PLAN, "gpus_needed_difference", "gpus")),
        ("GPUs needed (the larger, with headroom)", fig(v, VERDICT, "gpus_needed", "gpus")),
        ("GPUs needed set by", fig(v, VERDICT, "gpus_needed_rule", "rule")),
        ("GPUs in force", fig(v, VERDICT, "gpus_in_force", "gpus")),
        ("GPUs in force minus GPUs needed (negative: fewer than needed)", fig(plan, PLAN, "gpu_surplus", "gpus")),
        ("lag (min) / lag GPUs", Text(fig(plan, PLAN, "lag_minutes", "int"), " / ",
                                      fig(plan, PLAN, "lag_gpus", "gpus"))),
        ("hours over capacity", fig(plan, PLAN, "hours_over_capacity", "int")),
        ("largest backlog (tokens)", fig(plan, PLAN, "max_backlog_tokens", "tokens")),
    ]
    return Table(f"Figures of {cap['deployment_id']}", ["figure", "value"], [[k, v] for k, v in items],
                 numeric={1}, css="figures")


def sweep_parts(review: Review, cap: Row) -> list[Table | Text | str]:
    """The load-test sweep of a deployment (infra.loadtest_sweep_daily): its knee in one line (the concurrency one
    replica held there, goodput per GPU and the P99 latencies) and goodput against concurrency step by step; one
    line when no load test of the configuration in force speaks for it."""
    steps = sorted((r for r in review.sweep if r["deployment_id"] == cap["deployment_id"]),
                   key=lambda r: r["step_index"])
    if not steps:
        return [f"Load-test sweep of {cap['deployment_id']}: no load test of the configuration in force."]
    knee = next((r for r in steps if r["is_knee"]), None)
    first = steps[0]
    run = Text("load test ", fig(first, SWEEP, "loadtest_run_id", "text"), " (max_num_seqs ",
               fig(first, SWEEP, "max_num_seqs", "int"), ", verified: ", fig(first, SWEEP, "loadtest_verified", "text"),
               ")")
    if knee is None:
        line = Text("No knee: no step of ", run, " kept every commitment.")
    else:
        line = Text("Knee at ", fig(knee, SWEEP, "concurrency_per_replica", "rate"),
                    " concurrent requests per replica (", fig(knee, SWEEP, "arrival_rate", "rate"), " req/s): ",
                    fig(knee, SWEEP, "goodput_per_gpu", "rate"), " tok/s per GPU, P99 TTFT ",
                    fig(knee, SWEEP, "ttft_p99_ms", "ms"), ", P99 E2E ", fig(knee, SWEEP, "e2e_p99_ms", "ms"),
                    "; ", run, ".")
    rows: list[list[Cell]] = [[
        fig(r, SWEEP, "step_index", "int"), fig(r, SWEEP, "arrival_rate", "rate"),
        fig(r, SWEEP, "arrival_rate_measured", "rate"), fig(r, SWEEP, "concurrency_per_replica", "rate"),
        fig(r, SWEEP, "goodput_per_gpu", "rate"), fig(r, SWEEP, "attainment", "ratio"),
        fig(r, SWEEP, "ttft_p99_ms", "ms"), fig(r, SWEEP, "e2e_p99_ms", "ms"), fig(r, SWEEP, "all_met", "text"),
        fig(r, SWEEP, "is_knee", "text")] for r in steps]
    table = Table(f"Load-test sweep of {cap['deployment_id']}: goodput against concurrency",
                  ["step", "req/s aimed", "req/s measured", "concurrent per replica", "goodput per GPU (tok/s)",
                   "attainment", "P99 TTFT", "P99 E2E", "every commitment held", "knee"], rows,
                  numeric={0, 1, 2, 3, 4, 5, 6, 7}, css="sweep")
    return [line, table]


def _work_of(review: Review, deployment_id: str) -> Row | None:
    return next((r for r in review.work if r["deployment_id"] == deployment_id), None)


def _coefficients_text(w: Row) -> Text:
    """C_prefill and C_decode with their source, points and R², or the fit's note when there is none."""
    if w.get("c_prefill") is None:
        return Text(Term("Work model", "work-model"), ": none (", fig(w, WORK, "fit_note", "text"), ").")
    production = w.get("coefficients_source") == "production"
    source = ("production hours (labelled)" if production
              else Text("load test ", fig(w, WORK, "coefficients_run_id", "text")))
    return Text(Term("Work model", "work-model"), ": C_prefill ", fig(w, WORK, "c_prefill", "rate"), " and C_decode ",
                fig(w, WORK, "c_decode", "rate"), " GPU-seconds per recomputed input and per output token, fitted to ",
                source, " (", fig(w, WORK, "fit_points", "int"), " points, R² ", fig(w, WORK, "fit_r2", "ratio"), ")",
                Text(": ", fig(w, WORK, "fit_note", "text")) if production else "", ".")


def _work_sizing_text(review: Review, cap: Row, w: Row) -> Text:
    """How the plan's peak sizing took its base (infra.capacity_plan_daily.goodput_sizing_basis): the day's work
    over the work one GPU sustains, or output tokens alone and why."""
    plan = _plan_of(review, cap["deployment_id"])
    basis = plan.get("goodput_sizing_basis")
    if basis == "work_model":
        return Text("GPUs needed sized on the work of the day's mix: peak work rate ",
                    fig(plan, PLAN, "peak_work_rate", "rate"), " GPU-seconds per second / ",
                    Term("sustainable work per GPU", "sustainable-work"), " ",
                    fig(plan, PLAN, "sustainable_work_per_gpu", "ratio"), " = ",
                    fig(plan, PLAN, "goodput_sizing_base_gpus", "gpus"), " GPUs before headroom.")
    if basis != "output_only":
        return Text("GPUs needed: no peak sizing, no capacity figure to size by.")
    why = ("no work model" if w.get("c_prefill") is None
           else "the work model has no capacity point's mix or peak to weigh")
    text = Text("GPUs needed sized on output tokens alone: ", why, "; ",
                fig(plan, PLAN, "peak_output_token_rate", "rate"), " output tok/s at the peak / ",
                fig(plan, PLAN, "capacity_goodput_per_gpu", "rate"), " tok/s per GPU = ",
                fig(plan, PLAN, "goodput_sizing_base_gpus", "gpus"), " GPUs before headroom")
    if w.get("peak_work_rate") is not None:
        text += Text("; peak work rate ", fig(w, WORK, "peak_work_rate", "rate"), " GPU-seconds per second")
    if w.get("sustainable_work_per_gpu") is not None:
        text += Text("; ", Term("sustainable work per GPU", "sustainable-work"), " ",
                     fig(w, WORK, "sustainable_work_per_gpu", "ratio"))
    return text + "."


def _mix_table(w: Row) -> Table:
    """Production's mix beside the mix of the load test's lambda_slo_max step (when there is a test)."""
    columns = ("requests", "isl_p50", "isl_p90", "osl_p50", "osl_p90", "cached_share",
               "recomputed_input_per_request", "output_per_request")
    kinds = {"requests": "int", "cached_share": "pct"}
    rows: list[list[Cell]] = [["production, the day", *(fig(w, WORK, c, kinds.get(c, "tokens")) for c in columns)]]
    if w.get("loadtest_run_id") is not None:
        rows.append([Text("load test ", fig(w, WORK, "loadtest_run_id", "text"), " at lambda_slo_max"),
                     *(fig(w, WORK, f"loadtest_{c}", kinds.get(c, "tokens")) for c in columns)])
    return Table(f"Mix of {w['deployment_id']}: production beside the load test that set capacity",
                 ["mix", "requests", "ISL P50", "ISL P90", "OSL P50", "OSL P90", "cached share",
                  "recomputed input per request", "output per request"], rows,
                 numeric={1, 2, 3, 4, 5, 6, 7, 8}, css="mix")


def rebaseline_text(review: Review, cap: Row) -> Text | None:
    """'Re-baseline ...' and why, when the load test behind the capacity no longer stands for production: older
    than the policy's loadtest_max_age_days, its mix unlike production's, or a newer run of another configuration
    (infra.capacity_daily names the fields that changed); None when none holds."""
    w = _work_of(review, cap["deployment_id"]) or {}
    reasons: list[Text] = []
    if w.get("loadtest_stale"):
        reasons.append(Text("load test ", fig(w, WORK, "loadtest_run_id", "text"), " is ",
                            fig(w, WORK, "loadtest_age_days", "int"), " days old, more than the ",
                            _pol(review, cap["model"], "loadtest_max_age_days", "int"),
                            " allowed (loadtest_max_age_days)"))
    if w.get("loadtest_representative") is False:
        reasons.append(Text("its mix is unlike production's"))
    if cap.get("other_configuration_run_id"):
        reasons.append(Text("the newest load test, ", fig(cap, CAP, "other_configuration_run_id", "text"),
                            ", measured another configuration (", fig(cap, CAP, "other_configuration_differences",
                                                                      "text"), ")"))
    if not reasons:
        return None
    return Text("Re-baseline ", fig(cap, CAP, "deployment_id", "text"), ": ", join(reasons, "; "), ".")


def work_model_parts(review: Review, cap: Row) -> list[Table | Text | Sub | str]:
    """The work model of a GPU deployment (infra.capacity_model_daily): its coefficients or why there are none, how
    the peak sizing took its base, production's mix beside the load test's, the likeness verdict with its rule and
    the test's age, the capacity rescaled to production's mix when the test is unrepresentative, and a re-baseline
    line when the test is stale, unlike production or outdated by a run of another configuration."""
    w = _work_of(review, cap["deployment_id"])
    if w is None:
        return []
    out: list[Table | Text | Sub | str] = [Sub(f"Work model and mix of {cap['deployment_id']}"), _coefficients_text(w),
                                           _work_sizing_text(review, cap, w)]
    if w.get("loadtest_run_id") is None:
        out.append(Text("No load test of the configuration in force to check against production: the production "
                        "mix alone."))
    else:
        out.append(Text(Term("Likeness", "representative-load-test"), " of load test ",
                        fig(w, WORK, "loadtest_run_id", "text"), ", ", fig(w, WORK, "loadtest_age_days", "int"),
                        " days old (at most ", _pol(review, cap["model"], "loadtest_max_age_days", "int"),
                        " allowed), to production's mix: ", fig(w, WORK, "loadtest_representative", "likeness"), "; ",
                        fig(w, WORK, "representativeness_rule", "text"), "."))
        if w.get("loadtest_representative") is False and w.get("capacity_source") == "loadtest":
            out.append(Text("Labelled: capacity rescaled to production's mix: ",
                            fig(w, WORK, "capacity_goodput_per_gpu", "rate"), " → ",
                            fig(w, WORK, "capacity_goodput_per_gpu_rescaled", "rate"),
                            " tok/s per GPU (work per output token ",
                            fig(w, WORK, "work_per_output_token_capacity", "rate"), " GPU-seconds at the test's mix, ",
                            fig(w, WORK, "work_per_output_token_production", "rate"), " at production's).")
                       if w.get("capacity_goodput_per_gpu_rescaled") is not None else
                       "Labelled: the capacity was measured on a mix unlike production's and no work model rescales "
                       "it.")
    out.append(_mix_table(w))
    if (line := rebaseline_text(review, cap)) is not None:
        out.append(line)
    return out


def _memory_rows(review: Review, model: str) -> list[Row]:
    return sorted((r for r in review.memory if r["model"] == model), key=lambda r: r["deployment_id"])


def memory_parts(review: Review, model: str) -> list[Table | Text | Sub | str]:
    """The GPU memory budget of each of the model's GPU deployments (infra.gpu_memory_daily): per GPU, weights, KV
    cache, runtime and margin; the KV cache's capacity in tokens and in sequences at the day's mean and P99 context
    beside the planning peak's concurrency per replica; the two flags, and the note in words first."""
    out: list[Table | Text | Sub | str] = []
    for m in _memory_rows(review, model):
        items: list[tuple[Cell, Cell]] = [
            ("GPU memory (GiB)", fig(m, MEMORY, "gpu_memory_gib", "rate")),
            ("engine's share of it (memory utilization)", fig(m, MEMORY, "gpu_memory_utilization", "g")),
            ("weights per GPU (GiB)", fig(m, MEMORY, "weights_gib", "rate")),
            ("KV cache per GPU (GiB)", fig(m, MEMORY, "kv_cache_gib", "rate")),
            ("runtime per GPU (GiB)", fig(m, MEMORY, "runtime_memory_gib", "rate")),
            ("margin per GPU, left unused (GiB)", fig(m, MEMORY, "margin_gib", "rate")),
            ("KV bytes per token, per GPU", fig(m, MEMORY, "kv_bytes_per_token", "tokens")),
            ("KV capacity per replica (tokens)", fig(m, MEMORY, "kv_capacity_tokens", "tokens")),
            (Text("sequences it holds at the mean context (", fig(m, MEMORY, "context_mean_tokens", "tokens"),
                  " tokens)"), fig(m, MEMORY, "kv_sequences_at_mean", "rate")),
            (Text("sequences it holds at the P99 context (", fig(m, MEMORY, "context_p99_tokens", "tokens"),
                  " tokens)"), fig(m, MEMORY, "kv_sequences_at_p99", "rate")),
            ("sequences the engine batches at most (max_num_seqs)", fig(m, MEMORY, "max_num_seqs", "int")),
            ("concurrency per replica at the planning peak (Little's law)",
             fig(m, MEMORY, "observed_concurrency_per_replica", "rate")),
            ("no margin: the KV cache takes all memory left", fig(m, MEMORY, "kv_takes_all_memory", "text")),
            ("peak concurrency near what the KV cache holds", fig(m, MEMORY, "concurrency_near_kv_limit", "text")),
        ]
        out += [Sub(f"Memory budget of {m['deployment_id']}"),
                Text(Term("Memory budget", "memory-budget"), ": ", fig(m, MEMORY, "memory_note", "text"), "."),
                Table(f"Memory budget of {m['deployment_id']}, per GPU", ["figure", "value"],
                      [[k, v] for k, v in items], numeric={1}, css="figures")]
    return out


def memory_warnings(review: Review, model: str) -> list[Text]:
    """A line on the model's screen for each GPU deployment whose memory budget raised a flag: no margin left, or
    the peak's concurrency within 10% of what the KV cache holds (infra.gpu_memory_daily's note says which)."""
    return [Text("Memory budget of ", fig(m, MEMORY, "deployment_id", "text"), ": ",
                 fig(m, MEMORY, "memory_note", "text"), ".")
            for m in _memory_rows(review, model) if m.get("kv_takes_all_memory") or m.get("concurrency_near_kv_limit")]


# --- notes on what is left out ----------------------------------------------------------------------------------------

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


def _attainment_charted(review: Review, model: str) -> bool:
    return any(r["isl_bucket"] != "all" and r.get("attainment") is not None for r in _slo_rows(review, model))


def attainment_note(review: Review, model: str) -> str | None:
    """Why the attainment chart is left out: no SLO rows, no effective request, no bucket with an attainment; None
    when it is drawn, or when the logs carry no latency (the SLO's note says so)."""
    rows = _slo_rows(review, model)
    if _attainment_charted(review, model):
        return None
    if not rows:
        why = "no infra.slo_daily rows this day"
    elif not (_whole_row(review, model) or {}).get("effective_requests"):
        why = "no effective request on the day"
    elif not _latency_logged(review, model):
        return None  # slo_notes says why, once
    else:
        why = "no ISL bucket has an attainment figure"
    return f"No attainment chart for {model}: {why}."


# --- the document: what the templates print, in order -----------------------------------------------------------------

LEDE = Text("Two questions first: what a million tokens really costs (", Term("$/MTok under SLO", "mtok-under-slo"),
            ": the day's cost over the output of requests that kept their latency promises, beside ",
            Term("$/MTok delivered", "mtok-delivered"), "), and how many good tokens each model can deliver a day "
            "within those promises (", Term("daily capacity", "daily-capacity"), "). The verdict is "
            "infra.capacity_verdict_daily's; every figure is a published cell, and every term is in the ",
            Term("glossary", "glossary"), ".")

# Every term a reader meets, defined once (docs/metrics.md, sections 1-6, has the full definitions): (anchor, term,
# definition). The text links to them by anchor.
GLOSSARY: tuple[tuple[str, str, str], ...] = (
    ("verdict", "verdict",
     "The day's judgement of a deployment, from infra.capacity_verdict_daily: ok; policy (SLO met and the peak "
     "fits, but not the redundancy or headroom the policy asks for); short (the peak itself needs more GPUs than "
     "in force); SLO missed (a judged commitment failed)."),
    ("mtok-delivered", "$/MTok delivered",
     "The day's total cost over the output tokens of successful requests, per million."),
    ("mtok-under-slo", "$/MTok under SLO",
     "The day's total cost over the output tokens of compliant requests only (successful and within their latency "
     "limits), per million: what a million good tokens cost. It compares models; it is never below $/MTok "
     "delivered."),
    ("goodput", "goodput",
     "Output tokens per second of compliant requests; raw throughput counts every output token."),
    ("attainment", "SLO attainment",
     "Compliant over judged requests, per ISL bucket; the commitment holds per bucket."),
    ("isl-bucket", "ISL bucket",
     "A range of input lengths (4k = 4,096 tokens) with its own time-to-first-token limit."),
    ("not-judged", "not judged",
     "Too few judged requests in a bucket (or no latency logged) to say met or missed: never counted as missed; "
     "the bucket's requests still count in the model's whole-day attainment."),
    ("latency", "TTFT, ITL, TPOT, P99",
     "Time to first token (queueing included), longest gap between output tokens, mean time per output token; "
     "P99: the value 99% of requests stayed within."),
    ("n-plus-1", "N+1",
     "Redundancy: one replica (or the policy's k) may fail and the rest still hold the peak within the SLO."),
    ("headroom", "headroom",
     "The policy's percentages on top of the sizing: scaling lag, forecast error, releases, jitter."),
    ("gpus-needed", "GPUs needed",
     "The larger of the Erlang C plan and the peak sizing, each with headroom and redundancy; its gap to GPUs in "
     "force splits into the peak, headroom and redundancy."),
    ("gpus-in-force", "GPUs in force",
     "The GPUs of the deployment's inventory at the end of the day."),
    ("capacity-basis", "capacity basis",
     "Where capacity per GPU comes from: a verified load test, an unverified one (reference only), a demonstrated "
     "lower bound, or none."),
    ("lower-bound", "lower bound",
     "Demonstrated capacity: the best 30-minute production window in which every commitment held. Real capacity is "
     "at least this; GPUs needed on it is at most the figure."),
    ("daily-capacity", "daily capacity",
     "Capacity goodput per GPU × GPUs × 86,400 s: the good output tokens a deployment can deliver a day."),
    ("daily-value", "daily value",
     "Daily capacity × $/MTok under SLO at capacity / 1,000,000, comparable across models; revenue at list price "
     "prices the same tokens at the list price."),
    ("daily-cost-at-capacity", "daily cost at capacity",
     "The deployment's cost of the day: its GPUs cost the same at capacity. Over the daily capacity it is the $/MTok "
     "under SLO at capacity; over the day's good tokens, the realized one."),
    ("input-at-capacity", "input at capacity",
     "Input tokens per second (and a day) at the capacity point, total = cached + recomputed: the capacity point's "
     "input per good output token at the capacity's output rate."),
    ("overstatement", "overstatement",
     "Total over recomputed input tokens: how many times counting all input overstates the compute it took."),
    ("utilization", "utilization",
     "Output produced over daily capacity; above 100% is possible on a lower bound."),
    ("hours-over-capacity", "hours over capacity",
     "UTC hours whose demanded output rate exceeded capacity."),
    ("cached-input", "cached / recomputed input",
     "Prompt tokens served from the prefix cache, and the rest, which the GPUs compute again (and pay for)."),
    ("memory-budget", "memory budget",
     "Where each GPU's memory goes: weights, KV cache (the tokens of the sequences in flight), runtime and the "
     "margin the engine leaves unused; the KV cache's capacity in tokens, and in sequences at the day's mean and "
     "P99 context, against the planning peak's concurrency per replica."),
    ("work-model", "work model",
     "What a GPU spends per token: C_prefill GPU-seconds per recomputed input token and C_decode per output token, "
     "fitted to a load test's steps below saturation (else to production hours, labelled). It sizes GPUs by the "
     "day's mix of input and output rather than by output tokens alone."),
    ("sustainable-work", "sustainable work per GPU",
     "The busy GPU-seconds per second one GPU sustains within the SLO: capacity per GPU times the work per output "
     "token of the mix it was measured on, at most 1. GPUs needed at the peak is the peak's work rate over it."),
    ("representative-load-test", "representative load test",
     "A load test whose mix stands for production's: recomputed input per request and P90 input length within the "
     "policy's tolerances. An unrepresentative test's capacity is rescaled to production's mix by the work model; "
     "a test older than the policy allows, unlike production or outdated by another configuration asks to "
     "re-baseline."),
    ("erlang-c", "Erlang C plan, peak sizing",
     "GPUs for the busiest window's concurrency with queueing (Erlang C), and for its output tokens at the "
     "capacity per GPU."),
)


@dataclass(frozen=True)
class Sub:
    """A sub-heading inside a fold."""

    text: str
    kind: str = "sub"

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Fold:
    """A part of a model's section the HTML folds (<details>): its summary line and its blocks (tables, lines)."""

    summary: str
    blocks: list[Table | Text | Sub | str]


@dataclass(frozen=True)
class ModelSection:
    id: str
    heading: str
    hosted: bool
    charts: list[tuple[str, str]]
    chart_notes: list[str]
    slo: Table | None
    notes: list[Text | str]
    folds: list[Fold]


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def _model_section(review: Review, model: str, hosted: bool) -> ModelSection:
    """A model's screen: at most two charts (its load against capacity, its attainment per bucket), its SLO table and
    the findings that bear on it; the capacity template, figures, workload, input and what-if folded."""
    policy = review.policy.get(model, {})
    hours = [r for r in review.load if r["model"] == model]
    rows = _slo_rows(review, model)
    charts, chart_notes = [], []
    if (note := load_note(review, model)) is None:
        charts.append((load_chart(model, hours, PROVIDER_MANAGED if hosted else NO_CAPACITY),
                       "Demand per UTC hour, output tokens/s"
                       + (" (provider-managed: no capacity line)." if hosted else ", against capacity.")))
    else:
        chart_notes.append(note)
    if _attainment_charted(review, model):
        charts.append((attainment_chart(model, rows, policy.get("attainment_target")),
                       "Attainment per ISL bucket against the commitment (pale: not judged)."))
    elif (note := attainment_note(review, model)) is not None:
        chart_notes.append(note)
    notes: list[Text | str] = [*slo_notes(review, model), *hourly_findings(review, model)]
    notes += memory_warnings(review, model)
    notes += [line for cap in review.capacity if cap["model"] == model
              if (line := rebaseline_text(review, cap)) is not None]
    blocks: list[Table | Text | Sub | str] = []
    if hosted:
        deployments = sorted({v["deployment_id"] for v in review.verdict if v["model"] == model}
                             | {r["deployment_id"] for r in review.cost_history
                                if r["day"] == review.day and r["model"] == model})
        blocks += [Sub("Latency, input and rate limits"),
                   Text("No capacity: provider-managed", f" ({', '.join(deployments)})" if deployments else "",
                        ", so no GPU figure, capacity template or plan."), hosted_table(review, model)]
    for cap in (c for c in review.capacity if c["model"] == model):
        blocks += [Sub(f"Capacity template and figures of {cap['deployment_id']}: how GPUs needed is reached"),
                   Text(cap["deployment_id"], ": ", configuration(cap, review.deployments.get(cap["deployment_id"]))),
                   template_table(review, cap), figures_table(review, cap), *sweep_parts(review, cap),
                   *work_model_parts(review, cap)]
    blocks += memory_parts(review, model)
    if rows:
        blocks += [Sub("P99 latency per ISL bucket"), latency_table(review, model)]
    blocks += [Sub("Workload, input tokens and prefix-cache what-if"), *token_parts(review, model)]
    blocks += (["Prefix-cache what-if: not replayed for a provider-managed model (its cache is the provider's)."]
               if hosted and not any(r["model"] == model for r in review.whatif) else whatif_findings(review, model))
    if (table := whatif_table(review, model)) is not None:
        blocks.append(table)
    what = ("latency, input, rate limits" if hosted else "capacity template and figures (how GPUs needed is "
                                                         "reached), work model and mix, memory budget, P99 "
                                                         "latency") + ", workload, input, cache what-if"
    folds = [Fold(f"Details of {model}: {what}", blocks)]
    heading = f"Model {model}" + (" (hosted API, provider-managed)" if hosted else "")
    return ModelSection(f"model-{_anchor(model)}", heading, hosted, charts, chart_notes,
                        slo_table(review, model) if rows else None, notes, folds)


def document(review: Review) -> dict[str, Any]:
    """What both templates print, in order: the verdict and the answer lines, the cost per MTok over the days (one
    chart for every model), a section per model, the glossary."""
    history = [r for r in review.cost_history if r["day"] <= review.day]
    cost = [(cost_chart(history, review.day), "Cost per million output tokens of compliant requests, per "
                                              "deployment, on every published day up to "
                                              f"{review.day.isoformat()} (a day not published is a gap).")
            ] if _cost_series(history) else []
    judged = _judged_verdicts(review)
    return {
        "title": f"Capacity review {review.day.isoformat()}",
        "lede": LEDE,
        "verdict": verdict_table(review) if judged else None,
        "legend": VERDICTS,
        "answers": answer_lines(review),
        "verdict_notes": verdict_notes(review),
        "cost_charts": cost,
        "cost_notes": cost_notes(review),
        "models": [_model_section(review, m, hosted=False) for m in _models(review)]
                  + [_model_section(review, m, hosted=True) for m in _hosted_models(review)],
        "glossary": GLOSSARY,
    }


def tables(review: Review) -> Iterator[Table]:
    """Every table of the review, in document order (the HTML and the Markdown print the same ones)."""
    doc = document(review)
    if doc["verdict"] is not None:
        yield doc["verdict"]
    for section in doc["models"]:
        if section.slo is not None:
            yield section.slo
        for fold in section.folds:
            yield from (b for b in fold.blocks if isinstance(b, Table))


# --- rendering (tokenledger/report/templates/) ------------------------------------------------------------------------

def _md_cell(text: Any) -> str:
    """A table cell or line: HTML-escaped (Markdown is often rendered as HTML), pipes escaped, on one line."""
    return html.escape(str(text), quote=False).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


@cache
def _environment(markdown: bool) -> jinja2.Environment:
    """The templates' environment: HTML autoescaped (a Fig, Text or Term prints its own marked-up HTML), Markdown
    with the `md` filter escaping each cell."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=not markdown,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["md"] = _md_cell
    env.tests["table"] = lambda block: isinstance(block, Table)
    env.tests["sub"] = lambda block: isinstance(block, Sub)
    return env


def render_html(review: Review) -> str:
    """The review as one self-contained HTML page (inline CSS and SVG, nothing fetched), its verdict first."""
    return _environment(False).get_template("review.html.j2").render(**document(review))


def render_markdown(review: Review) -> str:
    """The review's tables and lines as Markdown (no charts, nothing folded), its verdict first."""
    return _environment(True).get_template("review.md.j2").render(**document(review))
