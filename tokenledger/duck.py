"""DuckDB connections for request-level work, and the SQL files under sql/.

Each step computes in its own in-memory DuckDB with a memory limit and a spill folder, reading and writing
Parquet files. No step holds a lock on the warehouse file while it computes, so days can run in parallel; the
warehouse only holds views (see `tokenledger.warehouse`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.paths import SQL_DIR


@contextmanager
def compute_connection(spill_dir: Path, memory_limit: str = "4GB", threads: int | None = None
                       ) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB in UTC that spills to `spill_dir` instead of growing past `memory_limit`."""
    spill_dir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"memory_limit": memory_limit, "temp_directory": str(spill_dir)}
    if threads:
        config["threads"] = threads
    con = duckdb.connect(":memory:", config=config)
    try:
        # Naive timestamps in the inputs are UTC; without this DuckDB would read them in the machine's zone.
        con.execute("SET TimeZone = 'UTC'").fetchall()
        yield con
    finally:
        con.close()


@cache
def sql_text(name: str) -> str:
    """The statement in sql/<name>.sql (one statement per file: DuckDB binds parameters only in the last)."""
    return (SQL_DIR / f"{name}.sql").read_text()


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
