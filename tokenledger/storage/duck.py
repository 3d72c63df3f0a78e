"""DuckDB connections for request-level work, and the SQL files under sql/.

Each step computes on a connection of its own to the process's in-memory DuckDB, which has a memory limit and a
spill folder, reading and writing Parquet files. No step holds a lock on the warehouse file while it computes, so
days can run in parallel; the warehouse only holds views (see `tokenledger.publish.warehouse`).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.packaged import sql_file

# One in-memory database per process and compute settings; every step gets a connection of its own to it (its temp
# tables, views and settings are its own). Opening a database costs 20-70 ms, a connection to an open one 0.4 ms,
# and a run of a day opens one for every step and check.
_database: dict[str, Any] = {}


def _shared_database(spill_root: Path, memory_limit: str, threads: int | None) -> duckdb.DuckDBPyConnection:
    """This process's database for these settings, spilling to `spill_root/spill-pid<pid>` (a later run removes
    the folder once this process is gone, tokenledger/storage/housekeeping.py). A database of other settings (another
    home, in tests) is closed first: steps run one at a time in a run's process."""
    key = (os.getpid(), str(spill_root), memory_limit, threads)
    if _database.get("key") == key:
        return _database["db"]
    close_shared_database()
    spill_dir = spill_root / f"spill-pid{os.getpid()}"
    spill_dir.mkdir(parents=True, exist_ok=True)
    # The external file cache keys a file by its path and modification time, in seconds: a day file rewritten in
    # the same second (a re-run) could be read stale from it.
    config: dict[str, Any] = {"memory_limit": memory_limit, "temp_directory": str(spill_dir),
                              "enable_external_file_cache": False}
    if threads:
        config["threads"] = threads
    _database.update(key=key, db=duckdb.connect(":memory:", config=config), spill=spill_dir)
    return _database["db"]


def close_shared_database() -> None:
    """Close this process's compute database and remove its spill folder."""
    db, spill = _database.pop("db", None), _database.pop("spill", None)
    _database.pop("key", None)
    if db is not None:
        db.close()
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)


atexit.register(close_shared_database)


_MEMORY_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
                 "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's memory limit of `con`'s database, in bytes (DuckDB reads the setting back as, e.g., '3.7 GiB')."""
    text = str(con.execute("SELECT current_setting('memory_limit')").fetchone()[0]).strip()
    number, _, unit = text.partition(" ")
    if unit not in _MEMORY_UNITS:
        raise ValueError(f"DuckDB's memory_limit reads {text!r}, not a size this code knows")
    return int(float(number) * _MEMORY_UNITS[unit])


@contextmanager
def compute_connection(spill_root: Path, memory_limit: str = "4GB", threads: int | None = None
                       ) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of its own, in UTC, to this process's in-memory database, which spills under `spill_root`
    instead of growing past `memory_limit`."""
    con = _shared_database(spill_root, memory_limit, threads).cursor()
    try:
        # Naive timestamps in the inputs are UTC; without this DuckDB would read them in the machine's zone.
        con.execute("SET TimeZone = 'UTC'").fetchall()
        yield con
    finally:
        con.close()


def scratch_connection() -> duckdb.DuckDBPyConnection:
    """A connection of its own to a plain in-memory database shared by the process, for small queries over files
    (never DuckDB's default connection, which other code may be using). Close it after use."""
    if "plain" not in _database or _database["plain"][0] != os.getpid():
        _database["plain"] = (os.getpid(), duckdb.connect(":memory:", config={"enable_external_file_cache": False}))
    return _database["plain"][1].cursor()


@cache
def sql_text(name: str) -> str:
    """The statement in sql/<stage>/<name>.sql (one statement per file: DuckDB binds parameters only in the last)."""
    return sql_file(name).read_text()


def used_params(text: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The named parameters a statement uses (DuckDB rejects unused ones)."""
    return {k: v for k, v in (params or {}).items() if re.search(rf"\${k}\b", text)}


def statement(name: str, **fmt: str) -> str:
    """sql/<name>.sql, with each `{placeholder}` named in `fmt` filled by an identifier or a generated SQL
    fragment (never by a value: values are parameters). Other braces (format('{}', ...)) are left alone."""
    text = sql_text(name)
    if not fmt:
        return text
    missing = sorted(set(fmt) - set(re.findall(r"\{(\w+)\}", text)))
    if missing:
        raise KeyError(f"sql/{name}.sql has no placeholder {', '.join(missing)}")
    return re.sub(r"\{(\w+)\}", lambda m: fmt.get(m.group(1), m.group(0)), text)


def run_sql(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None,
            **fmt: str) -> duckdb.DuckDBPyConnection:
    """Execute sql/<name>.sql with its named parameters bound."""
    text = statement(name, **fmt)
    return con.execute(text, used_params(text, params))


def register_arrow(con: duckdb.DuckDBPyConnection, name: str, data: Any) -> None:
    """Register an Arrow table or stream as view `name`. DuckDB 2.0 refuses `register` while an earlier result of
    the connection is unread ("unfinished result"); only `execute` closes one, so a trivial statement runs first."""
    con.execute("SELECT 1").fetchall()
    con.register(name, data)


def quote_path(path: Path | str) -> str:
    """A path to write (COPY ... TO), as a SQL string literal. Never for a path to read: see `sql_path`."""
    return "'" + str(path).replace("'", "''") + "'"


# DuckDB expands `*`, `?` and `[` in any path it reads, even one file's: a file named `zz-*.jsonl` would read its
# neighbours, a home under `/data/ho?me` another home. Escaped as one-character classes they match only themselves.
_GLOB_ESCAPES = str.maketrans({"[": "[[]", "*": "[*]", "?": "[?]"})


def literal_path(path: Path | str) -> str:
    """`path` as DuckDB's readers must be given it (as a parameter or in a list) to read that file and no other."""
    return str(path).translate(_GLOB_ESCAPES)


def sql_path(path: Path | str) -> str:
    """A path to read, as a SQL string literal (for a reader written into a statement rather than bound)."""
    return "'" + literal_path(path).replace("'", "''") + "'"


def glob_path(root: Path | str, pattern: str) -> str:
    """A glob for DuckDB: the folder `root` read literally, then the wildcard `pattern` below it."""
    return literal_path(root).rstrip("/") + "/" + pattern


def query_files(text: str, params: Mapping[str, Any] | None = None) -> list[tuple]:
    """All rows of a small query over files, on a connection of its own (`scratch_connection`)."""
    con = scratch_connection()
    try:
        return con.execute(text, params or {}).fetchall()
    finally:
        con.close()
