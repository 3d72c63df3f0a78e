"""Per-day Parquet files, written so that a reader sees the old day or the new day, never a mix or nothing.

A table's day lives in exactly one file, `<root>/<schema>/<table>/day=YYYY-MM-DD/data.parquet`. It is written
to a temporary name in the same folder and renamed over the old file (tokenledger/storage/atomic.py). Re-running a
day therefore replaces it whole: nothing is appended, nothing is counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.errors import LedgerError
from tokenledger.storage import atomic
from tokenledger.storage.duck import quote_path, sql_path, statement, used_params
from tokenledger.storage.layout import HomeLayout

DATA_FILE = "data.parquet"


def day_dir(root: Path, schema: str, table: str, day: date) -> Path:
    return root / schema / table / f"day={day.isoformat()}"


def day_file(root: Path, schema: str, table: str, day: date) -> Path:
    return day_dir(root, schema, table, day) / DATA_FILE


def table_glob(root: Path, schema: str, table: str) -> str:
    return str(root / schema / table / "day=*" / DATA_FILE)


# Every Parquet file is written in row groups of at most ~16 MB: DuckDB's writer holds a row group per thread until
# it is full, and its default of 122,880 rows is ~60 MB once each row carries a request's block hashes. Writing the
# 1M-request day's core.gateway_requests took a peak RSS of 955 MB with the default, 634 MB with this (the same
# 2.8-3.0 s); staging its JSON Lines 870 -> 780 MB. A small table's file is one row group either way.
ROW_GROUP_BYTES = "ROW_GROUP_SIZE_BYTES '16MB'"
LAKE_PARQUET = f"FORMAT PARQUET, COMPRESSION ZSTD, {ROW_GROUP_BYTES}"

# A scratch file (a run's staged rows, read back once or twice in the same run and then removed) is written with
# LZ4 and Parquet's version 2 encodings instead of ZSTD: staging the 1M-request day's JSON Lines took 7.75 s
# instead of 8.48 s (mean of six runs each) and reading the staged rows back 0.29 s instead of 0.37 s, for files
# ~30% larger. The lake's and the exports' files keep ZSTD, which other tools read everywhere.
SCRATCH_PARQUET = f"FORMAT PARQUET, COMPRESSION LZ4_RAW, PARQUET_VERSION V2, {ROW_GROUP_BYTES}"

# A file whose rows carry their own order (a staged row its file_index and source_line) is written with DuckDB's
# preserve_insertion_order off for that statement (`ordered=False`): kept in order, the writer holds every batch
# finished ahead of an earlier one. Staging the 10M-request day's five Parquet files (2.5M rows) peaked at 1,882 MB
# of RSS in order, 715 MB without (13.9 s -> 12.3 s). Readers never rely on a staged file's physical order.


def write_query(con: duckdb.DuckDBPyConnection, query: str, target: Path,
                params: Mapping[str, Any] | None = None, fmt: str = "parquet", scratch: bool = False,
                ordered: bool = True) -> int:
    """Write the result of `query` to `target` atomically; returns the number of rows written. `scratch`: a Parquet
    file only this run reads (SCRATCH_PARQUET). `ordered=False`: the rows may be written in any order, for a file
    whose rows carry their own (DuckDB's preserve_insertion_order off for this statement alone)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    options = LAKE_PARQUET if fmt == "parquet" else "FORMAT CSV, HEADER TRUE"
    if scratch and fmt == "parquet":
        options = SCRATCH_PARQUET
    if not ordered:
        con.execute("SET SESSION preserve_insertion_order = false")
    try:
        with atomic.replacing(target) as tmp:
            rows = con.execute(f"COPY ({query}) TO {quote_path(tmp)} ({options})",
                               used_params(query, params)).fetchone()[0]
    finally:
        if not ordered:
            con.execute("RESET SESSION preserve_insertion_order")
    return int(rows)


@contextmanager
def scratch_view(con: duckdb.DuckDBPyConnection, name: str, query: str, path: Path,
                 params: Mapping[str, Any] | None = None) -> Iterator[int]:
    """Write `query` once to the scratch file `path` (SCRATCH_PARQUET) and read it as the temp view `name` inside
    the block, which gets the rows written; the view and the file are gone after it, whatever happened."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = write_query(con, query, path, params, scratch=True)
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet({sql_path(path)})")
        yield rows
    finally:
        con.execute(f"DROP VIEW IF EXISTS {name}")
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class DayWindow:
    """One UTC day as a half-open interval [start, end) of aware datetimes."""

    day: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.day, time.min, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"day": self.day, "day_start": self.start, "day_end": self.end, **extra}


def attach_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, view: str, schema: str,
               table: str) -> None:
    """`view` over one day of a lake table; a missing day is the user's to fix by running its upstream."""
    path = day_file(layout.lake, schema, table, window.day)
    if not path.is_file():
        raise LedgerError(f"{schema}.{table} has no file for {window.day} ({path}): materialize that day's "
                          f"{schema}/{table} first (or run the whole day).")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM read_parquet({sql_path(path)})")


def write_table(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, schema: str, table: str,
                **params: object) -> int:
    """Write sql/<stage>/<table>.sql for the day to lake/<schema>/<table>/day=D/data.parquet; returns its rows."""
    return write_query(con, statement(table), day_file(layout.lake, schema, table, window.day),
                       window.params(**params))
