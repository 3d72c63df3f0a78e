"""Publication is the day's last step: the capacity review is written before it and published with the tables, so
a step that fails after the tables are built (the review here) leaves what readers see as it was, byte for byte.

The home serves one hosted-API model and has no bill (`kind: api`, no FOCUS file): claude-api, priced by its sheet
at input 3, cache read 0.30 and output 15 USD per 1M tokens. Six requests a day, each 1,000 input tokens of which
400 cached, and 50 output tokens: per request 600 x 3 + 400 x 0.30 + 50 x 15 = 2,670 USD per 1M requests-tokens,
0.00267 USD, so 0.01602 USD a day.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import gateway_dir, make_home, request, write_jsonl
from tokenledger.cli import dagster_home_of, main
from tokenledger.faults import VARIABLE as FAILPOINT
from tokenledger.storage.layout import HomeLayout

DAYS = ("2026-11-16", "2026-11-17")

API_ONLY = """\
deployments:
  - deployment_id: claude-api
    model: claude
    kind: api
    provider: anthropic
    valid_from: 2026-11-01
"""

PRICES = """\
    api_prices:
      claude: {input_per_mtok: 3, cache_read_per_mtok: 0.30, cache_write_per_mtok: 3.75, output_per_mtok: 15}
"""


def _api_only(home: Path) -> Path:
    """The conftest home with claude-api alone, no bill, and six untimed requests on each of DAYS."""
    (home / "config" / "deployments.yaml").write_text(API_ONLY)
    costs = home / "config" / "costs.yaml"
    costs.write_text(costs.read_text() + PRICES)
    for day in DAYS:
        write_jsonl(gateway_dir(home, day) / "claude.jsonl", [
            request(f"{day}-{i}", received_at=f"{day}T1{i}:00:00Z", model="claude", deployment_id="claude-api",
                    ttft_ms=..., e2e_ms=..., queue_ms=..., itl_max_ms=..., latency_measured=False)
            for i in range(6)])
    return home


@pytest.fixture
def api_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The API-only home, nothing run yet."""
    _api_only(home)
    monkeypatch.delenv("TOKENLEDGER_IDLE_DAYS")
    # tokenledger run points DAGSTER_HOME at the home's instance; the fixture puts it back after the test.
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(home)))
    return home


@pytest.fixture(scope="module")
def first_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    """The API-only home after `tokenledger run` of DAYS[0], its first run, once for the module: the home, the exit
    code and what the command printed. A test that runs more in it works on its own copy (`_copy_of`)."""
    home = _api_only(make_home(tmp_path_factory.mktemp("first_day") / "home"))
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TOKENLEDGER_IDLE_DAYS", raising=False)
        for name in ("TOKENLEDGER_HOME", "DAGSTER_HOME"):  # main() points them at the home: restored after
            mp.setenv(name, os.environ.get(name, ""))
        code, printed = _run(home, DAYS[0])
    yield home, code, printed


def _copy_of(first_day: tuple[Path, int, str], to: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the published first day (its symlinks, relative inside the home, kept as they are) as the test's
    own home, with TOKENLEDGER_HOME and DAGSTER_HOME put back after the test."""
    home, code, printed = first_day
    assert code == 0, printed
    copy = to / "home"
    shutil.copytree(home, copy, symlinks=True, ignore=shutil.ignore_patterns("tmp"))
    monkeypatch.delenv("TOKENLEDGER_IDLE_DAYS", raising=False)
    monkeypatch.setenv("TOKENLEDGER_HOME", str(copy))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(copy)))
    return copy


def _run(home: Path, start: str, end: str | None = None, **env: str) -> tuple[int, str]:
    """`tokenledger run` in this process; returns its exit code and everything it printed."""
    out = io.StringIO()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["run", "--home", str(home), "--start", start, *(["--end", end] if end else [])])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return code, out.getvalue()


def _seen(home: Path) -> dict[str, str]:
    """What readers see: the `current` switch and every file under exports/ and reports/, with its bytes' hash."""
    seen = {".published/current": os.readlink(home / ".published" / "current")}
    for folder in ("exports", "reports"):
        root = home / folder
        seen |= {f"{folder}/{p.relative_to(root)}": hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted(root.rglob("*")) if p.is_file()}
    return seen


def test_an_api_only_day_without_a_bill_publishes_with_its_review(first_day) -> None:
    api_home, code, printed = first_day
    assert code == 0, printed
    layout = HomeLayout.of(api_home)
    manifest = json.loads((layout.exports / "_manifests" / f"day={DAYS[0]}.json").read_text())
    # The review is a published file of the day: under reports/ (a symlink to the current version), in the manifest
    assert layout.reports.is_symlink()
    assert {r["path"] for r in manifest["reports"]} == {f"capacity-review-{DAYS[0]}.html",
                                                        f"capacity-review-{DAYS[0]}.md"}
    for entry in manifest["reports"]:
        assert hashlib.sha256((layout.reports / entry["path"]).read_bytes()).hexdigest() == entry["sha256"]
    markdown = (layout.reports / f"capacity-review-{DAYS[0]}.md").read_text()
    assert "claude" in markdown
    import duckdb

    (cost,) = duckdb.connect().execute(
        "SELECT sum(cost_total) FROM read_parquet($p)",
        {"p": str(layout.exports / "finance" / "cost_per_mtok_daily" / f"day={DAYS[0]}" / "data.parquet")}
    ).fetchone()
    assert Decimal(cost) == Decimal("0.01602")
    assert "Published to" in printed and "capacity-review-2026-11-16.html" in printed


def test_right_after_a_first_run_the_warehouse_has_every_table_the_run_printed(api_home: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's own query, plain DuckDB from the home folder, right after the home's first run: the trend and
    the traces tables are published after the day tables' views were written, and have views too."""
    import duckdb

    code, printed = _run(api_home, DAYS[0], DAYS[1])
    assert code == 0, printed
    printed_tables = [line.split()[0] for line in printed.split("Published to", 1)[1].split("\n\n")[0].splitlines()[1:]]
    assert {"infra.capacity_trend", "infra.cache_whatif_traces", "finance.cost_per_mtok_daily"} <= set(printed_tables)
    monkeypatch.chdir(api_home)
    with duckdb.connect("warehouse.duckdb", read_only=True) as con:
        views = {f"{s}.{v}" for s, v in con.execute("SELECT schema_name, view_name FROM duckdb_views() "
                                                    "WHERE NOT internal").fetchall()}
        assert set(printed_tables) <= views
        assert con.execute("SELECT count(*), sum(cost_total) FROM finance.cost_per_mtok_daily").fetchone() == (
            2, Decimal("0.03204"))
        # the trend has no row here (a hosted model has no capacity) but is a table one can query
        assert con.execute("SELECT count(*) FROM infra.capacity_trend").fetchone() == (0,)
    code, out = _run_sql(api_home, "SELECT day, cost_total FROM finance.cost_per_mtok_daily ORDER BY day")
    assert code == 0 and "2026-11-17" in out and "0.016020000000" in out, out


def _run_sql(home: Path, query: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["sql", "--home", str(home), query])
    return code, out.getvalue()


def test_a_step_failing_after_the_tables_are_built_leaves_what_readers_see_as_it_was(
        first_day, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's promise: a failed run leaves what readers see as it was. The review fails (as a bug would,
    with an exception) after every table of the day is built; the day before stays published, byte for byte."""
    api_home = _copy_of(first_day, tmp_path, monkeypatch)  # DAYS[0] published by `tokenledger run`
    before = _seen(api_home)
    lake = api_home / "lake" / "finance" / "cost_per_mtok_daily" / f"day={DAYS[1]}" / "data.parquet"

    code, printed = _run(api_home, DAYS[1], **{FAILPOINT: "review:rendered:raise"})
    assert code == 1
    assert lake.is_file()  # the tables of the day were built: the failure came after them
    assert _seen(api_home) == before
    assert not (api_home / "exports" / "_manifests" / f"day={DAYS[1]}.json").exists()
    # What failed and why, in two lines, named by its asset; nothing claims a publication
    failed = printed.split(f"{DAYS[1]}  FAILED\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert failed[0] == ("    reports/capacity_review: tokenledger.faults.FailpointError: failpoint review:rendered "
                         f"reached ({FAILPOINT}=review:rendered:raise)"), printed
    assert len(failed) == 2 and "--verbose" in failed[1]
    assert "Error occurred while executing op" not in printed and "Published to" not in printed
    assert f"Nothing of {DAYS[1]} is published" in printed

    # A ranged run of both days fails on both (re-run one day a run): still nothing changes
    code, printed = _run(api_home, DAYS[0], DAYS[1], **{FAILPOINT: "review:rendered:raise"})
    assert code == 1 and _seen(api_home) == before, printed
    assert f"{DAYS[0]}  FAILED" in printed and f"{DAYS[1]}  FAILED" in printed

    # Without the fault the day publishes, with its review
    code, printed = _run(api_home, DAYS[1])
    assert code == 0, printed
    assert (api_home / "reports" / f"capacity-review-{DAYS[1]}.html").is_file()
    after = _seen(api_home)
    assert after[f"reports/capacity-review-{DAYS[0]}.html"] == before[f"reports/capacity-review-{DAYS[0]}.html"]


def test_a_reports_folder_of_an_earlier_layout_is_taken_into_the_published_version(api_home: Path) -> None:
    """Homes published before reviews were versioned have a real reports/ folder: its files stay readable."""
    old = api_home / "reports" / "capacity-review-2026-11-01.html"
    old.parent.mkdir()
    old.write_text("<html>an earlier review</html>")
    assert _run(api_home, DAYS[0])[0] == 0
    assert (api_home / "reports").is_symlink()
    assert old.read_text() == "<html>an earlier review</html>"
    assert (api_home / "reports" / f"capacity-review-{DAYS[0]}.md").is_file()
