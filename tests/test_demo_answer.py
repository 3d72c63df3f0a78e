"""`make demo` ends with the answer (issue 57 item 4): per model, over the days run, $/MTok delivered and under SLO,
the last day's verdict in words with the days per verdict, and each day's capacity review listed once; each check
warning whole on one line (or counted); nothing on standard error.

A small demo home, two days of about 2,000 requests (one invalid row a day, within the quarantine tolerance) with
its load tests, generated and run by the command in processes of their own, as `make demo` runs them (the
definitions load there with the home's own first and last days, and Python's default warning filters apply).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT
from tokenledger.publish.answer import answer
from tokenledger.storage.layout import HomeLayout

FIRST, LAST = date(2026, 11, 16), date(2026, 11, 17)


def _env() -> dict[str, str]:
    """A user's shell: no day pinned (the tests' conftest pins both), no Dagster home, no warning filter."""
    drop = ("TOKENLEDGER_START_DATE", "TOKENLEDGER_END_DATE", "DAGSTER_HOME", "TOKENLEDGER_HOME",
            "TOKENLEDGER_IDLE_DAYS", "PYTHONWARNINGS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenledger.cli", *args], cwd=PROJECT_ROOT, env=_env(),
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess,
                                                             subprocess.CompletedProcess]:
    """`make demo`'s two commands on a small home: the home, and what generate and run did."""
    home = tmp_path_factory.mktemp("demo") / "home"
    generated = _command("generate", "--home", str(home), "--start", FIRST.isoformat(), "--days", "2",
                         "--requests-per-day", "2000", "--seed", "7", "--with-loadtest", "--bad-rows-per-day", "1")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    ran = _command("run", "--home", str(home), "--start", FIRST.isoformat(), "--end", LAST.isoformat())
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return home, generated, ran


def _answer_block(out: str) -> list[str]:
    lines = out.rstrip("\n").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Answer for ")]
    assert len(starts) == 1, out
    return lines[starts[0]:]


def _published(home: Path, schema: str, table: str, columns: str, group: str = "") -> list[tuple]:
    """A published table's days, read from the exports with DuckDB (the day from each file's folder)."""
    files = sorted(str(p) for p in (home / "exports" / schema / table).glob("day=*/data.parquet"))
    assert len(files) == 2, files
    return duckdb.connect().execute(
        f"SELECT {columns} FROM (SELECT CAST(regexp_extract(filename, 'day=([0-9-]+)/data.parquet$', 1) AS DATE) "
        f"AS day, * FROM read_parquet($f, filename = true, hive_partitioning = false)) {group} ORDER BY ALL",
        {"f": files}).fetchall()


def _names(rows: list[tuple]) -> dict[tuple[str, str], str]:
    """How the answer names a deployment: its model, with the deployment when the model has several."""
    per_model = Counter(model for model, _ in {(r[0], r[1]) for r in rows})
    return {(m, d): m if per_model[m] == 1 else f"{m} ({d})" for m, d, *_ in rows}


def test_the_answer_is_last_and_its_dollars_per_mtok_are_the_ranges_cost_over_its_tokens(demo) -> None:
    home, _, ran = demo
    block = _answer_block(ran.stdout)
    assert block[0].startswith(f"Answer for {FIRST}...{LAST}, 2 days ($/MTok over the range = its cost / its output "
                               "tokens"), block[0]
    sums = _published(home, "finance", "cost_per_mtok_daily",
                      "model, deployment_id, currency, count(*), sum(cost_total)::DOUBLE, sum(output_tokens), "
                      "sum(compliant_output_tokens), avg(cost_per_mtok_output)", "GROUP BY ALL")
    assert sums
    names = _names(sums)
    found = {(d.model, d.deployment_id, c.currency): c
             for d in answer(HomeLayout.of(home), FIRST, LAST).deployments for c in d.costs}
    assert set(found) == {(m, d, cur) for m, d, cur, *_ in sums}
    means_differ = False
    for model, deployment, currency, days, cost, output, compliant, mean_of_days in sums:
        delivered = cost / output * 1e6
        goodput = cost / compliant * 1e6 if compliant else None
        figure = found[(model, deployment, currency)]
        assert figure.per_mtok_delivered == pytest.approx(delivered, rel=1e-12)
        assert figure.per_mtok_goodput == (None if goodput is None else pytest.approx(goodput, rel=1e-12))
        under = f"{goodput:,.2f} {currency}/MTok under SLO" if goodput else "no output token under SLO"
        said = f"{delivered:,.2f} {currency}/MTok delivered, {under}, over {days} day{'s' if days > 1 else ''}"
        name = re.escape(names[(model, deployment)])
        lines = [line for line in block if re.fullmatch(rf"  {name}\s+{re.escape(said)}", line)]
        assert len(lines) == 1, (said, block)
        means_differ |= days > 1 and f"{mean_of_days:,.2f}" != f"{delivered:,.2f}"
    assert means_differ  # a mean of the daily $/MTok would print another figure: the test tells them apart


def test_each_verdict_is_the_verdict_tables(demo) -> None:
    home, _, ran = demo
    block = _answer_block(ran.stdout)
    rows = _published(home, "infra", "capacity_verdict_daily",
                      "model, deployment_id, day, verdict, verdict_text, kind")
    # A hosted-API deployment's verdicts are of the days it served (a cost row), not of days without a request.
    served = {(r[0], r[1], r[2]) for r in _published(home, "finance", "cost_per_mtok_daily",
                                                       "model, deployment_id, day, kind") if r[3] == "api"}
    names = _names(rows)
    assert any(r[5] == "api" and (r[0], r[1], r[2]) not in served for r in rows)  # the demo has such days
    for key, name in names.items():
        days = sorted((r[2], r[3], r[4]) for r in rows if (r[0], r[1]) == key
                      and (r[5] != "api" or (r[0], r[1], r[2]) in served))
        day, verdict, text = days[-1]
        at = next(i for i, line in enumerate(block) if re.match(rf"  {re.escape(name)}\s", line))
        following = block[at + 1:]
        assert following[0] == f"    {day}: {text}", (key, block)
        count = Counter(v for _, v, _ in days)
        if len(count) > 1:
            parts = following[1].removeprefix("    days per verdict: ").split(", ")
            said = {v: int(n) for v, n in (part.split(" ") for part in parts)}
            assert said == count, (key, following[1])
        else:
            assert not following[1].startswith("    days per verdict: ")


def test_each_days_review_is_listed_once_and_exists(demo) -> None:
    home, _, ran = demo
    block = _answer_block(ran.stdout)
    at = block.index("Capacity reviews, one per day (each also as .md):")
    listed = [line.strip() for line in block[at + 1:]]
    assert listed == [str(home.resolve() / "reports" / f"capacity-review-{day}.html") for day in (FIRST, LAST)]
    for review in listed:
        assert Path(review).is_file() and Path(review).with_suffix(".md").is_file()
        assert ran.stdout.count(Path(review).name) == 1, ran.stdout
    assert ran.stdout.rstrip("\n").splitlines()[-1] == f"  {listed[-1]}"  # the answer's lines are the last ones


def test_every_check_warning_is_whole_on_one_line_and_nothing_goes_to_stderr(
        demo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each warning the run printed is its check's message whole, or a count of its entries with the first one
    whole; Python warnings (a deprecated call of ours) would have gone to standard error."""
    from dagster import DagsterEventType, DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    from tokenledger.cli import _check_messages, dagster_home_of

    home, generated, ran = demo
    assert generated.stderr == "" and ran.stderr == ""
    printed = [line.removeprefix("    warning: ") for line in ran.stdout.splitlines()
               if line.startswith("    warning: ")]
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(home)))  # the home's instance, as the run opened it
    with DagsterInstance.from_ref(InstanceRef.from_dir(os.environ["DAGSTER_HOME"])) as instance:
        events = [record.dagster_event for run in instance.get_runs()
                  for record in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)]
        first_days = {}  # each warning check's first day's description: the first entry of its message
        for event in events:
            evaluation = event.event_specific_data
            if not evaluation.passed and evaluation.severity.value == "WARN":
                first_days.setdefault(evaluation.asset_check_key.name, evaluation.description)
    messages = _check_messages(SimpleNamespace(all_events=events), "WARN")
    assert messages and len(printed) == len(messages), (printed, messages)
    counted = 0
    for message, said in zip(messages, printed, strict=True):
        assert "\n" not in said and not re.search(r"(?<!\d)\.\.\.(?!\d)", said), said  # nothing cut
        whole = " ".join(message.split())
        if said != whole:
            counted += 1
            check = message.split(": ", 1)[0]
            first = " ".join(first_days[check.rsplit(":", 1)[1]].split())
            assert re.search(r": \d+ entries ", said) and f"the first: {first.rstrip('.')}." in said, (said, first)
    assert counted  # the GPU notes of two days: counted, their first day whole
