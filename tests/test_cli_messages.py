"""What `tokenledger` says to ordinary mistakes: one line each, naming what was given and what to do."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import duckdb
import pytest

from tests.conftest import gateway_dir, request, write_jsonl
from tokenledger.cli import dagster_home_of, main


def _said(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """The exit code and the last line on stderr (argparse's errors exit through SystemExit)."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv,expected", [
    (["run", "--start", "2026-11-31"], "tokenledger run: error: argument --start: 2026-11-31 is not a calendar date"),
    (["run", "--start", "16/11/2026"], "tokenledger run: error: argument --start: '16/11/2026' is not a date "
                                       "(YYYY-MM-DD)"),
    (["run"], "tokenledger: error: tokenledger run needs a home (--home DIR, or TOKENLEDGER_HOME=DIR in the "
              "environment) and a first day (--start YYYY-MM-DD)"),
    (["ui"], "tokenledger: error: tokenledger ui needs a home (--home DIR, or TOKENLEDGER_HOME=DIR in the "
             "environment)"),
])
def test_argument_mistakes_are_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENLEDGER_HOME", raising=False)
    assert _said(argv, capsys) == (2, expected)


def test_range_mistakes_name_the_option_given(home: Path, capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(home)))
    code, line = _said(["run", "--home", str(home), "--start", "2030-01-01"], capsys)
    assert code == 2 and line.startswith("error: --start 2030-01-01 is not a complete UTC day yet"), line
    code, line = _said(["run", "--home", str(home), "--start", "2026-11-17", "--end", "2026-11-16"], capsys)
    assert (code, line) == (2, "error: --end 2026-11-16 is before --start 2026-11-17")


def test_a_first_day_that_fails_leaves_its_pending_quarantine_queryable(home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A new home whose first day is blocked (every row quarantined): nothing is published, the message says so
    without a table of zero rows, names the files with most rows quarantined (typo.jsonl's 4 rows before bad.jsonl's
    3) with the misspelt field, and the quarantine the check names can be opened from the home folder."""
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(home)))
    folder = gateway_dir(home, "2026-11-16")
    write_jsonl(folder / "bad.jsonl", [request(f"bad-{i}", status="okay") for i in range(3)])
    write_jsonl(folder / "typo.jsonl", [{**request(f"typo-{i}", input_tokens=...), "input_tokns": 10}
                                        for i in range(4)])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["run", "--home", str(home), "--start", "2026-11-16"])
    printed = out.getvalue()
    assert code == 1, printed
    assert "quality.quarantine_pending" in printed and "Published to" not in printed
    assert "Nothing of 2026-11-16 is published" in printed
    typo = ("input_tokens: required but missing, and the row has an unknown field input_tokns (did you mean "
            "input_tokens?)")
    # One line per file under the day's, indented under the FAILED day: file, first line, field, rule, did you mean.
    assert ("    2026-11-16 gateway: 7 of 7 rows (100.00%) quarantined, by field: input_tokens 4, status 3\n"
            f"      {folder / 'typo.jsonl'} line 1: {typo} (4 row(s))\n"
            f"      {folder / 'bad.jsonl'} line 1: status: okay is not one of ok, error, timeout, disconnected, "
            "rejected, cancelled (3 row(s))\n") in printed, printed
    monkeypatch.chdir(home)
    with duckdb.connect("warehouse.duckdb", read_only=True) as con:
        assert con.execute("SELECT count(*), min(reason), max(reason) FROM quality.quarantine_pending").fetchone() == (
            7, typo, "status: okay is not one of ok, error, timeout, disconnected, rejected, cancelled")


def test_a_long_warning_is_one_line_with_its_counts_the_worst_day_and_where_to_read_the_rest() -> None:
    from tokenledger.cli import summarize_warning

    per_day = "8 row(s) quarantined (cached_within_input 1, e2e_after_ttft 1, input_tokens 1, status 1)"
    quarantine = ("quality/ingest_reconciliation_daily:quarantine_empty: 2026-11-16 anthropic: 3 row(s) quarantined "
                  "(line is not valid JSON 3); " + "; ".join(f"2026-11-{d} gateway: {per_day}" for d in range(16, 23)))
    assert summarize_warning(quarantine, Path("/h")) == (
        "quality/ingest_reconciliation_daily:quarantine_empty: 8 entries from 2026-11-16 to 2026-11-22, most on "
        "2026-11-16 (2); the first: 2026-11-16 anthropic: 3 row(s) quarantined (line is not valid JSON 3). All of "
        'it: tokenledger sql --home /h "SELECT * FROM quality.quarantine".')
    listed = "; ".join(f"2026-11-{d} api-{i} (model m{i})" for d in (17, 18, 19) for i in (1, 2, 3))
    idle = (f"core/gateway_requests:deployments_with_requests: self-hosted deployments in force with no request that "
            f"day: {listed} and 9 more. If they served traffic, their logs are missing: land them and re-run the day.")
    assert summarize_warning(idle, Path("/h")) == (
        "core/gateway_requests:deployments_with_requests: self-hosted deployments in force with no request that day: "
        "18 entries from 2026-11-17 on; the first: 2026-11-17 api-1 (model m1). If they served traffic, their logs "
        "are missing: land them and re-run the day. All of it: the check in the Dagster UI (tokenledger ui) or "
        "tokenledger run --verbose.")
    short = "core/billing_charges:billing_fresh: 2026-11-16: no billing rows by 2026-11-18 12:00 UTC"
    assert summarize_warning(short, Path("/h")) == short


def test_a_long_warning_says_its_first_entry_whole_never_cut_mid_list() -> None:
    """The demo's week (issue 57 item 4): a gateway day's quarantine by field, and a GPU day's notes whose entries
    hold '; ' themselves, each said with the count of their days and the first whole (it was cut at 100 characters:
    'input_tokens 1....', 'a time wr....'); a single entry, however long, is said whole."""
    from tokenledger.cli import summarize_warning

    fields = ("cached_within_input 1, e2e_after_ttft 1, input_tokens 1, line is not valid JSON 1, output_tokens 1, "
              "received_at 1, request_id 1, status 1")
    quarantine = "quality/ingest_reconciliation_daily:quarantine_empty: " + "; ".join(
        f"2026-11-{d} gateway: 8 row(s) quarantined ({fields})" for d in range(16, 23))
    assert summarize_warning(quarantine, Path("/h")) == (
        "quality/ingest_reconciliation_daily:quarantine_empty: 7 entries from 2026-11-16 to 2026-11-22; the first: "
        f"2026-11-16 gateway: 8 row(s) quarantined ({fields}). All of it: tokenledger sql --home /h \"SELECT * FROM "
        'quality.quarantine".')
    note = ("{file}: 2880 line(s) with a time written without a zone (timestamp), read as UTC; nvidia-smi writes its "
            "host's local time, so this is right only where the host runs in UTC (TZ=UTC)")
    day = "2026-11-{d} gpu: " + note.format(file="raw/gpu/dt=2026-11-{d}/a-node0.csv") + "; " + note.format(
        file="raw/gpu/dt=2026-11-{d}/b-node0.csv")
    notes = "quality/ingest_reconciliation_daily:source_notes_empty: " + "; ".join(
        day.format(d=d) for d in range(16, 20))
    said = summarize_warning(notes, Path("/h"))
    assert said == ("quality/ingest_reconciliation_daily:source_notes_empty: 4 entries from 2026-11-16 to 2026-11-19; "
                    f"the first: {day.format(d=16)}. All of it: the check in the Dagster UI (tokenledger ui) or "
                    "tokenledger run --verbose.")
    one = f"quality/ingest_reconciliation_daily:source_notes_empty: {day.format(d=16)}"
    assert len(one) > 200 and summarize_warning(one, Path("/h")) == one


def test_a_misspelled_config_key_gets_a_did_you_mean_said_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home_of(home)))
    config = home / "config" / "deployments.yaml"
    config.write_text(config.read_text().replace("    gpus_per_replica: 1\n", "    gpu_per_replica: 1\n", 1))
    line = config.read_text().splitlines().index("    gpu_per_replica: 1") + 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["run", "--home", str(home), "--start", "2026-11-16"])
    printed = out.getvalue()
    said = [text for text in printed.splitlines() if "gpu_per_replica" in text]
    assert code == 1 and len(said) == 1, printed
    assert said[0].endswith(f"{config} line {line}: unknown key 'gpu_per_replica' in a deployment: did you mean "
                            "'gpus_per_replica'? (docs/configuration.md)"), said
    assert "__" not in said[0]  # asset names, not Dagster's step keys


def test_a_ranged_runs_per_day_evaluations_of_one_check_read_as_one_message() -> None:
    from tokenledger.cli import _joined

    advice = ". If they served traffic, their logs are missing: land them and re-run the day."
    what = "self-hosted deployments in force with no request that day: "
    days = [what + "2026-11-17 a (model x)" + advice, what + "2026-11-18 a (model x); 2026-11-18 b (model y)" + advice]
    assert _joined(days) == what + "2026-11-17 a (model x); 2026-11-18 a (model x); 2026-11-18 b (model y)" + advice
    assert _joined(["2026-11-16 gateway: 8 row(s)", "2026-11-17 gateway: 2 row(s)"]) == \
        "2026-11-16 gateway: 8 row(s); 2026-11-17 gateway: 2 row(s)"
