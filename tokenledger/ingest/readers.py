"""Reading one input file into DuckDB: every line or row, numbered, nothing dropped, nothing guessed.

Shared by the gateway logs, the adapters' source formats and the FOCUS bills (tokenledger/ingest/sources.py):

- JSON Lines: every physical line through tokenledger/ingest/lines.py, judged by sql/ingest/gateway_lines.sql
(`line_problem`);
- Parquet: every row with its 1-based row number; a column's value kind comes from its Parquet type;
- CSV: the columns of the file's own header, all text (DuckDB's sniffer is never used: one short row made it
  misread a whole file), with DuckDB's rejects turning a line it cannot parse into a numbered row whose
  `line_problem` says why (sql/ingest/csv_rows.sql).

Every path reaches DuckDB through `duck.sql_path`, read literally.
"""

from __future__ import annotations

import csv
import gzip
import io
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from tokenledger.contracts import json_value_columns
from tokenledger.errors import InputFileError, LedgerError, environment_problem
from tokenledger.ingest.lines import MAX_LINE_BYTES, TOO_LONG, LineStream
from tokenledger.storage.duck import register_arrow, sql_path, statement

_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def quoted(name: str) -> str:
    """A column name as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def read_error(path: Path, kind: str, exc: duckdb.Error) -> LedgerError:
    """The error for a file DuckDB could not read, unless the machine is the cause (a full disk while staging).

    A statement DuckDB cannot parse or bind is tokenledger's fault, not the file's: it is raised as it is."""
    if isinstance(exc, duckdb.ParserException | duckdb.BinderException | duckdb.CatalogException):
        raise exc
    problem = environment_problem(exc, f"reading {path}")
    if problem:
        return problem
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return InputFileError(f"{path}: cannot be read as {kind} ({lines[0] if lines else repr(exc)}). The file may be "
                          "truncated or corrupt: replace it (or move it out of the landing folder) and re-run the "
                          "day.")


# --- JSON Lines ----------------------------------------------------------------------------------------------------

# What a line that looks like a JSON object (it starts with '{') but does not parse is quarantined for. Each reader
# of sql/ingest/gateway_lines.sql parses such a line once, with try(): a NULL parse of a line without a problem is this.
READ_LINE_PROBLEM = "line is not valid JSON"


def parsed_line_problem(parsed: str) -> str:
    """line_problem once the reader has parsed the line into `parsed` (NULL when the parse failed)."""
    return f"coalesce(line_problem, CASE WHEN {parsed} IS NULL THEN '{READ_LINE_PROBLEM}' END)"


@contextmanager
def jsonl_lines(con: duckdb.DuckDBPyConnection, paths: Path | list[Path]
                ) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
    """A cursor and, on it, a relation of every physical line of `paths` (one file or several, read in order):
    source_line, text, line_problem, file_index (the file's position in `paths`).

    The lines are an Arrow stream registered on a cursor of their own, read once by the one statement the caller
    runs on that cursor."""
    view = f"lines_{uuid.uuid4().hex}"
    stream = LineStream(paths)
    with con.cursor() as cur:
        register_arrow(cur, view, stream.reader())
        try:
            yield cur, statement("gateway_lines", lines=view)
        except Exception:
            # DuckDB wraps an error of the stream (a truncated gzip, a UTF-16 file) in its own: raise the original.
            if stream.failure is not None:
                raise stream.failure from None
            raise


def json_records(paths: list[Path], fields: list[tuple[str, bool]]) -> str:
    """A relation of every record of JSON Lines files read by DuckDB's JSON reader: source_line, line_problem (NULL),
    file_index (the file's position in `paths`) and `<name>__text`, `<name>__kind` of each of `fields` (name, whether
    it is a list), each field read as a JSON value so that its JSON type is kept (json_value_columns).

    A row is a line only where the reader reads every line as a record or fails: `physical_lines` must have
    counted the file, and the rows of each file be compared with that count. The reader fails on a line that is
    not JSON, holds a NUL byte or invalid UTF-8, repeats a key, or is an array or a scalar; a JSON null (or an
    object without a contract field) is a row of NULLs. Each file is read WITH ORDINALITY, which numbers its rows in
    the order read (DuckDB reads the file on one thread to do so)."""
    spec = "{" + ", ".join(f"'{name}': 'JSON'" for name, _ in fields) + "}"
    names = ", ".join(quoted(name) for name, _ in fields)
    scans = " UNION ALL ".join(
        f"SELECT ordinality AS source_line, {index} AS file_index, {names} "
        f"FROM read_json({sql_path(path)}, format = 'newline_delimited', records = true, columns = {spec}, "
        f"compression = '{'gzip' if path.name.endswith('.gz') else 'none'}', hive_partitioning = false, "
        f"maximum_object_size = {MAX_LINE_BYTES}) WITH ORDINALITY"
        for index, path in enumerate(paths))
    # The values' texts and kinds written once, above the files' scans: a day of small files is one statement, whose
    # planning grew with each copy (7 files: 0.22 s).
    texts = ", ".join(json_value_columns(name, quoted(name), arrays=is_list) for name, is_list in fields)
    return f"SELECT source_line, NULL::VARCHAR AS line_problem, file_index, {texts} FROM ({scans})"


def check_some_records(con: duckdb.DuckDBPyConnection, staged: Path, path: Path | dict[int, Path], what: str
                       ) -> None:
    """Stop the day when none of a JSON Lines file's lines is a record: it is not that kind of file at all.

    `path` is the staged file's one input, or its inputs by file_index when it holds several."""
    paths = path if isinstance(path, dict) else {0: path}
    by_file = "file_index" if isinstance(path, dict) else "0"
    counts = con.execute(
        f"SELECT {by_file}, count(*), count(*) FILTER (WHERE is_record), "
        "count(*) FILTER (WHERE reason LIKE '%NUL bytes%'), "
        f"min(source_line) FILTER (WHERE starts_with(reason, '{TOO_LONG}')) "
        f"FROM read_parquet({sql_path(staged)}) GROUP BY ALL ORDER BY 1").fetchall()
    for index, lines, records, nul, too_long in counts:
        _some_records(paths[index], lines, records, nul, what, too_long)


def _some_records(path: Path, lines: int, records: int, nul: int, what: str, too_long: int | None = None) -> None:
    if lines and not records and too_long is not None:
        # Not "none of its lines is a JSON object": a line over the limit was never parsed, so what it is is unknown.
        raise InputFileError(
            f"{path}: holds no record tokenledger can read: line {too_long:,} is longer than {MAX_LINE_BYTES:,} bytes "
            f"({MAX_LINE_BYTES // (1 << 20)} MiB), the longest line it reads, and no other line of its {lines:,} is a "
            f"JSON object. A JSON Lines {what} holds one record per line: split the file's records one per line (or "
            "move it out of the landing folder), then re-run the day.")
    if lines and not records:
        hint = " (most hold NUL bytes: it looks like UTF-16 or a binary file)" if nul * 2 > lines else ""
        raise InputFileError(f"{path}: none of its {lines:,} lines is a JSON object{hint}, so it is not a JSON "
                             f"Lines {what}. Convert it or move it out of the landing folder, then re-run the day.")


# --- Parquet -------------------------------------------------------------------------------------------------------

def parquet_kind(duck_type: str) -> str | None:
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


def parquet_schema(con: duckdb.DuckDBPyConnection, path: Path, kind: str) -> dict[str, str]:
    """Column name -> DuckDB type of a Parquet file."""
    try:
        return {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({sql_path(path)})"
                                                ).fetchall()}
    except duckdb.Error as exc:
        raise read_error(path, kind, exc) from None


def as_text(name: str, duck_type: str) -> str:
    """A column's value as text: objects and arrays as JSON."""
    return (f"to_json({quoted(name)})::VARCHAR" if parquet_kind(duck_type) in ("object", "array")
            else f"CAST({quoted(name)} AS VARCHAR)")


# --- CSV -----------------------------------------------------------------------------------------------------------

def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's header line, read as CSV (quoting honoured), never guessed."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.readline(MAX_LINE_BYTES)
    except (OSError, EOFError) as exc:
        raise InputFileError(f"{path}: cannot be read ({exc}). Replace it with a complete copy (or move it out of "
                             "the landing folder), then re-run.") from None
    if head.startswith(_WIDE_BOMS):
        raise InputFileError(f"{path}: is UTF-16 or UTF-32 text; tokenledger reads UTF-8 CSV. Convert it (for "
                             "example `iconv -f UTF-16 -t UTF-8`) or move it out of the landing folder, then re-run.")
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path} line 1: the header is not UTF-8 text ({exc.reason} at byte {exc.start}). "
                             "Save the export as UTF-8, then re-run.") from None
    names = [n.strip() for n in next(csv.reader(io.StringIO(text)), [])]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InputFileError(f"{path} line 1: the header names {', '.join(duplicated)} more than once, so its "
                             "columns cannot be told apart. Fix the export, then re-run.")
    return names


@contextmanager
def csv_rows(con: duckdb.DuckDBPyConnection, path: Path, names: list[str]) -> Iterator[str]:
    """A relation of every line of a CSV file after its header: source_line, row_fingerprint (of the whole row),
    line_problem (why DuckDB could not parse the line, else NULL) and every header column as text.

    The rows are materialized in a temp table first (DuckDB fills the rejects table while it reads), dropped with
    the rejects when the block ends. Line numbers assume one record per line: a quoted field spanning lines
    shifts the numbers after it."""
    rejects = f"rejects_{uuid.uuid4().hex}"
    columns = "{" + ", ".join("'" + n.replace("'", "''") + "': 'VARCHAR'" for n in names) + "}"
    options = (f"columns = {columns}, header = true, auto_detect = false, delim = ',', quote = '\"', "
               f"escape = '\"', nullstr = ['NULL', ''], max_line_size = {MAX_LINE_BYTES}, store_rejects = true, "
               f"rejects_table = '{rejects}', rejects_scan = '{rejects}_scan'")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {rejects}_rows AS SELECT * RENAME (ordinality AS record) "
                    f"FROM read_csv({sql_path(path)}, {options}) WITH ORDINALITY")
        yield statement("csv_rows", rows=f"{rejects}_rows", rejects=rejects,
                        columns=", ".join(quoted(n) for n in names),
                        nulls=", ".join(f"NULL::VARCHAR AS {quoted(n)}" for n in names))
    except duckdb.Error as exc:
        raise read_error(path, "CSV", exc) from None
    finally:
        for name in (f"{rejects}_rows", rejects, f"{rejects}_scan"):
            con.execute(f"DROP TABLE IF EXISTS {name}")
