"""Publishing: what readers see changes in one step, whatever happens to the run that publishes.

The published state is a tree of versions in the home:

    .published/current -> v000042          the one switch: a symlink, replaced by a rename
    .published/v000042/exports/...         what exports/ shows (exports is a symlink to .published/current/exports)
    .published/v000042/lake/core/...       the core tables of the published days (the warehouse's core views)
    .published/v000042/reports/...         what reports/ shows: each published day's capacity review (a symlink too)

A new version is built beside the current one: every file that does not change is a hard link to the current
version's (no data is copied), the run's new files are moved in from its staging folder, and `current` is then
replaced with one rename. A reader sees the old version or the new one, never a mix of two runs: a run killed
anywhere before that rename leaves what readers see exactly as it was (its staging folder and half-built version
are removed by a later run, see tokenledger/storage/housekeeping.py), and a run killed after it has published all of it.
Versions are built under a lock, so runs publishing different days at once each keep the other's days. The
previous version, and any version replaced less than ten minutes ago, is kept for readers still reading it.

Each published table is one Hive-partitioned Parquet dataset, `exports/<schema>/<table>/day=YYYY-MM-DD/data.parquet`,
whose files hold every column but `day`: the day lives only in the folder name, so that pandas, pyarrow, Polars,
DuckDB and Spark all read the folder whole (a `day` column in the files clashes with the type each of them gives
the folder's `day`: pyarrow and pandas infer text, the file holds a date). Nothing else sits in a table's folder:
finance tables are also written as CSV for spreadsheets in their own tree, `exports/csv/<schema>/<table>/
<table>_YYYY-MM-DD.csv` (with the `day` column, and formula-like text cells neutralized by OWASP's CSV injection
rule: a cell starting with =, +, -, @, a tab or a carriage return gets a leading apostrophe), and the manifests
in `exports/_manifests/`, a folder dataset readers skip. Parquet keeps every value as it is.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.catalog import TableRef
from tokenledger.errors import LedgerError
from tokenledger.faults import failpoint
from tokenledger.publish import bucket
from tokenledger.storage import atomic, lake
from tokenledger.storage.duck import quote_path, sql_path, used_params
from tokenledger.storage.layout import HomeLayout
from tokenledger.storage.locks import exclusive
from tokenledger.storage.remote import in_parallel

MANIFESTS = "_manifests"
EXPORTS = "exports"
REPORTS = "reports"
CSV = "csv"
# Manifests of days published as datasets say so; a day without it is restaged by the next publication.
DATASET_LAYOUT = 2
LAKE = "lake"
CURRENT = "current"
VERSION_PREFIX = "v"
# In a local version: the generation each published day was last published with (a bucket's manifest holds them).
GENERATIONS = ".generations.json"
KEEP_REPLACED_S = 600
# OWASP CSV injection: a spreadsheet runs a cell starting with one of these as a formula.
_FORMULA_START = r"^[=+\-@\t\r]"


@dataclass(frozen=True)
class PublishedFile:
    table: str
    path: str  # relative to exports/
    rows: int
    sha256: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def current_version(layout: HomeLayout) -> Path | None:
    """The version folder readers see now (resolved once: read everything of one answer from it)."""
    link = layout.published / CURRENT
    if not link.is_symlink():
        return None
    return layout.published / os.readlink(link)


def published_exports(layout: HomeLayout) -> Path:
    """The exports of the current version, resolved (a reader that needs one consistent answer reads here)."""
    version = current_version(layout)
    return version / EXPORTS if version else layout.exports


def manifest_path(layout: HomeLayout, day: date) -> Path:
    """The manifest of a published day, in the version readers see now."""
    return published_exports(layout) / manifest_name(day)


def manifest_name(day: date) -> str:
    return f"{MANIFESTS}/day={day.isoformat()}.json"


def csv_file(exports: Path, schema: str, table: str, day: date) -> Path:
    """A finance table's day as CSV, outside the Parquet dataset (named after the table too: a spreadsheet will
    not open two files of the same name at once)."""
    return exports / CSV / schema / table / f"{table}_{day.isoformat()}.csv"


# The day of a published file is the name of the folder it sits in. DuckDB's hive_partitioning reads every
# key=value folder of the whole path and the first `day=` wins, so a home under /backups/day=2026-01-01/ would date
# every row that day (and its detection is on by default): it is turned off, and the day is taken from the file's
# own folder.
_DAY_OF_FILE = r"CAST(regexp_extract(filename, '(^|/)day=([0-9]{4}-[0-9]{2}-[0-9]{2})/[^/]*$', 2) AS DATE)"


def published_days(files: str) -> str:
    """A SELECT of published day files with `day` first, as the table's contract has it. `files` is a DuckDB list
    of literal paths (a parameter such as `$files`, or a list of `sql_path` literals)."""
    return (f"SELECT {_DAY_OF_FILE} AS day, * EXCLUDE (filename) FROM read_parquet({files}, filename = true, "
            "union_by_name = true, hive_partitioning = false)")


# --- staging -------------------------------------------------------------------------------------------------------

class Staging:
    """A run's staging folder under .published/staging/: files are written here first, then moved into a version.

    The folder's name carries the process id, so a later run can tell an orphan of a killed run from a folder
    still in use (tokenledger/storage/housekeeping.py)."""

    def __init__(self, layout: HomeLayout) -> None:
        self.layout = layout
        self.root = layout.published / "staging" / f"{atomic.owner_tag()}-{uuid.uuid4().hex[:12]}"
        self.files: dict[str, Path] = {}  # path in the version tree -> staged file, or a lake file to link

    def path(self, relative: str) -> Path:
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def add_query(self, con: duckdb.DuckDBPyConnection, query: str, relative: str, fmt: str = "parquet",
                  params: Mapping[str, Any] | None = None) -> int:
        """Stage the result of `query` as a Parquet (or CSV) file, flushed to disk; returns its rows."""
        target = self.path(relative)
        options = lake.LAKE_PARQUET if fmt == "parquet" else "FORMAT CSV, HEADER TRUE"
        rows = con.execute(f"COPY ({query}) TO {quote_path(target)} ({options})",
                           used_params(query, params)).fetchone()[0]
        with target.open("rb") as written:
            os.fsync(written.fileno())
        self.files[relative] = target
        return int(rows)

    def add_link(self, source: Path, relative: str) -> None:
        """Publish a finished lake file as it is (hard-linked into the version, never copied or changed)."""
        self.files[relative] = source

    def add_text(self, text: str, relative: str) -> None:
        target = self.path(relative)
        target.write_text(text, encoding="utf-8")
        self.files[relative] = target

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def csv_select(con: duckdb.DuckDBPyConnection, source: Path) -> str:
    """SELECT of a Parquet file's rows for a CSV export: text cells that a spreadsheet would run as a formula get a
    leading apostrophe (OWASP); numbers, dates and the Parquet file itself are left as they are."""
    reader = f"read_parquet({sql_path(source)}, hive_partitioning = false)"
    items = []
    for name, duck_type, *_ in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall():
        quoted = '"' + name.replace('"', '""') + '"'
        if duck_type == "VARCHAR":
            items.append(f"CASE WHEN regexp_matches({quoted}, '{_FORMULA_START}') THEN '''' || {quoted} "
                         f"ELSE {quoted} END AS {quoted}")
        else:
            items.append(quoted)
    return f"SELECT {', '.join(items)} FROM {reader}"


def _without_day(con: duckdb.DuckDBPyConnection, source: Path) -> str:
    """SELECT of a lake file's rows for its dataset: every column but `day`, which lives in the folder name (a
    table without a `day` column, such as the FOCUS export whose dates are ChargePeriodStart/End, is kept whole)."""
    reader = f"read_parquet({sql_path(source)}, hive_partitioning = false)"
    columns = {c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()}
    return f"SELECT * EXCLUDE (day) FROM {reader}" if "day" in columns else f"SELECT * FROM {reader}"


def stage_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, staging: Staging, day: date,
              published: Sequence[TableRef], core: Sequence[TableRef], run_id: str,
              reports: Sequence[Path] = ()) -> list[PublishedFile]:
    """Stage the day's published tables (their lake files without `day`, finance also as CSV with it), its core
    tables, its `reports` (finished files, published under reports/ by their names) and its manifest."""
    missing = [ref.qualified for ref in (*published, *core)
               if not lake.day_file(layout.lake, ref.schema, ref.name, day).is_file()]
    missing += [str(path) for path in reports if not path.is_file()]
    if missing:
        raise LedgerError(f"{', '.join(missing)} has no file for {day} in {layout.lake}: materialize that day's "
                          "upstream assets first. Nothing of the day was published.")
    files: list[PublishedFile] = []
    for ref in published:
        source = lake.day_file(layout.lake, ref.schema, ref.name, day)
        relative = str(lake.day_file(Path(), ref.schema, ref.name, day))
        rows = staging.add_query(con, _without_day(con, source), f"{EXPORTS}/{relative}")
        files.append(PublishedFile(ref.qualified, relative, rows, _sha256(staging.files[f"{EXPORTS}/{relative}"])))
        if ref.csv_export:
            csv_relative = str(csv_file(Path(), ref.schema, ref.name, day))
            staging.add_query(con, csv_select(con, source), f"{EXPORTS}/{csv_relative}", fmt="csv")
            files.append(PublishedFile(ref.qualified, csv_relative, rows,
                                       _sha256(staging.files[f"{EXPORTS}/{csv_relative}"])))
    for ref in core:
        source = lake.day_file(layout.lake, ref.schema, ref.name, day)
        staging.add_link(source, f"{LAKE}/{lake.day_file(Path(), ref.schema, ref.name, day)}")
    for path in reports:
        staging.add_link(path, f"{REPORTS}/{path.name}")
    manifest = {
        "day": day.isoformat(),
        "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_id": run_id,
        "layout": DATASET_LAYOUT,
        "files": [{"table": f.table, "path": f.path, "rows": f.rows, "sha256": f.sha256} for f in files],
        "reports": [{"path": path.name, "sha256": _sha256(path)} for path in reports],
    }
    staging.add_text(json.dumps(manifest, indent=2) + "\n", f"{EXPORTS}/{manifest_name(day)}")
    return files


# --- the switch ----------------------------------------------------------------------------------------------------

def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
            raise
        shutil.copy2(source, target)


def _version_number(path: Path) -> int | None:
    name = path.name
    if name.startswith(VERSION_PREFIX) and name[len(VERSION_PREFIX):].isdigit():
        return int(name[len(VERSION_PREFIX):])
    return None


def _versions(layout: HomeLayout) -> list[Path]:
    if not layout.published.is_dir():
        return []
    return sorted((p for p in layout.published.iterdir() if _version_number(p) is not None), key=_version_number)


def _files_of(root: Path) -> Iterator[Path]:
    for folder, _dirs, names in os.walk(root):
        for name in names:
            yield Path(folder) / name


def _pointers(layout: HomeLayout) -> dict[str, Path]:
    """The folders readers open, each a symlink to its part of the current version: exports/ and reports/."""
    return {EXPORTS: layout.exports, REPORTS: layout.reports}


def _legacy(layout: HomeLayout, folder: Path) -> Path | None:
    """A folder written before versions existed (a real folder, or a symlink not into .published)."""
    if folder.is_symlink():
        target = Path(os.path.realpath(folder))
        return None if layout.published.resolve() in target.parents else target
    return folder if folder.is_dir() else None


def _point(layout: HomeLayout, name: str, folder: Path) -> None:
    """Make `folder` a symlink to .published/current/<name> (relative when it sits inside the home)."""
    target = layout.published / CURRENT / name
    try:
        relative_ok = folder.parent.resolve().is_relative_to(layout.home.resolve())
    except OSError:
        relative_ok = False
    # Never resolved through `current`: the link must follow every switch, not pin today's version.
    pointer = (os.path.relpath(target, folder.parent) if relative_ok
               else str(layout.published.resolve() / CURRENT / name))
    if folder.is_symlink() and os.readlink(folder) == pointer:
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists() and not folder.is_symlink():
        # A folder of an earlier layout: its files are already linked into the new version.
        parked = layout.published / f"legacy-{name}-{uuid.uuid4().hex[:8]}"
        os.rename(folder, parked)
        shutil.rmtree(parked, ignore_errors=True)
    atomic.symlink(folder, pointer)


def published_generations(layout: HomeLayout) -> dict[str, int]:
    """The generation each published day was last published with (ISO day -> number; {} before any)."""
    if layout.remote is not None:
        return bucket.current_manifest(layout.remote).generations
    version = current_version(layout)
    path = version / GENERATIONS if version else None
    if path is None or not path.is_file():
        return {}
    return {day: int(number) for day, number in json.loads(path.read_text()).items()}


def publish_files(layout: HomeLayout, staging: Staging, expect_version: int | None = None,
                  fence: Mapping[str, int] | None = None) -> Path:
    """Build a new version from the current one plus the staged files, then switch `current` to it (one rename).

    Returns the new version's folder. The staging folder is emptied (its files are moved into the version). On a
    home on object storage the files are committed to the bucket (`tokenledger.publish.bucket.commit`) and the new
    version pulled; `expect_version` then makes the commit fail with `remote.Conflict` when another version was
    published since that one (a local home needs no such check: its versions are built under one lock).

    `fence` (ISO day -> the generation the run took the day with) is checked against the generations the published
    version holds, in the same step that switches it: a day published by a run that took it later is never
    replaced (LostHold); the new version holds the fence's generations."""
    if layout.remote is not None:
        return _publish_remote(layout, staging, expect_version, fence)
    root = layout.published
    root.mkdir(parents=True, exist_ok=True)
    with exclusive(layout.locks / "publish.lock"):
        if fence:
            generations = bucket.fenced(published_generations(layout), fence, str(root / CURRENT))
            staging.add_text(json.dumps(generations, sort_keys=True), GENERATIONS)
        current = current_version(layout)
        sources: dict[str, Path] = {}
        if current:
            sources.update({str(f.relative_to(current)): f for f in _files_of(current)})
        for name, folder in _pointers(layout).items():
            if legacy := _legacy(layout, folder):
                sources.update({f"{name}/{f.relative_to(legacy)}": f for f in _files_of(legacy)
                                if not f.name.endswith(".tmp") and not f.name.startswith(".")})
        for relative in staging.files:
            sources.pop(relative, None)
        _restage_earlier_layout(sources, staging)
        new = _switch(layout, {**sources, **staging.files},
                      moved={r for r, f in staging.files.items() if f.is_relative_to(staging.root)})
    staging.discard()
    return new


def _switch(layout: HomeLayout, files: Mapping[str, Path], moved: set[str] = frozenset()) -> Path:
    """Build a version holding `files` (path in the version -> a file to hard-link, or to move when in `moved`), then
    replace `current` with it in one rename; returns it. Called under the publishing lock."""
    root = layout.published
    current = current_version(layout)
    number = max((_version_number(v) or 0 for v in _versions(layout)), default=0) + 1
    new = root / f"{VERSION_PREFIX}{number:06d}"
    if new.exists():
        shutil.rmtree(new)
    new.mkdir(parents=True)
    for index, (relative, source) in enumerate(files.items()):
        if index == len(files) // 2:
            failpoint("publish:linking")
        target = new / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative in moved:
            os.replace(source, target)
        else:
            _link_or_copy(source, target)
    for name in _pointers(layout):
        (new / name).mkdir(exist_ok=True)
    with atomic.replacing(root / CURRENT) as switch:
        switch.symlink_to(new.name)
        if (root / CURRENT).is_dir() and not (root / CURRENT).is_symlink():
            # A copy of the home that followed symlinks (shutil.copytree's default): `current` became a folder.
            # Its files are not read (the copied exports folder was taken in above); set it aside.
            stale = atomic.temporary_name(root / f"stale-{CURRENT}")
            os.rename(root / CURRENT, stale)
            shutil.rmtree(stale, ignore_errors=True)
        if layout.remote is None:
            failpoint("publish:before-switch")
    if layout.remote is None:
        failpoint("publish:after-switch")
    for name, folder in _pointers(layout).items():
        _point(layout, name, folder)
    _collect(layout, new, current)
    return new


# --- a home on object storage ------------------------------------------------------------------------------------

REMOTE_MANIFEST = ".manifest.json"  # in a local version of a remote home: the manifest it was pulled from
# What a work folder pulls of the published versions; the core tables only for the warehouse (`core=True`).
PULLED = (f"{EXPORTS}/", f"{REPORTS}/")


def pulled_manifest(layout: HomeLayout) -> dict[str, Any]:
    """The manifest the local version of a remote home was pulled from ({} before the first pull)."""
    version = current_version(layout)
    path = version / REMOTE_MANIFEST if version else None
    return json.loads(path.read_text()) if path and path.is_file() else {"version": 0, "files": {}}


def pull_published(layout: HomeLayout, core: bool = False) -> int:
    """Make the work folder's current version the bucket's published one: its exports and reports, and with `core`
    its core tables too (what the warehouse's core views read; the steps never need them). Files already pulled
    are hard-linked from the previous local version, the others downloaded. Returns the version number."""
    # Every step of a run asks: when the manifest's ETag is the one pulled last, nothing more is read.
    local = pulled_manifest(layout)
    if local.get("etag") and current_version(layout) and local.get("core", False) >= core and \
            bucket.current_etag(layout.remote) == local["etag"]:
        return local["version"]
    manifest = bucket.current_manifest(layout.remote)
    with exclusive(layout.locks / "publish.lock"):
        local = pulled_manifest(layout)
        if local["version"] == manifest.version and local.get("etag") == manifest.etag and current_version(layout) \
                and local.get("core", False) >= core:
            return manifest.version
        current = current_version(layout)
        pulled = (*PULLED, f"{LAKE}/core/") if core else PULLED
        wanted = {rel: entry for rel, entry in manifest.files.items() if rel.startswith(pulled)}
        kept = {rel: current / rel for rel, entry in wanted.items()
                if current and local["files"].get(rel, {}).get("key") == entry["key"] and (current / rel).is_file()}
        download = layout.published / "staging" / f"{atomic.owner_tag()}-pull-{uuid.uuid4().hex[:12]}"
        try:
            fetched = {rel: download / rel for rel in wanted if rel not in kept}
            in_parallel(fetched.items(), lambda item: layout.remote.download(wanted[item[0]]["key"], item[1]))
            for rel, path in fetched.items():
                if _sha256(path) != wanted[rel]["sha256"]:
                    raise LedgerError(f"{layout.remote.where(wanted[rel]['key'])} differs from its manifest "
                                      f"(sha256): the bucket does not hold what was published. Check it, then "
                                      "re-run the days it holds.")
            manifest_file = download / REMOTE_MANIFEST
            manifest_file.parent.mkdir(parents=True, exist_ok=True)
            manifest_file.write_text(json.dumps({"version": manifest.version, "etag": manifest.etag,
                                                 "files": wanted, "core": core}))
            # A local version number of its own: the same bucket version may be pulled again with its core tables.
            _switch(layout, {**kept, **fetched, REMOTE_MANIFEST: manifest_file}, moved={*fetched, REMOTE_MANIFEST})
        finally:
            shutil.rmtree(download, ignore_errors=True)
    return manifest.version


def _publish_remote(layout: HomeLayout, staging: Staging, expect_version: int | None,
                    fence: Mapping[str, int] | None) -> Path:
    """Commit the staged files to the bucket, copy them to the plain prefixes, pull the new version (publish_files)."""
    try:
        manifest = bucket.commit(layout.remote, staging.files, expect_version, fence)
        bucket.mirror_plain_prefixes(layout.remote, manifest, staging.files)
        bucket.collect(layout.remote, manifest)
    finally:
        staging.discard()
    pull_published(layout)
    return current_version(layout)


def _restage_earlier_layout(sources: dict[str, Path], staging: Staging) -> None:
    """Days published before each table was one dataset (a manifest without `layout`), taken into the version
    being built in the dataset layout: each Parquet file without its `day` column, each CSV moved to the csv/ tree,
    the manifest rewritten. Done under the publishing lock, from the files the new version would otherwise carry
    over, so a day another run is publishing at the same time is never overwritten by its earlier copy."""
    prefix = f"{EXPORTS}/{MANIFESTS}/"
    earlier = {relative: manifest for relative, path in sources.items()
               if relative.startswith(prefix) and relative.endswith(".json")
               and (manifest := json.loads(path.read_text())).get("layout") != DATASET_LAYOUT}
    if not earlier:
        return
    with duckdb.connect() as con:
        for relative, manifest in sorted(earlier.items()):
            day = date.fromisoformat(manifest["day"])
            files = []
            for entry in manifest["files"]:
                source = sources.pop(f"{EXPORTS}/{entry['path']}", None)
                if source is None:  # already missing: verify_day keeps saying so
                    files.append(entry)
                elif entry["path"].endswith(".csv"):
                    schema, table = entry["table"].split(".", 1)
                    moved = str(csv_file(Path(), schema, table, day))
                    staging.add_link(source, f"{EXPORTS}/{moved}")
                    files.append({**entry, "path": moved})
                else:
                    target = f"{EXPORTS}/{entry['path']}"
                    reader = f"read_parquet({sql_path(source)}, hive_partitioning = false)"
                    if "day" in {c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()}:
                        staging.add_query(con, f"SELECT * EXCLUDE (day) FROM {reader}", target)
                        files.append({**entry, "sha256": _sha256(staging.files[target])})
                    else:
                        sources[target] = source  # already without it
                        files.append(entry)
            sources.pop(relative)
            staging.add_text(json.dumps({**manifest, "layout": DATASET_LAYOUT, "files": files}, indent=2) + "\n",
                             relative)


def _collect(layout: HomeLayout, current: Path, previous: Path | None) -> None:
    """Remove versions no reader can be using: never-published ones (newer than current, left by a killed run)
    and replaced ones other than the previous, once replaced for KEEP_REPLACED_S."""
    now = time.time()
    current_number = _version_number(current) or 0
    for version in _versions(layout):
        if version in (current, previous):
            continue
        number = _version_number(version) or 0
        stale = number > current_number or now - version.stat().st_mtime > KEEP_REPLACED_S
        if stale:
            shutil.rmtree(version, ignore_errors=True)


# --- reading back --------------------------------------------------------------------------------------------------

def verify_day(layout: HomeLayout, day: date) -> list[str]:
    """Files of a published day that differ from its manifest (empty when the day is whole and untouched)."""
    exports = published_exports(layout)
    path = exports / manifest_name(day)
    if not path.is_file():
        return [f"no manifest for {day}"]
    problems = []
    manifest = json.loads(path.read_text())
    entries = [(exports / e["path"], e) for e in manifest["files"]]
    entries += [(exports.parent / REPORTS / e["path"], {**e, "path": f"{REPORTS}/{e['path']}"})
                for e in manifest.get("reports", [])]
    for file, entry in entries:
        if not file.is_file():
            problems.append(f"{entry['path']} is missing")
        elif _sha256(file) != entry["sha256"]:
            problems.append(f"{entry['path']} differs from the published version")
    return problems
