"""The load-test history a day's capacity reads (tokenledger.capacity.day.attach_loadtest_history): a file of
core.loadtest_steps written before a column was added stops the day with what to re-run, instead of a DuckDB
schema error or a silently NULL configuration."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import pytest

from tokenledger.capacity.day import attach_loadtest_history
from tokenledger.contracts import load_contract
from tokenledger.errors import LedgerError
from tokenledger.storage import lake
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout


def _write_steps(layout: HomeLayout, day: date, drop: tuple[str, ...] = ()) -> Path:
    """One day's file of core.loadtest_steps with one row of run r1, typed by the contract, less `drop`."""
    path = lake.day_file(layout.lake, "core", "loadtest_steps", day)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [c for c in load_contract("core_loadtest_steps").table().columns if c.name not in drop]
    values = ", ".join(f"{'$run' if c.name == 'run_id' else 'NULL'}::{c.physical_type} AS {c.name}"
                       for c in columns)
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT {values}) TO '{path}' (FORMAT parquet)", {"run": "r1"})
    return path


def test_a_history_file_without_a_new_column_names_the_day_to_rematerialize(tmp_path: Path) -> None:
    layout = HomeLayout.of(tmp_path)
    _write_steps(layout, date(2026, 11, 15))
    old = _write_steps(layout, date(2026, 11, 16), drop=("max_num_seqs", "input_total"))
    with duckdb.connect() as con, pytest.raises(LedgerError) as raised:
        attach_loadtest_history(con, layout, DayWindow(date(2026, 11, 17)))
    message = str(raised.value)
    assert message.startswith(f"{old}: core.loadtest_steps of 2026-11-16 was written by an earlier tokenledger")
    # the first missing column in contract order, and how many more
    missing = [c.name for c in load_contract("core_loadtest_steps").table().columns
               if c.name in ("max_num_seqs", "input_total")]
    assert f"has no column {missing[0]} (nor 1 more)" in message
    assert "--select core/loadtest_steps --partition 2026-11-16" in message and "\n" not in message


def test_a_complete_history_is_read_with_its_runs(tmp_path: Path) -> None:
    layout = HomeLayout.of(tmp_path)
    _write_steps(layout, date(2026, 11, 15))
    _write_steps(layout, date(2026, 11, 18))  # after the day: not read
    with duckdb.connect() as con:
        assert attach_loadtest_history(con, layout, DayWindow(date(2026, 11, 16))) == 1
        assert con.execute("SELECT count(*) FROM loadtest_history").fetchone() == (1,)
