"""The demo's answer: per model (and deployment, where a model has several) over a range of days, what a million
tokens cost delivered and under SLO, the verdict in words, and where each day's capacity review is.

Read from published tables only (finance.cost_per_mtok_daily and infra.capacity_verdict_daily of the version readers
see now), so it says what any reader of the home would find. The $/MTok of a range is the range's cost over its
tokens, sum(cost_total) / sum(output_tokens) x 1e6 (sum(compliant_output_tokens) under SLO), never a mean of the
daily ratios: a quiet day's high $/MTok weighs what its tokens weigh. Amounts in different currencies are never
added: a deployment billed in two has a figure per currency.

`answer()` gives the figures, `answer_lines()` the lines `tokenledger run` ends with.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb

from tokenledger.publish.versions import REPORTS, manifest_name, published_days, published_exports, pull_published
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path
from tokenledger.storage.layout import HomeLayout

COSTS = ("finance", "cost_per_mtok_daily")
VERDICTS = ("infra", "capacity_verdict_daily")
# The verdicts from the worst, as the verdict table's contract orders them.
VERDICT_ORDER = ("slo_missed", "short", "policy", "ok")


@dataclass(frozen=True)
class RangeCost:
    """One deployment's cost and output tokens over the published days of the range, in one currency."""

    currency: str
    days: int  # days with a cost row
    cost: Decimal
    output_tokens: int
    compliant_output_tokens: int

    @property
    def per_mtok_delivered(self) -> float | None:
        """cost / output tokens x 1e6 over the range; None without an output token."""
        return float(self.cost) / self.output_tokens * 1e6 if self.output_tokens else None

    @property
    def per_mtok_goodput(self) -> float | None:
        """cost / output tokens within SLO x 1e6 over the range ($/MTok under SLO); None without one."""
        return float(self.cost) / self.compliant_output_tokens * 1e6 if self.compliant_output_tokens else None


@dataclass(frozen=True)
class DeploymentAnswer:
    model: str
    deployment_id: str
    kind: str
    costs: tuple[RangeCost, ...]  # one per currency; empty when no day had a cost row
    last_day: date | None  # the last day with a verdict
    verdict: str | None  # that day's verdict and verdict_text
    verdict_text: str | None
    verdict_days: dict[str, int] = field(default_factory=dict)  # days per verdict over the range


@dataclass(frozen=True)
class Answer:
    start: date
    end: date
    days: tuple[date, ...]  # the range's published days
    deployments: tuple[DeploymentAnswer, ...]
    reviews: tuple[str, ...]  # each published day's review (.html), where the home names it, once each, by day


def _day_files(exports: Path, schema: str, table: str, days: list[date]) -> list[str]:
    return [literal_path(f) for day in days if (f := lake.day_file(exports, schema, table, day)).is_file()]


def answer(layout: HomeLayout, start: date, end: date) -> Answer:
    """The answer for [start, end] from the tables published now (pulled first from a bucket home)."""
    if layout.remote is not None:
        pull_published(layout)
    exports = published_exports(layout)  # one version for the whole answer
    every_day = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    days = [day for day in every_day if (exports / manifest_name(day)).is_file()]
    costs: dict[tuple[str, str], list[RangeCost]] = {}
    kinds: dict[tuple[str, str], str] = {}
    verdicts: dict[tuple[str, str], list[tuple[date, str, str]]] = {}
    served: dict[tuple[str, str], set[date]] = {}  # a hosted-API deployment's days with a cost row: its traffic
    con = duckdb.connect()
    if files := _day_files(exports, *COSTS, days):
        for model, deployment, day in con.execute(
                f"SELECT DISTINCT model, deployment_id, day FROM ({published_days('$f')}) WHERE kind = 'api'",
                {"f": files}).fetchall():
            served.setdefault((model, deployment), set()).add(day)
        for model, deployment, kind, currency, n, cost, output, compliant in con.execute(
                "SELECT model, deployment_id, kind, currency, count(DISTINCT day), sum(cost_total), "
                f"sum(output_tokens), sum(compliant_output_tokens) FROM ({published_days('$f')}) "
                "GROUP BY ALL ORDER BY ALL", {"f": files}).fetchall():
            costs.setdefault((model, deployment), []).append(
                RangeCost(currency, n, Decimal(cost), int(output), int(compliant)))
            kinds[(model, deployment)] = kind
    if files := _day_files(exports, *VERDICTS, days):
        for day, model, deployment, kind, verdict, text in con.execute(
                f"SELECT day, model, deployment_id, kind, verdict, verdict_text FROM ({published_days('$f')}) "
                "ORDER BY day", {"f": files}).fetchall():
            kinds[(model, deployment)] = kind
            # A hosted-API deployment is judged on the days its model had requests: a day without any ('SLO not
            # judged') is no verdict on it, so the answer's last day and days per verdict are of the days it served.
            if kind != "api" or day in served.get((model, deployment), ()):
                verdicts.setdefault((model, deployment), []).append((day, verdict, text))
    con.close()
    answers = []
    for key in sorted(kinds, key=lambda k: (kinds[k] != "gpu", k)):  # self-hosted first, then by name
        seen = verdicts.get(key, [])
        last = seen[-1] if seen else (None, None, None)
        count = Counter(verdict for _, verdict, _ in seen)
        answers.append(DeploymentAnswer(
            *key, kinds[key], tuple(costs.get(key, ())), *last,
            {v: count[v] for v in sorted(count, key=lambda v: (VERDICT_ORDER + (v,)).index(v))}))
    reports = exports.parent / REPORTS
    shown = layout.shown(layout.reports).rstrip("/")
    reviews = tuple(f"{shown}/{name}" for day in days
                    if (reports / (name := f"capacity-review-{day.isoformat()}.html")).is_file())
    return Answer(start, end, tuple(days), tuple(answers), reviews)


def _money(value: float | None, currency: str, what: str) -> str:
    return f"{value:,.2f} {currency}/MTok {what}" if value is not None else f"no output token {what}"


def _days(n: int) -> str:
    return f"{n} day{'s' if n != 1 else ''}"


def answer_lines(found: Answer) -> list[str]:
    """The answer as `tokenledger run` prints it: a heading, per deployment its $/MTok over the range, the last
    day's verdict in words and (when the days' verdicts differ) how many days had each, then each day's review."""
    if not found.days:
        return []
    span = found.start.isoformat() if found.start == found.end else f"{found.start}...{found.end}"
    published, every = len(found.days), (found.end - found.start).days + 1
    lines = [f"Answer for {span}, {_days(published)}{f' of {every} published' if published != every else ''} "
             "($/MTok over the range = its cost / its output tokens, finance.cost_per_mtok_daily; "
             "verdicts: infra.capacity_verdict_daily):"]
    models = Counter(d.model for d in found.deployments)
    names = [d.model if models[d.model] == 1 else f"{d.model} ({d.deployment_id})" for d in found.deployments]
    width = max(map(len, names), default=0)
    for name, d in zip(names, found.deployments, strict=True):
        if not d.costs:
            lines.append(f"  {name:<{width}}  no cost published")
        for cost in d.costs:
            lines.append(f"  {name:<{width}}  {_money(cost.per_mtok_delivered, cost.currency, 'delivered')}, "
                         f"{_money(cost.per_mtok_goodput, cost.currency, 'under SLO')}, over {_days(cost.days)}")
        if d.verdict is not None:
            lines.append(f"    {d.last_day}: {d.verdict_text}")
            if len(d.verdict_days) > 1:
                lines.append("    days per verdict: " + ", ".join(f"{v} {n}" for v, n in d.verdict_days.items()))
    if found.reviews:
        lines.append("Capacity reviews, one per day (each also as .md):")
        lines += [f"  {review}" for review in found.reviews]
    return lines
