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
        con.execute("SET TimeZone = 'UTC'")
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
    """sql/<name>.sql, with `{placeholders}` filled by identifiers (never by values: those are parameters)."""
    text = sql_text(name)
    return text.format(**fmt) if fmt else text


def run_sql(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None,
            **fmt: str) -> duckdb.DuckDBPyConnection:
    """Execute sql/<name>.sql with its named parameters bound."""
    text = statement(name, **fmt)
    return con.execute(text, used_params(text, params))


def quote_path(path: Path | str) -> str:
    """A file path as a SQL string literal, for statements (COPY ... TO) that cannot take a parameter there."""
    return "'" + str(path).replace("'", "''") + "'"
