"""Ingest of one UTC day from each source: gateway logs, FOCUS billing and the deployment inventory.

Request-level work never leaves DuckDB. Each input file is read with its column types declared by the contract
(never inferred), judged row by row, and staged as Parquet in the step's scratch folder; the day is then
assembled from the staged files with the statements in sql/. Every row read ends up accepted, quarantined (with
file, line and reason) or merged into a duplicate, and the counts are written beside the data so that every
day and source reconciles.

A JSON Lines file is split into physical lines by `tokenledger.lines` (every line counted, whatever bytes it
holds); each contract field is read with its JSON type, so an object or array in a text field, a number in a
text field that takes none, or an integer too large to read exactly is quarantined, not coerced. A CSV bill is
read with the columns of its own header (never sniffed) and DuckDB's rejects, so a short row or an undecodable
line is a quarantined line, not a misread file.
"""

from __future__ import annotations

import csv
import gzip
import io
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import duckdb

from tokenledger import lake
from tokenledger.contracts import Table, json_text_columns, load_contract, struct_spec, validation_query
from tokenledger.duck import register_arrow, run_sql, sql_path, statement
from tokenledger.errors import InputFileError, LedgerError, environment_problem
from tokenledger.faults import failpoint
from tokenledger.landing import LandingFile, landing_files
from tokenledger.lines import MAX_LINE_BYTES, line_reader
from tokenledger.paths import HomeLayout

GATEWAY_FORMATS = {".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".parquet": "parquet"}
BILLING_FORMATS = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet"}
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


def _read_error(path: Path, kind: str, exc: duckdb.Error) -> LedgerError:
    """The error for a file DuckDB could not read, unless the machine is the cause (a full disk while staging)."""
    problem = environment_problem(exc, f"reading {path}")
    if problem:
        return problem
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return InputFileError(f"{path}: cannot be read as {kind} ({lines[0] if lines else repr(exc)}). The file may be "
                          "truncated or corrupt: replace it (or move it out of the landing folder) and re-run the "
                          "day.")


def _parquet_kind(duck_type: str) -> str | None:
    """The value kind (tokenledger.contracts) of a Parquet column of DuckDB type `duck_type`."""
    t = duck_type.upper()
    if t in {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
             "UBIGINT", "UHUGEINT"}:
        return "integer"
    if t in {"FLOAT", "DOUBLE"} or t.startswith("DECIMAL"):
        return "float"
    if t == "VARCHAR":
        return "string"
    if t == "BLOB":
        return "binary"
    if t == "BOOLEAN":
        return "boolean"
    if t.startswith(("STRUCT", "MAP", "UNION")):
        return "object"
    if t.endswith("]"):
        return "array"
    return None  # dates and timestamps: their text is read by the contract's type


def _parquet_schema(con: duckdb.DuckDBPyConnection, file: LandingFile, kind: str) -> dict[str, str]:
    try:
        return {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({sql_path(file.path)})"
                                                ).fetchall()}
    except duckdb.Error as exc:
        raise _read_error(file.path, kind, exc) from None


def _parquet_text_relation(con: duckdb.DuckDBPyConnection, file: LandingFile, table: Table, kind: str,
                           extra: str = "") -> str:
    """Every row of one Parquet file: its 1-based row number, `<name>__text` and `<name>__kind` for every contract
    column. A column the file lacks is taken from the dataset's Hive partition folders, if one names it.
    Objects, arrays and binary values are not turned into text at all (their kind says what they were)."""
    schema = _parquet_schema(con, file, kind)
    partitions = dict(file.partitions)
    items = []
    for c in table.column_names:
        if c in schema:
            value_kind = _parquet_kind(schema[c])
            text = "NULL::VARCHAR" if value_kind in ("object", "array", "binary") else f'CAST("{c}" AS VARCHAR)'
            kind_sql = f"'{value_kind}'" if value_kind else "NULL::VARCHAR"
            items.append(f"{text} AS {c}__text, CASE WHEN \"{c}\" IS NOT NULL THEN {kind_sql} END AS {c}__kind")
        elif c in partitions:
            value = partitions[c].replace("'", "''")
            items.append(f"'{value}' AS {c}__text, 'string' AS {c}__kind")
        else:
            items.append(f"NULL::VARCHAR AS {c}__text, NULL::VARCHAR AS {c}__kind")
    return (f"SELECT file_row_number + 1 AS source_line, NULL::VARCHAR AS line_problem{extra}, {', '.join(items)} "
            f"FROM read_parquet({sql_path(file.path)}, file_row_number = true)")


# --- deployments ---------------------------------------------------------------------------------------------

def ingest_deployments_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> IngestCounts:
    """Resolve the inventory (already loaded as cfg_deployments) to the versions in force on the day."""
    target = lake.day_file(layout.lake, "core", "deployments_daily", window.day)
    rows = lake.write_query(con, statement("deployments_daily"), target, window.params())
    counts = IngestCounts(window.day, "deployments", rows, rows, 0, 0)
    _write_quality(con, layout, counts, quarantine_relation=None)
    return counts


# --- gateway -------------------------------------------------------------------------------------------------

def _jsonl_text_relation(table: Table, lines_view: str) -> str:
    """Every physical line of a JSON Lines file (registered as `lines_view`), with why it is not a record when it
    is not (`line_problem`), and `<name>__text`, `<name>__kind` for every contract field of a record."""
    return (f"SELECT source_line, line_problem, {json_text_columns(table, 'j')} FROM ("
            # json_transform is fed NULL for a non-object line: DuckDB may evaluate both branches of a CASE.
            f"SELECT source_line, line_problem, json_transform(CASE WHEN line_problem IS NULL THEN text END, "
            f"'{struct_spec(table)}') AS j FROM ({statement('gateway_lines', lines=lines_view)}))")


def _stage_gateway_file(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path) -> None:
    table = load_contract("gateway_request").table()
    passthrough = [f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line",
                   "line_problem IS NULL AS is_record"]
    params = {"file": str(file.path)}
    if file.fmt == "parquet":
        query = validation_query(table, _parquet_text_relation(con, file, table, "Parquet"), passthrough,
                                 gate="line_problem", kinds=True)
        try:
            lake.write_query(con, query, target, params)
        except duckdb.Error as exc:
            raise _read_error(file.path, "Parquet", exc) from None
        return
    # A cursor of its own: the Arrow stream is registered on it and read once by the one statement run there.
    view = f"lines_{uuid.uuid4().hex}"
    with con.cursor() as cur:
        register_arrow(cur, view, line_reader(file.path))
        query = validation_query(table, _jsonl_text_relation(table, view), passthrough, gate="line_problem",
                                 kinds=True)
        try:
            lake.write_query(cur, query, target, params)
        except duckdb.Error as exc:
            raise _read_error(file.path, "JSON Lines", exc) from None
    lines, records, nul = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE is_record), count(*) FILTER (WHERE reason LIKE '%NUL bytes%') "
        f"FROM read_parquet({sql_path(target)})").fetchone()
    if lines and not records:
        hint = " (most hold NUL bytes: it looks like UTF-16 or a binary file)" if nul * 2 > lines else ""
        raise InputFileError(f"{file.path}: none of its {lines:,} lines is a JSON object{hint}, so it is not a JSON "
                             "Lines gateway log. Convert it or move it out of the landing folder, then re-run the day.")


def stage_gateway_files(con: duckdb.DuckDBPyConnection, files: list[LandingFile], stage_dir: Path) -> list[Path]:
    """Type and judge each file by the gateway_request contract into stage_dir/NNNNNN.parquet (NNNNNN = the
    file's position, its file_index); returns the staged files in read order."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    for index, file in enumerate(files):
        target = stage_dir / f"{index:06d}.parquet"
        _stage_gateway_file(con, file, index, target)
        staged.append(target)
    return staged


def ingest_gateway_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       scratch: Path) -> IngestCounts:
    """Type, judge, resolve and de-duplicate one day of gateway logs into core.gateway_requests."""
    files = landing_files(layout.gateway_day_dir(window.day), GATEWAY_FORMATS, "gateway log")
    staged = stage_gateway_files(con, files, scratch / "gateway")
    failpoint("ingest:staged")
    deployments = lake.day_file(layout.lake, "core", "deployments_daily", window.day)
    con.execute(f"CREATE OR REPLACE TEMP VIEW deployments_day AS SELECT * FROM read_parquet({sql_path(deployments)})")
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
    con.execute(f"CREATE OR REPLACE TEMP VIEW checked_gateway AS SELECT * FROM read_parquet({sql_path(checked)})")
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
        files = ", ".join(sql_path(p) for p in staged)
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

_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def _csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's header line, read as CSV (quoting honoured), never guessed."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.readline(MAX_LINE_BYTES)
    except (OSError, EOFError) as exc:
        raise InputFileError(f"{path}: cannot be read ({exc}). Replace it with a complete copy (or move it out of "
                             "raw/billing), then re-run.") from None
    if head.startswith(_WIDE_BOMS):
        raise InputFileError(f"{path}: is UTF-16 or UTF-32 text; tokenledger reads UTF-8 CSV. Convert it (for "
                             "example `iconv -f UTF-16 -t UTF-8`) or move it out of raw/billing, then re-run.")
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path} line 1: the header is not UTF-8 text ({exc.reason} at byte {exc.start}). "
                             "Save the export as UTF-8, then re-run.") from None
    names = next(csv.reader(io.StringIO(text)), [])
    names = [n.strip() for n in names]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InputFileError(f"{path} line 1: the header names {', '.join(duplicated)} more than once, so its "
                             "columns cannot be told apart. Fix the export, then re-run.")
    return names


def _require_focus_columns(path: Path, table: Table, present: list[str], where: str) -> None:
    missing = [c.name for c in table.columns if c.required and c.name not in present]
    if missing:
        raise InputFileError(
            f"{path}: has no column {', '.join(missing)}{where}, so it is not a FOCUS billing export tokenledger can "
            "read (FOCUS 1.0-1.2 column names are required). Export FOCUS from your provider or move the file out of "
            "raw/billing, then re-run.")


def _csv_text_relation(con: duckdb.DuckDBPyConnection, path: Path, table: Table, rejects: str) -> str:
    """Every row of one FOCUS CSV export as text with its line number and a fingerprint of the whole row.

    The columns are the header's, all VARCHAR; DuckDB's CSV sniffer is not used (a short row made it misread the
    whole file). A line DuckDB cannot parse (wrong number of fields, not UTF-8, an unclosed quote) is stored in
    the rejects table `rejects` and becomes a quarantined row. Line numbers assume one record per line: a quoted
    field spanning lines shifts the numbers after it.
    """
    names = _csv_header(path)
    _require_focus_columns(path, table, names, " in its header (line 1)")
    columns = "{" + ", ".join("'" + n.replace("'", "''") + "': 'VARCHAR'" for n in names) + "}"
    options = (f"columns = {columns}, header = true, auto_detect = false, delim = ',', quote = '\"', "
               f"escape = '\"', nullstr = ['NULL', ''], max_line_size = {MAX_LINE_BYTES}, store_rejects = true, "
               f"rejects_table = '{rejects}', rejects_scan = '{rejects}_scan'")
    texts = ", ".join(f'"{c}" AS {c}__text' if c in names else f"NULL::VARCHAR AS {c}__text"
                      for c in table.column_names)
    quoted = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {rejects}_rows AS SELECT * RENAME (ordinality AS record) "
                f"FROM read_csv({sql_path(path)}, {options}) WITH ORDINALITY")
    return statement("billing_rows_csv", rows=f"{rejects}_rows", rejects=rejects, texts=texts, columns=quoted,
                     nulls=", ".join(f"NULL::VARCHAR AS {c}__text" for c in table.column_names))


def _parquet_billing_relation(con: duckdb.DuckDBPyConnection, path: Path, table: Table) -> str:
    """Every row of one FOCUS Parquet export as text (a MAP or STRUCT of tags as JSON) with its row number and a
    fingerprint of the whole row."""
    schema = _parquet_schema(con, LandingFile(path, "parquet"), "a FOCUS export")
    _require_focus_columns(path, table, list(schema), "")

    def text(name: str, duck_type: str) -> str:
        quoted = '"' + name.replace('"', '""') + '"'
        kind = _parquet_kind(duck_type)
        return f"to_json({quoted})::VARCHAR" if kind in ("object", "array") else f"CAST({quoted} AS VARCHAR)"

    all_texts = ", ".join(text(n, t) for n, t in schema.items())
    texts = ", ".join(f"{text(c, schema[c])} AS {c}__text" if c in schema else f"NULL::VARCHAR AS {c}__text"
                      for c in table.column_names)
    return (f"SELECT file_row_number + 1 AS source_line, md5(list_value({all_texts})::VARCHAR) AS row_fingerprint, "
            f"{texts} FROM read_parquet({sql_path(path)}, file_row_number = true)")


def _stage_billing_file(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path) -> None:
    table = load_contract("focus_billing").table()
    rejects = f"rejects_{uuid.uuid4().hex}"
    gate = None
    try:
        if file.fmt == "csv":
            relation = _csv_text_relation(con, file.path, table, rejects)
            gate = "line_problem"
        else:
            relation = _parquet_billing_relation(con, file.path, table)
        passthrough = [f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line",
                       "true AS is_record", "row_fingerprint"]
        lake.write_query(con, validation_query(table, relation, passthrough, gate=gate), target,
                         {"file": str(file.path)})
    except duckdb.Error as exc:
        raise _read_error(file.path, "a FOCUS export", exc) from None
    finally:
        for name in (f"{rejects}_rows", rejects, f"{rejects}_scan"):
            con.execute(f"DROP TABLE IF EXISTS {name}")


def ingest_billing_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       scratch: Path) -> IngestCounts:
    """Read every billing export, keep the rows overlapping the day and prorate them into core.billing_charges."""
    files = landing_files(layout.billing_dir, BILLING_FORMATS, "FOCUS billing")
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
    con.execute(f"CREATE OR REPLACE TEMP VIEW billing_day AS SELECT * FROM read_parquet({sql_path(day_rows)})")
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
