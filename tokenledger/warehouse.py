"""The warehouse file: views over the published tables, so DuckDB users query them by name.

    core.<table>               the core tables of the published days (.published/current/lake/core/...)
    quality.*, infra.*, finance.*   the published tables (exports/, which points at .published/current/exports)
    quality.quarantine_pending the latest computed quarantine of every day, published or not: where a day blocked
                               by a check shows what it quarantined (the published quality.quarantine does not
                               change until the day passes)

Views read paths that never change (through the `current` switch), so they show a newly published day without
being touched, and a day blocked by a check changes nothing they show. They are written only when the set of
views changes (a table published for the first time, or a new version of tokenledger): the statements' digest
is kept beside the warehouse, so a daily run does not open the file at all. DuckDB lets one process hold the
file for writing; when a refresh is needed and another process holds it (an open notebook), the run waits a few
seconds, then says so plainly and the CLI exits non-zero, while the exports it published stay published.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
from dagster_duckdb import DuckDBResource

from tokenledger import lake
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, TableRef
from tokenledger.duck import glob_path, literal_path
from tokenledger.paths import HomeLayout
from tokenledger.publishing import LAKE

PENDING_QUARANTINE = TableRef("quality", "quarantine_pending")


def writable_database(path: Path) -> Path:
    """Where DuckDB can write the database file meant for `path`.

    DuckDB 2.0 cannot commit to a database whose real path holds '?' (it names the write-ahead log by inserting
    '.wal' before the '?', into a folder that does not exist), and it resolves symlinks before naming it. Such a
    warehouse is therefore kept under the user's data folder (`$XDG_DATA_HOME/tokenledger/`, named after a hash of
    `path`), and `path` is a symlink to it, so `duckdb.connect(path)` keeps working for readers and writers."""
    if "?" not in str(path.resolve() if path.is_symlink() else path):
        return path
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "tokenledger"
    real = data / f"warehouse-{hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:16]}.duckdb"
    real.parent.mkdir(parents=True, exist_ok=True)
    if not (path.is_symlink() and os.readlink(path) == str(real)):
        tmp = path.with_name(f".{path.name}.pid{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(real)
        os.replace(tmp, path)
    return real


class WarehouseLocked(Exception):
    """Another process holds the warehouse file for writing."""


class WarehouseResource(DuckDBResource):
    """dagster-duckdb's resource for the warehouse file, waiting `lock_wait_s` (not DuckDBResource's ten
    retries over about 100 seconds) when another process holds the file, then raising WarehouseLocked."""

    lock_wait_s: float = 5.0

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        deadline = time.monotonic() + self.lock_wait_s
        delay = 0.1
        while True:
            try:
                con = duckdb.connect(str(writable_database(Path(self.database))), read_only=False,
                                     config={"custom_user_agent": "dagster", **self.connection_config})
                break
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() > deadline:
                    holder = str(exc).split("Conflicting lock is held in", 1)[-1].strip().rstrip(".")
                    raise WarehouseLocked(f"{self.database} is open for writing in another process ({holder})"
                                          ) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        try:
            yield con
        finally:
            con.close()


@dataclass(frozen=True)
class ViewRefresh:
    views: list[str]
    refreshed: bool
    problem: str | None = None


def _has_days(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob(f"day=*/{lake.DATA_FILE}"))


def _view(ref: TableRef, source: str, day_in_path: bool = False) -> str:
    """A view over `source`. A published table's files hold every column but `day`, which their folder names give
    (hive partitioning, typed DATE, listed first as in the contract); the core tables and the lake's quarantine
    hold `day` themselves."""
    hive = "true, hive_types = {'day': DATE}" if day_in_path else "false"
    columns = "day, * EXCLUDE (day)" if day_in_path else "*"
    return (f"CREATE OR REPLACE VIEW {ref.qualified} AS SELECT {columns} FROM "
            f"read_parquet('{source.replace(chr(39), chr(39) * 2)}', union_by_name = true, hive_partitioning = {hive})")


def view_statements(layout: HomeLayout) -> list[tuple[str, str]]:
    """(view, CREATE statement) for every table that has a published day (and the trend, the pending quarantine)."""
    from tokenledger.trend import TREND

    current = layout.published / "current"
    statements = []
    for ref in CORE_TABLES:
        folder = current / LAKE / ref.schema / ref.name
        if _has_days(folder):
            statements.append((ref.qualified, _view(ref, glob_path(folder, f"day=*/{lake.DATA_FILE}"))))
    for ref in PUBLISHED_TABLES:
        folder = layout.exports / ref.schema / ref.name
        if _has_days(folder):
            statements.append((ref.qualified, _view(ref, glob_path(folder, f"day=*/{lake.DATA_FILE}"),
                                                    day_in_path=True)))
    trend = layout.exports / TREND.schema / TREND.name / lake.DATA_FILE
    if trend.is_file():
        statements.append((TREND.qualified, _view(TREND, literal_path(trend))))
    pending = layout.lake / "quality" / "quarantine"
    if _has_days(pending):
        statements.append((PENDING_QUARANTINE.qualified,
                           _view(PENDING_QUARANTINE, glob_path(pending, f"day=*/{lake.DATA_FILE}"))))
    return statements


def _digest_path(layout: HomeLayout) -> Path:
    return layout.warehouse.with_name(layout.warehouse.name + ".views")


def refresh_views(layout: HomeLayout, resource: WarehouseResource | None = None) -> ViewRefresh:
    """Create or replace the views when their statements changed since the last refresh (see the docstring)."""
    statements = view_statements(layout)
    names = [name for name, _ in statements]
    digest = hashlib.sha256("\n".join(sql for _, sql in statements).encode()).hexdigest()
    marker = _digest_path(layout)
    if layout.warehouse.is_file() and marker.is_file() and marker.read_text().strip() == digest:
        return ViewRefresh(names, refreshed=False)
    resource = resource or WarehouseResource(database=str(layout.warehouse))
    try:
        with resource.get_connection() as con:
            for schema in sorted({name.split(".")[0] for name in names}):
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            for _, sql in statements:
                con.execute(sql)
    except WarehouseLocked as exc:
        return ViewRefresh(names, refreshed=False,
                           problem=f"the warehouse views were not refreshed: {exc}. The exports are published; "
                                   "close that connection (or open the warehouse read-only) and run any day again "
                                   "to refresh them.")
    marker.write_text(digest + "\n")
    return ViewRefresh(names, refreshed=True)
