"""Publishing a day: every table's file is staged first, then all are renamed into place, then a manifest.

A run that fails or is killed before the renames leaves every published file of the day exactly as it was
(staged copies carry temporary names no reader looks for, and are removed). The renames are atomic per file and
done together at the end, after everything is staged and flushed, so the window in which a reader could see one
table new and another old is the few milliseconds of that loop; the manifest, written last, names the run that
published each file and its checksum, so such a mix (or any later tampering) is detectable, and re-running the
day repairs it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb

from tokenledger import lake
from tokenledger.catalog import TableRef
from tokenledger.duck import quote_path
from tokenledger.errors import LedgerError
from tokenledger.paths import HomeLayout

MANIFESTS = "_manifests"


@dataclass(frozen=True)
class PublishedFile:
    table: str
    path: Path
    rows: int
    sha256: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_path(layout: HomeLayout, day: date) -> Path:
    return layout.exports / MANIFESTS / f"day={day.isoformat()}.json"


def publish_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, day: date, tables: Sequence[TableRef],
                run_id: str) -> list[PublishedFile]:
    """Copy each table's day from the lake to exports/ (finance also as CSV), all or nothing before the renames."""
    staged: list[tuple[Path, Path, str, int]] = []
    try:
        for ref in tables:
            source = lake.day_file(layout.lake, ref.schema, ref.name, day)
            if not source.is_file():
                raise LedgerError(f"{ref.qualified} has no file for {day} ({source}): materialize that day's "
                                  "upstream assets first. Nothing of the day was published.")
            target = lake.day_file(layout.exports, ref.schema, ref.name, day)
            rows = con.execute(f"SELECT count(*) FROM read_parquet({quote_path(source)})").fetchone()[0]
            staged.append((lake.stage_copy(source, target), target, ref.qualified, rows))
            if ref.csv_export:
                csv = target.with_name("data.csv")
                tmp, _ = lake.stage_query(con, f"SELECT * FROM read_parquet({quote_path(source)})", csv, fmt="csv")
                staged.append((tmp, csv, ref.qualified, rows))
        published = []
        for tmp, target, table, rows in staged:
            os.replace(tmp, target)
            published.append(PublishedFile(table, target, rows, _sha256(target)))
    finally:
        for tmp, *_ in staged:
            tmp.unlink(missing_ok=True)
    _write_manifest(layout, day, run_id, published)
    return published


def _write_manifest(layout: HomeLayout, day: date, run_id: str, files: list[PublishedFile]) -> None:
    path = manifest_path(layout, day)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "day": day.isoformat(),
        "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_id": run_id,
        "files": [{"table": f.table, "path": str(f.path.relative_to(layout.exports)), "rows": f.rows,
                   "sha256": f.sha256} for f in files],
    }
    tmp = lake.temporary_name(path)
    tmp.write_text(json.dumps(body, indent=2) + "\n")
    os.replace(tmp, path)


def verify_day(layout: HomeLayout, day: date) -> list[str]:
    """Files of a published day that differ from its manifest (empty when the day is whole and untouched)."""
    path = manifest_path(layout, day)
    if not path.is_file():
        return [f"no manifest for {day}"]
    problems = []
    for entry in json.loads(path.read_text())["files"]:
        file = layout.exports / entry["path"]
        if not file.is_file():
            problems.append(f"{entry['path']} is missing")
        elif _sha256(file) != entry["sha256"]:
            problems.append(f"{entry['path']} differs from the published version")
    return problems


@contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (created if needed) across processes, e.g. while rebuilding a
    table that several runs rebuild."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
