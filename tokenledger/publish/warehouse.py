"""The warehouse file: views over the published tables, so DuckDB users query them by name.

    core.<table>               the core tables of the published days (.published/current/lake/core/...)
    quality.*, infra.*, finance.*   the published tables (.published/current/exports/..., what exports/ shows)
    quality.quarantine_pending the latest computed quarantine of every day, published or not: where a day blocked
                               by a check shows what it quarantined (the published quality.quarantine does not
                               change until the day passes)

Views read paths that never change (through the `current` switch), so they show a newly published day without
being touched, and a day blocked by a check changes nothing they show. They are written only when the set of
views changes (a table published for the first time, or a new version of tokenledger): the statements' digest
is kept beside the warehouse, so a daily run does not open the file at all. DuckDB lets one process hold the
file for writing; when a refresh is needed and another process holds it (an open notebook), the run waits a few
seconds, then says so plainly and the CLI exits non-zero, while the exports it published stay published.

The views' paths are relative to the home, so a copied home (`cp -a home elsewhere`) reads itself and nothing
else. DuckDB resolves a relative path against its `file_search_path` setting, or when that is empty against the
process's working directory; nothing resolves one against the database file's own folder (DuckDB 2.0). Hence the
rule: tokenledger opens the warehouse with `file_search_path` set to the home (`connect`, and the resource that
writes the views); anyone else opens it from the home folder (`cd $TOKENLEDGER_HOME; duckdb warehouse.duckdb`)
or sets `file_search_path` to the home. Every path a view reads is a pattern: DuckDB looks a plain relative name
up in the working directory first, even when `file_search_path` is set, but a pattern only in `file_search_path`.
And every view first checks that it resolved against its own home, whose marker file `.published/home-<id>` it
names: opened from any other folder (another home included) it fails with a message saying so, instead of reading
that folder's files. A copy of the home keeps the marker, so it reads itself.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
from dagster_duckdb import DuckDBResource

from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, WHOLE_TABLES, TableRef
from tokenledger.errors import LedgerError
from tokenledger.publish.versions import CURRENT, EXPORTS, LAKE, pull_published
from tokenledger.storage import atomic, lake, retry
from tokenledger.storage.layout import HomeLayout, url_safe_folder
from tokenledger.storage.locks import exclusive

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
        atomic.symlink(path, real)
    return real


class WarehouseLocked(Exception):
    """Another process holds the warehouse file for writing."""


class WarehouseResource(DuckDBResource):
    """dagster-duckdb's resource for the warehouse file, waiting `lock_wait_s` (not DuckDBResource's ten
    retries over about 100 seconds) when another process holds the file, then raising WarehouseLocked."""

    lock_wait_s: float = 5.0

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        for _ in retry.attempts(within_s=self.lock_wait_s, pause_s=0.1, most_s=1.0):
            try:
                con = duckdb.connect(str(writable_database(Path(self.database))), read_only=False,
                                     config={"custom_user_agent": "dagster", **self.connection_config})
                break
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                holder = str(exc).split("Conflicting lock is held in", 1)[-1].strip().rstrip(".")
        else:
            raise WarehouseLocked(f"{self.database} is open for writing in another process ({holder})")
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


HOME_MARKER = "home-"


def _markers(layout: HomeLayout) -> list[str]:
    return sorted(p.name for p in layout.published.glob(f"{HOME_MARKER}*") if p.is_file())


def home_marker(layout: HomeLayout) -> str:
    """The home's marker, `.published/home-<id>` relative to the home: created once, under a lock (so two runs
    cannot give one home two identities); only read afterwards, so a read-only copy of the home can be queried."""
    found = _markers(layout)
    if not found:
        with exclusive(layout.locks / "home-marker.lock"):
            found = _markers(layout)
            if not found:
                found = [HOME_MARKER + uuid.uuid4().hex]
                layout.published.mkdir(parents=True, exist_ok=True)
                (layout.published / found[0]).write_text(
                    "This home's identity: its warehouse views read only the home that holds this file.\n")
    return f"{layout.published.name}/{found[0]}"


def search_folder(layout: HomeLayout) -> Path:
    """The folder tokenledger gives DuckDB as `file_search_path` for the views: the home, or a plain-named symlink
    to it when its path holds a ',' (file_search_path is a comma-separated list) or a '=' (hive partitioning reads
    every key=value folder of a path, the home's ancestors too)."""
    return url_safe_folder(layout.home.absolute(), frozenset(",="))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


WRONG_HOME = ("this warehouse's views read files relative to their tokenledger home, and DuckDB resolved them "
              "against a folder that is not that home (it has no {marker}): DuckDB resolves relative paths against "
              "file_search_path, or when it is empty against the working directory. Open the warehouse from its "
              "home folder, or SET file_search_path = '<the home>' (tokenledger.publish.warehouse.connect does).")


def _view(ref: TableRef, pattern: str, marker: str, day_in_path: bool = False) -> str:
    """A view over the files `pattern` (relative to the home) matches, read only when resolved in its own home.

    A published table's files hold every column but `day`, which their folder names give (hive partitioning,
    typed DATE, listed first as in the contract); the core tables and the lake's quarantine hold `day` themselves."""
    hive = "true, hive_types = {'day': DATE}" if day_in_path else "false"
    columns = "day, * EXCLUDE (day)" if day_in_path else "*"
    guard = (f"SELECT CASE WHEN count(*) > 0 THEN true ELSE error({_quote(WRONG_HOME.format(marker=marker))}) END "
             f"FROM glob({_quote(marker)})")
    return (f"CREATE OR REPLACE VIEW {ref.qualified} AS SELECT {columns} FROM read_parquet({_quote(pattern)}, "
            f"union_by_name = true, hive_partitioning = {hive}) WHERE ({guard})")


def _known_views() -> set[str]:
    return {ref.qualified for ref in (*CORE_TABLES, *PUBLISHED_TABLES, *WHOLE_TABLES, PENDING_QUARANTINE)}


def view_statements(layout: HomeLayout) -> list[tuple[str, str]]:
    """(view, CREATE statement) for every table that has a published day (and the tables published whole: the
    trend and the what-if's traces; the pending quarantine)."""
    marker = home_marker(layout)
    current = layout.published / CURRENT
    # Relative to the home: .published/current/exports is what exports/ shows (exports may be configured elsewhere).
    relative_current = f"{layout.published.name}/{CURRENT}"
    statements = []
    for ref in CORE_TABLES:
        if _has_days(current / LAKE / ref.schema / ref.name):
            statements.append((ref.qualified, _view(
                ref, f"{relative_current}/{LAKE}/{ref.schema}/{ref.name}/day=*/{lake.DATA_FILE}", marker)))
    for ref in PUBLISHED_TABLES:
        if _has_days(current / EXPORTS / ref.schema / ref.name):
            statements.append((ref.qualified, _view(
                ref, f"{relative_current}/{EXPORTS}/{ref.schema}/{ref.name}/day=*/{lake.DATA_FILE}", marker,
                day_in_path=True)))
    for whole in WHOLE_TABLES:
        if (current / EXPORTS / whole.schema / whole.name / lake.DATA_FILE).is_file():
            statements.append((whole.qualified, _view(
                whole, f"{relative_current}/{EXPORTS}/{whole.schema}/{whole.name}/*.parquet", marker)))
    if _has_days(layout.lake / "quality" / "quarantine"):
        statements.append((PENDING_QUARANTINE.qualified, _view(
            PENDING_QUARANTINE, f"{layout.lake.name}/quality/quarantine/day=*/{lake.DATA_FILE}", marker)))
    return statements


def _digest_path(layout: HomeLayout) -> Path:
    return layout.warehouse.with_name(layout.warehouse.name + ".views")


def refresh_views(layout: HomeLayout, resource: WarehouseResource | None = None) -> ViewRefresh:
    """Create or replace the views when their statements changed since the last refresh (see the docstring)."""
    statements = view_statements(layout)
    names = [name for name, _ in statements]
    digest = hashlib.sha256("\n".join(sql for _, sql in statements).encode()).hexdigest()
    digest_file = _digest_path(layout)
    if layout.warehouse.is_file() and digest_file.is_file() and digest_file.read_text().strip() == digest:
        return ViewRefresh(names, refreshed=False)
    resource = resource or warehouse_resource(layout)
    try:
        with resource.get_connection() as con:
            # Creating a view reads its files: resolve them in this home whatever the resource was given.
            con.execute(f"SET file_search_path = {_quote(str(search_folder(layout)))}")
            for schema in sorted({name.split(".")[0] for name in names}):
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            for _, sql in statements:
                con.execute(sql)
            # A view of tokenledger's whose table has no file any more (a bucket home's core tables, which only
            # tokenledger.publish.warehouse.connect pulls) is dropped rather than left failing; other views are the
            # user's.
            existing = {f"{schema}.{name}" for schema, name in con.execute(
                "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
            for gone in sorted((existing & _known_views()) - set(names)):
                con.execute(f"DROP VIEW {gone}")
    except WarehouseLocked as exc:
        return ViewRefresh(names, refreshed=False,
                           problem=f"the warehouse views were not refreshed: {exc}. The exports are published; "
                                   "close that connection (or open the warehouse read-only) and run any day again "
                                   "to refresh them.")
    digest_file.write_text(digest + "\n")
    return ViewRefresh(names, refreshed=True)


def warehouse_resource(layout: HomeLayout) -> WarehouseResource:
    """The resource for the home's warehouse, its views resolving against the home."""
    return WarehouseResource(database=str(layout.warehouse),
                             connection_config={"file_search_path": str(search_folder(layout))})


def connect(home: HomeLayout | str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """The home's warehouse, its views reading this home from whatever folder the process runs in. Views written
    by an earlier tokenledger (absolute paths, perhaps of the home this one was copied from) are rewritten first."""
    layout = home if isinstance(home, HomeLayout) else HomeLayout.of(home)
    if layout.remote is not None:  # the bucket's published version, core tables included, then views over it
        layout.home.mkdir(parents=True, exist_ok=True)
        pull_published(layout, core=True)
    views = refresh_views(layout)
    if views.problem:
        raise LedgerError(views.problem)
    return duckdb.connect(str(layout.warehouse), read_only=read_only,
                          config={"file_search_path": str(search_folder(layout))})
