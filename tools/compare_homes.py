"""Compare what two tokenledger homes published: every table, row for row, and the reports.

    python tools/compare_homes.py HOME_A HOME_B [--no-core] [--no-reports]

Two local homes (folders) that ran the same days from the same raw files, for example the same generated day run by
an editable checkout and by an installed wheel, or a demo week before and after a change that must not move a
figure. Exit 0 when every table holds the same rows, 1 naming each table that differs (both row counts and a
sample row found in one home only), 2 when a home is not one.

What is compared:
- every published table, `exports/<schema>/<table>/` (a Parquet dataset, `day=YYYY-MM-DD/` per day);
- the finance tables' CSV copies, `exports/csv/<schema>/<table>/*.csv` (read as text, cell for cell);
- the core tables published with them, `.published/current/lake/core/<table>/` (unless --no-core);
- the capacity reviews, `reports/*` (unless --no-reports), as text.

Tables are equal when their columns (names and types) match and their rows are the same multiset: what
`SELECT * ... ORDER BY ALL` returns is the same list (DuckDB's EXCEPT ALL both ways, so NULL equals NULL and a
float must match to the bit). Each table's own file path (`day=.../data.parquet`) is one more column, so a row
published under another day differs. A table whose files are byte-identical is said so.

What may differ between two homes without changing a figure is normalised before comparing, and listed in the
output: the home's own path (in text columns: `quality.quarantine.file`, the core tables' `source_file`; a home
is named by the absolute path it was given and by its resolved path) and the id of the Dagster run that published
a day (read from `exports/_manifests/*.json`; in the reports, any `run <uuid>`). Nothing else is ignored.

Needs only DuckDB (the project's own dependency) and no tokenledger import, so it compares homes written by two
versions of the code. A home in a bucket is not read: compare its work folder, or copy the published prefix down.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

HOME_TOKEN = "$HOME"
RUN_TOKEN = "$RUN_ID"
# In the reports' text: "published by Dagster run <uuid>", "written by run <uuid>"; in the HTML the id is a figure
# marked with its source: `<span data-table="run" data-column="run_id" ...><uuid></span>`.
REPORT_RUN_ID = re.compile(r'(\brun |data-column="run_id"[^>]*>)'
                           r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


class NotAHome(Exception):
    pass


@dataclass
class Dataset:
    """One table of a home: its files, relative to its folder."""

    name: str  # infra.slo_daily, csv:finance.cost_per_mtok_daily, core.gateway_requests
    folder: Path
    files: list[str]
    kind: str  # "parquet" or "csv"


@dataclass
class Outcome:
    name: str
    verdict: str  # "bytes", "rows", "DIFFERENT", "MISSING"
    rows: tuple[int | None, int | None] = (None, None)
    notes: list[str] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)


def datasets(home: Path, core: bool = True) -> dict[str, Dataset]:
    """Every table `home` published, by name."""
    exports = home / "exports"
    if not exports.is_dir():
        raise NotAHome(f"{home} has no exports/ folder: not a tokenledger home that published a day")
    found: dict[str, Dataset] = {}
    for schema in sorted(p for p in exports.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        if schema.name == "csv":
            for csv_schema in sorted(p for p in schema.iterdir() if p.is_dir()):
                for table in sorted(p for p in csv_schema.iterdir() if p.is_dir()):
                    name = f"csv:{csv_schema.name}.{table.name}"
                    found[name] = Dataset(name, table, _files(table, "*.csv"), "csv")
            continue
        for table in sorted(p for p in schema.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
            name = f"{schema.name}.{table.name}"
            found[name] = Dataset(name, table, _files(table, "*.parquet"), "parquet")
    lake_core = home / ".published" / "current" / "lake" / "core"
    if core and lake_core.is_dir():
        for table in sorted(p for p in lake_core.iterdir() if p.is_dir()):
            name = f"core.{table.name}"
            found[name] = Dataset(name, table, _files(table, "*.parquet"), "parquet")
    return found


def _files(folder: Path, pattern: str) -> list[str]:
    folder = folder.resolve()
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(pattern) if p.is_file())


def run_ids(home: Path) -> set[str]:
    """The ids of the Dagster runs that published the home's days (each day's manifest names its run)."""
    ids: set[str] = set()
    for manifest in (home / "exports" / "_manifests").glob("*.json"):
        run_id = json.loads(manifest.read_text()).get("run_id")
        if run_id:
            ids.add(str(run_id))
    return ids


def home_strings(home: Path) -> list[str]:
    """The spellings of the home's path a file may hold, longest first (a resolved path may be the longer)."""
    spellings = {str(home.absolute()), str(home.resolve())}
    return sorted(spellings, key=len, reverse=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


FILE_COLUMN = "_file"  # each row's file, relative to its table's folder


def _view(con: duckdb.DuckDBPyConnection, view: str, ds: Dataset, tokens: list[tuple[str, str]]) -> dict[str, int]:
    """Create `view` over `ds` with its text columns normalised by `tokens` (text, replacement); return, for each
    column and replacement that normalising applied ("file ($HOME)"), how many rows it changed."""
    paths = [str(ds.folder.resolve() / f) for f in ds.files]
    listed = "[" + ", ".join(_literal(p) for p in paths) + "]"
    prefix = _literal(str(ds.folder.resolve()) + "/")
    if ds.kind == "parquet":
        source = f"read_parquet({listed}, filename = '__tl_file', hive_partitioning = false, union_by_name = true)"
    else:
        source = (f"read_csv({listed}, filename = '__tl_file', all_varchar = true, header = true, "
                  f"union_by_name = true)")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view}_raw AS SELECT * FROM {source}")
    columns = [(row[0], row[1]) for row in con.execute(f"DESCRIBE {view}_raw").fetchall() if row[0] != "__tl_file"]
    selects, changed_checks = [], []
    for column, type_ in columns:
        expr = _quote(column)
        if type_ == "VARCHAR" and tokens:
            normalised = expr
            for text, replacement in tokens:
                normalised = f"replace({normalised}, {_literal(text)}, {_literal(replacement)})"
            selects.append(f"{normalised} AS {_quote(column)}")
            for kind in sorted({replacement for _, replacement in tokens}):
                holds = " OR ".join(f"contains({expr}, {_literal(text)})" for text, r in tokens if r == kind)
                changed_checks.append((f"{column} ({kind})", f"count(*) FILTER (WHERE {holds})"))
        else:
            selects.append(expr)
    selects.append(f"replace(__tl_file, {prefix}, '') AS {FILE_COLUMN}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT {', '.join(selects)} FROM {view}_raw")
    if not changed_checks:
        return {}
    counts = con.execute(f"SELECT {', '.join(check for _, check in changed_checks)} FROM {view}_raw").fetchone()
    return {column: n for (column, _), n in zip(changed_checks, counts, strict=True) if n}


def compare_dataset(con: duckdb.DuckDBPyConnection, a: Dataset, b: Dataset,
                    tokens_a: list[tuple[str, str]], tokens_b: list[tuple[str, str]]) -> Outcome:
    """Compare one table of the two homes."""
    out = Outcome(a.name, "rows")
    same_files = a.files == b.files and all(
        _sha256(a.folder.resolve() / f) == _sha256(b.folder.resolve() / f) for f in a.files)
    if not a.files and not b.files:
        out.verdict, out.rows = "bytes", (0, 0)
        out.notes.append("no files in either home")
        return out
    if not a.files or not b.files:
        out.verdict = "DIFFERENT"
        out.detail.append(f"files: {len(a.files)} in A, {len(b.files)} in B")
        return out
    changed_a = _view(con, "a", a, tokens_a)
    changed_b = _view(con, "b", b, tokens_b)
    rows_a = con.execute("SELECT count(*) FROM a").fetchone()[0]
    rows_b = con.execute("SELECT count(*) FROM b").fetchone()[0]
    out.rows = (rows_a, rows_b)
    for column in sorted(set(changed_a) | set(changed_b)):
        out.notes.append(f"{column} replaced in {changed_a.get(column, 0)} rows of A, {changed_b.get(column, 0)} of B")
    schema_a = con.execute("DESCRIBE a").fetchall()
    schema_b = con.execute("DESCRIBE b").fetchall()
    types_a = {row[0]: row[1] for row in schema_a}
    types_b = {row[0]: row[1] for row in schema_b}
    if types_a != types_b:
        out.verdict = "DIFFERENT"
        only_a = sorted(set(types_a) - set(types_b))
        only_b = sorted(set(types_b) - set(types_a))
        retyped = sorted(c for c in set(types_a) & set(types_b) if types_a[c] != types_b[c])
        if only_a:
            out.detail.append(f"columns only in A: {', '.join(only_a)}")
        if only_b:
            out.detail.append(f"columns only in B: {', '.join(only_b)}")
        for c in retyped:
            out.detail.append(f"column {c}: {types_a[c]} in A, {types_b[c]} in B")
        return out
    # B's columns in A's order, so that EXCEPT ALL pairs them by name.
    ordered = ", ".join(_quote(row[0]) for row in schema_a)
    only_in_a = con.execute(f"SELECT count(*) FROM (SELECT {ordered} FROM a EXCEPT ALL SELECT {ordered} FROM b)"
                            ).fetchone()[0]
    only_in_b = con.execute(f"SELECT count(*) FROM (SELECT {ordered} FROM b EXCEPT ALL SELECT {ordered} FROM a)"
                            ).fetchone()[0]
    if only_in_a or only_in_b:
        out.verdict = "DIFFERENT"
        out.detail.append(f"rows: {rows_a} in A, {rows_b} in B; {only_in_a} only in A, {only_in_b} only in B")
        names = [row[0] for row in schema_a]
        for label, first, second, n in (("A", "a", "b", only_in_a), ("B", "b", "a", only_in_b)):
            if not n:
                continue
            sample = con.execute(f"SELECT {ordered} FROM (SELECT {ordered} FROM {first} EXCEPT ALL "
                                 f"SELECT {ordered} FROM {second}) ORDER BY ALL LIMIT 1").fetchone()
            shown = ", ".join(f"{name}={value!r}" for name, value in zip(names, sample, strict=True))
            out.detail.append(f"a row only in {label}: {shown}")
        return out
    if same_files:
        out.verdict = "bytes"
    elif not out.notes:
        out.notes.append("same rows, files differ in bytes")
    return out


def normalise_report(text: str, home: Path) -> str:
    for spelling in home_strings(home):
        text = text.replace(spelling, HOME_TOKEN)
    return REPORT_RUN_ID.sub(lambda m: m.group(1) + RUN_TOKEN, text)


def compare_reports(home_a: Path, home_b: Path) -> list[Outcome]:
    outcomes = []
    folder_a, folder_b = home_a / "reports", home_b / "reports"
    names_a = {p.name for p in folder_a.glob("*") if p.is_file()} if folder_a.is_dir() else set()
    names_b = {p.name for p in folder_b.glob("*") if p.is_file()} if folder_b.is_dir() else set()
    for name in sorted(names_a | names_b):
        label = f"reports/{name}"
        if name not in names_a or name not in names_b:
            outcomes.append(Outcome(label, "MISSING", detail=[f"only in {'A' if name in names_a else 'B'}"]))
            continue
        raw_a, raw_b = (folder_a / name).read_bytes(), (folder_b / name).read_bytes()
        if raw_a == raw_b:
            outcomes.append(Outcome(label, "bytes"))
            continue
        text_a = normalise_report(raw_a.decode(errors="replace"), home_a)
        text_b = normalise_report(raw_b.decode(errors="replace"), home_b)
        if text_a == text_b:
            outcomes.append(Outcome(label, "rows", notes=["same text once the home path and run ids are replaced"]))
            continue
        lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
        pairs = zip(lines_a, lines_b, strict=False)
        first = next((i for i, (x, y) in enumerate(pairs) if x != y), min(len(lines_a), len(lines_b)))
        outcomes.append(Outcome(label, "DIFFERENT", detail=[
            f"{len(lines_a)} lines in A, {len(lines_b)} in B; first difference at line {first + 1}",
            f"A: {lines_a[first][:300] if first < len(lines_a) else '(end)'}",
            f"B: {lines_b[first][:300] if first < len(lines_b) else '(end)'}"]))
    return outcomes


def compare_homes(home_a: Path, home_b: Path, core: bool = True, reports: bool = True) -> list[Outcome]:
    """Compare every table (and report) of the two homes; one outcome per name in either."""
    tables_a, tables_b = datasets(home_a, core), datasets(home_b, core)
    runs_a, runs_b = run_ids(home_a), run_ids(home_b)
    tokens_a = [(s, HOME_TOKEN) for s in home_strings(home_a)] + [(r, RUN_TOKEN) for r in sorted(runs_a)]
    tokens_b = [(s, HOME_TOKEN) for s in home_strings(home_b)] + [(r, RUN_TOKEN) for r in sorted(runs_b)]
    con = duckdb.connect()
    outcomes = []
    for name in sorted(set(tables_a) | set(tables_b)):
        if name not in tables_a or name not in tables_b:
            outcomes.append(Outcome(name, "MISSING", detail=[f"only in {'A' if name in tables_a else 'B'}"]))
            continue
        outcomes.append(compare_dataset(con, tables_a[name], tables_b[name], tokens_a, tokens_b))
    con.close()
    if reports:
        outcomes += compare_reports(home_a, home_b)
    return outcomes


VERDICTS = {"bytes": "same bytes", "rows": "same rows", "DIFFERENT": "DIFFERENT", "MISSING": "MISSING"}


def render(outcomes: list[Outcome], home_a: Path, home_b: Path) -> str:
    width = max((len(o.name) for o in outcomes), default=0)
    lines = [f"A: {home_a}", f"B: {home_b}"]
    for o in outcomes:
        rows = ""
        if o.rows != (None, None):
            rows = f"{o.rows[0]:>9,} / {o.rows[1]:,} rows" if o.rows[0] != o.rows[1] else f"{o.rows[0]:>9,} rows"
        lines.append(f"  {VERDICTS[o.verdict]:<10}  {o.name:<{width}}  {rows}".rstrip())
        for note in o.notes:
            lines.append(f"{'':14}{note}")
        for detail in o.detail:
            lines.append(f"{'':14}{detail}")
    bad = [o for o in outcomes if o.verdict in ("DIFFERENT", "MISSING")]
    tables = sum(1 for o in outcomes if not o.name.startswith("reports/"))
    same_bytes = sum(1 for o in outcomes if o.verdict == "bytes")
    if bad:
        lines.append(f"{len(bad)} of {len(outcomes)} differ: {', '.join(o.name for o in bad)}")
    else:
        lines.append(f"equal: {tables} tables and {len(outcomes) - tables} reports "
                     f"({same_bytes} byte-identical, the others equal row for row once normalised)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("home_a", type=Path)
    parser.add_argument("home_b", type=Path)
    parser.add_argument("--no-core", action="store_true", help="skip the core tables (.published/current/lake/core)")
    parser.add_argument("--no-reports", action="store_true", help="skip reports/")
    args = parser.parse_args(argv)
    try:
        outcomes = compare_homes(args.home_a, args.home_b, core=not args.no_core, reports=not args.no_reports)
    except NotAHome as e:
        print(f"compare_homes: {e}", file=sys.stderr)
        return 2
    print(render(outcomes, args.home_a, args.home_b))
    return 1 if any(o.verdict in ("DIFFERENT", "MISSING") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
