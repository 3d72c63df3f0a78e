"""Ingest of one UTC day from each source: gateway logs, FOCUS billing and the deployment inventory.

Request-level work never leaves DuckDB. Each input file is read with its column types declared by the contract
(never inferred), judged row by row, and staged as Parquet in the step's scratch folder; the day is then
assembled from the staged files with the statements in sql/. Every row read ends up accepted, quarantined (with
file, line and reason) or merged into a duplicate, and the counts are written beside the data so that every
day and source reconciles.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import duckdb

from tokenledger import lake
from tokenledger.contracts import load_contract, struct_spec, validation_query
from tokenledger.duck import quote_path, run_sql, statement
from tokenledger.errors import InputFileError, LedgerError
from tokenledger.paths import HomeLayout

GATEWAY_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
BILLING_SUFFIXES = (".csv", ".csv.gz", ".parquet")
SOURCES = ("gateway", "billing", "deployments")


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


@dataclass(frozen=True)
class IngestCounts:
    """One row of quality.ingest_reconciliation_daily."""

    day: date
    source: str
    rows_read: int
    rows_accepted: int
    rows_quarantined: int
    duplicates_merged: int

    @property
    def balanced(self) -> bool:
        return self.rows_read == self.rows_accepted + self.rows_quarantined + self.duplicates_merged

    def as_row(self) -> dict[str, Any]:
        return {**asdict(self), "balanced": self.balanced}


def landing_files(folder: Path, suffixes: tuple[str, ...], what: str) -> list[Path]:
    """The input files of a landing folder in read order (by name). Hidden and `_`-prefixed files (markers such
    as `_SUCCESS`) are skipped; any other file with an unknown extension is an error, not silently ignored."""
    if not folder.is_dir():
        return []
    files = []
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.name.startswith((".", "_")):
            continue
        if not path.name.endswith(suffixes):
            raise InputFileError(
                f"{path}: not a {what} file tokenledger can read (expected {', '.join(suffixes)}). "
                "Convert it or move it out of the landing folder, then re-run the day."
            )
        files.append(path)
    return files


def _read_error(path: Path, kind: str, exc: duckdb.Error) -> InputFileError:
    first_line = str(exc).strip().splitlines()[0]
    return InputFileError(f"{path}: cannot be read as {kind} ({first_line}). The file may be truncated or "
                          "corrupt: replace it (or move it out of the landing folder) and re-run the day.")


# --- deployments ---------------------------------------------------------------------------------------------

def ingest_deployments_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> IngestCounts:
    """Resolve the inventory (already loaded as cfg_deployments) to the versions in force on the day."""
    target = lake.day_file(layout.lake, "core", "deployments_daily", window.day)
    rows = lake.write_query(con, statement("deployments_daily"), target, window.params())
    counts = IngestCounts(window.day, "deployments", rows, rows, 0, 0)
    _write_quality(con, layout, counts, quarantine_relation=None)
    return counts


# --- gateway -------------------------------------------------------------------------------------------------

def _gateway_text_relation(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[str, dict[str, Any]]:
    """A relation with source_line, is_record and <field>__text for every contract field, for one file."""
    table = load_contract("gateway_request").table()
    if path.name.endswith(".parquet"):
        try:
            present = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet($file)",
                                                 {"file": str(path)}).fetchall()}
        except duckdb.Error as exc:
            raise _read_error(path, "Parquet", exc) from None
        texts = ", ".join(
            f"CAST({c} AS VARCHAR) AS {c}__text" if c in present else f"NULL::VARCHAR AS {c}__text"
            for c in table.column_names
        )
        return f"SELECT source_line, true AS is_record, {texts} FROM ({statement('gateway_rows_parquet')})", {
            "file": str(path)}
    texts = ", ".join(f"j.{c} AS {c}__text" for c in table.column_names)
    parsed = (
        "SELECT source_line, "
        "coalesce(json_type(CASE WHEN json_valid(line) THEN line END) = 'OBJECT', false) AS is_record, "
        # json_transform is fed NULL for a non-object line: DuckDB may evaluate both branches of a CASE.
        f"json_transform(CASE WHEN is_record THEN line END, '{struct_spec(table)}') AS j "
        f"FROM ({statement('gateway_lines_jsonl')}) WHERE line IS NOT NULL AND trim(line) <> ''"
    )
    return f"SELECT source_line, is_record, {texts} FROM ({parsed})", {"file": str(path)}


def _stage_gateway_file(con: duckdb.DuckDBPyConnection, path: Path, file_index: int, target: Path) -> None:
    table = load_contract("gateway_request").table()
    relation, params = _gateway_text_relation(con, path)
    query = validation_query(
        table, relation,
        passthrough=[f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line", "is_record"],
        gate=("is_record", "line is not a JSON object (not valid JSON, or not an object)"),
    )
    kind = "Parquet" if path.name.endswith(".parquet") else "JSON Lines"
    try:
        lake.write_query(con, query, target, params)
    except duckdb.Error as exc:
        raise _read_error(path, kind, exc) from None
    lines, records = con.execute(f"SELECT count(*), count(*) FILTER (WHERE is_record) "
                                 f"FROM read_parquet({quote_path(target)})").fetchone()
    if lines and not records:
        raise InputFileError(f"{path}: none of its {lines} lines is a JSON object, so it is not a JSON Lines "
                             "gateway log. Convert it or move it out of the landing folder, then re-run the day.")


def stage_gateway_files(con: duckdb.DuckDBPyConnection, files: list[Path], stage_dir: Path) -> list[Path]:
    """Type and judge each file by the gateway_request contract into stage_dir/NNNNNN.parquet (NNNNNN = the
    file's position, its file_index); returns the staged files in read order."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    for index, path in enumerate(files):
        target = stage_dir / f"{index:06d}.parquet"
        _stage_gateway_file(con, path, index, target)
        staged.append(target)
    return staged


def ingest_gateway_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       scratch: Path) -> IngestCounts:
    """Type, judge, resolve and de-duplicate one day of gateway logs into core.gateway_requests."""
    files = landing_files(layout.gateway_day_dir(window.day), GATEWAY_SUFFIXES, "gateway log")
    staged = stage_gateway_files(con, files, scratch / "gateway")
    deployments = lake.day_file(layout.lake, "core", "deployments_daily", window.day)
    con.execute(f"CREATE OR REPLACE TEMP VIEW deployments_day AS SELECT * FROM read_parquet({quote_path(deployments)})")
    _create_staged_view(con, "staged_gateway", staged, load_contract("gateway_request").table().column_names)

    unknown = run_sql(con, "gateway_unknown_deployments").fetchall()
    if unknown:
        lines = "\n".join(
            f"  model {m!r}" + (f", deployment_id {d!r}" if d else "") + f": {n} request(s), first at {f} line {ln}"
            for m, d, n, f, ln in unknown[:10]
        )
        raise LedgerError(
            f"Gateway logs of {window.day} name deployments that config/deployments.yaml does not have in force "
            f"on that day:\n{lines}\nAdd them to {layout.config / 'deployments.yaml'} (with valid_from on or "
            "before that day) and re-run the day."
        )

    checked = scratch / "gateway_checked.parquet"
    lake.write_query(con, statement("gateway_checked"), checked, window.params())
    con.execute(f"CREATE OR REPLACE TEMP VIEW checked_gateway AS SELECT * FROM read_parquet({quote_path(checked)})")
    con.execute("CREATE OR REPLACE TEMP TABLE gateway_duplicates AS " + statement("gateway_duplicates"))

    target = lake.day_file(layout.lake, "core", "gateway_requests", window.day)
    accepted = lake.write_query(con, statement("gateway_requests"), target, window.params())
    rows_read, quarantined = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE reason IS NOT NULL) FROM checked_gateway").fetchone()
    merged = con.execute("SELECT coalesce(sum(merged), 0) FROM gateway_duplicates").fetchone()[0]
    counts = IngestCounts(window.day, "gateway", rows_read, accepted, quarantined, int(merged))
    _write_quality(con, layout, counts, quarantine_relation="checked_gateway")
    return counts


def _create_staged_view(con: duckdb.DuckDBPyConnection, name: str, staged: list[Path], columns: list[str]) -> None:
    """A view over the staged files, or an empty one of the same shape when the day has no files."""
    if staged:
        files = ", ".join(quote_path(p) for p in staged)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet([{files}])")
        return
    contract = load_contract("gateway_request" if name == "staged_gateway" else "focus_billing").table()
    typed = ", ".join(f"NULL::{contract.column(c).physical_type} AS {c}" for c in columns)
    extra = "NULL::VARCHAR AS row_fingerprint, " if name == "staged_billing" else ""
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT NULL::INTEGER AS file_index, NULL::VARCHAR AS source_file, "
        f"NULL::BIGINT AS source_line, true AS is_record, {extra}{typed}, NULL::VARCHAR AS raw, "
        "NULL::VARCHAR AS reason WHERE false"
    )


# --- billing -------------------------------------------------------------------------------------------------

def _billing_text_relation(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[str, dict[str, Any]]:
    table = load_contract("focus_billing").table()
    reader = "billing_rows_parquet" if path.name.endswith(".parquet") else "billing_rows_csv"
    params = {"file": str(path)}
    try:
        present = {r[0] for r in con.execute(f"DESCRIBE {statement(reader)}", params).fetchall()}
    except duckdb.Error as exc:
        raise _read_error(path, "a FOCUS export", exc) from None
    missing = [c.name for c in table.columns if c.required and c.name not in present]
    if missing:
        raise InputFileError(
            f"{path}: has no column {', '.join(missing)}, so it is not a FOCUS billing export tokenledger can read "
            "(FOCUS 1.0-1.2 column names are required). Export FOCUS from your provider or move the file out of "
            "raw/billing, then re-run."
        )
    texts = ", ".join(f"{c} AS {c}__text" if c in present else f"NULL::VARCHAR AS {c}__text"
                      for c in table.column_names)
    return f"SELECT source_line, row_fingerprint, {texts} FROM ({statement(reader)})", params


def _stage_billing_file(con: duckdb.DuckDBPyConnection, path: Path, file_index: int, target: Path) -> None:
    relation, params = _billing_text_relation(con, path)
    query = validation_query(
        load_contract("focus_billing").table(), relation,
        passthrough=[f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line",
                     "true AS is_record", "row_fingerprint"],
    )
    try:
        lake.write_query(con, query, target, params)
    except duckdb.Error as exc:
        raise _read_error(path, "a FOCUS export", exc) from None


def ingest_billing_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       scratch: Path) -> IngestCounts:
    """Read every billing export, keep the rows overlapping the day and prorate them into core.billing_charges."""
    files = landing_files(layout.billing_dir, BILLING_SUFFIXES, "FOCUS billing")
    stage_dir = scratch / "billing"
    stage_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    for index, path in enumerate(files):
        target = stage_dir / f"{index:06d}.parquet"
        _stage_billing_file(con, path, index, target)
        staged.append(target)
    _create_staged_view(con, "staged_billing", staged, load_contract("focus_billing").table().column_names)
    day_rows = scratch / "billing_day.parquet"
    lake.write_query(con, statement("billing_day_rows"), day_rows, window.params())
    con.execute(f"CREATE OR REPLACE TEMP VIEW billing_day AS SELECT * FROM read_parquet({quote_path(day_rows)})")
    con.execute("CREATE OR REPLACE TEMP TABLE billing_duplicates AS " + statement("billing_duplicates"))

    target = lake.day_file(layout.lake, "core", "billing_charges", window.day)
    accepted = lake.write_query(con, statement("billing_charges"), target, window.params())
    rows_read, quarantined = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE reason IS NOT NULL) FROM billing_day").fetchone()
    merged = con.execute("SELECT coalesce(sum(merged), 0) FROM billing_duplicates").fetchone()[0]
    counts = IngestCounts(window.day, "billing", rows_read, accepted, quarantined, int(merged))
    _write_quality(con, layout, counts, quarantine_relation="billing_day")
    return counts


# --- quality parts -------------------------------------------------------------------------------------------

def _write_quality(con: duckdb.DuckDBPyConnection, layout: HomeLayout, counts: IngestCounts,
                   quarantine_relation: str | None) -> None:
    """Write this source's quarantine rows and reconciliation row for the day, for the quality tables to gather."""
    params = {"day": counts.day, "source": counts.source}
    quarantine = lake.day_file(layout.lake, "quality_parts", f"quarantine_{counts.source}", counts.day)
    if quarantine_relation:
        lake.write_query(con, statement("quarantine_rows", relation=quarantine_relation), quarantine, params)
    else:
        lake.write_query(con, "SELECT $day::DATE AS day, $source AS source, NULL::VARCHAR AS file, "
                              "NULL::BIGINT AS line, NULL::VARCHAR AS reason, NULL::VARCHAR AS raw WHERE false",
                         quarantine, params)
    row = counts.as_row()
    lake.write_query(
        con,
        "SELECT $day::DATE AS day, $source AS source, $rows_read::BIGINT AS rows_read, "
        "$rows_accepted::BIGINT AS rows_accepted, $rows_quarantined::BIGINT AS rows_quarantined, "
        "$duplicates_merged::BIGINT AS duplicates_merged, $balanced::BOOLEAN AS balanced",
        lake.day_file(layout.lake, "quality_parts", f"ingest_reconciliation_{counts.source}", counts.day),
        row,
    )
