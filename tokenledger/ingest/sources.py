"""Ingest of one UTC day from each source: request logs, FOCUS billing and the deployment inventory.

Request-level work never leaves DuckDB. Each input file is read with its column types declared by the contract
(never inferred), judged row by row, and staged as Parquet in the step's scratch folder; the day is then
assembled from the staged files with the statements in sql/. Every row read ends up accepted, quarantined (with
file, line and reason), merged into a duplicate or skipped as a record that is not a request (a Claude Code
prompt, a Codex session's context: written beside the requests by design), and the counts are written beside the
data so that every day and source reconciles.

Requests come from the canonical gateway logs (`raw/gateway/`) and from the adapters' source formats
(`raw/litellm/`, ...; tokenledger/ingest/adapters/), all mapped onto the gateway_request contract and assembled as one
day: one request id is one request whatever source it came from, and each source reconciles on its own. The
files are read by tokenledger/ingest/readers.py: a JSON Lines file line by line (every line counted, whatever bytes it
holds), each field with its JSON type, so an object or array in a text field, a number in a text field that
takes none, or an integer too large to read exactly is quarantined, not coerced; a CSV bill by its own header.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.contracts import (
    Table,
    duplicate_key_problem,
    json_text_columns,
    json_value_columns,
    load_contract,
    read_objects,
    struct_spec,
    unknown_fields,
    validation_query,
    zoneless_fields,
)
from tokenledger.errors import InputFileError, LedgerError
from tokenledger.faults import failpoint
from tokenledger.ingest.adapters import adapters
from tokenledger.ingest.adapters.base import Adapter
from tokenledger.ingest.adapters.detect import misplaced, sniff
from tokenledger.ingest.landing import LandingFile, check_layout, landing_files
from tokenledger.ingest.lines import physical_lines
from tokenledger.ingest.readers import (
    as_text,
    check_some_records,
    csv_header,
    csv_rows,
    json_records,
    jsonl_lines,
    parquet_kind,
    parquet_schema,
    parsed_line_problem,
    quoted,
    read_error,
)
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path, run_sql, sql_path, sql_text, statement
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

GATEWAY_FORMATS = {".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".parquet": "parquet"}
BILLING_FORMATS = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet"}
# The stages whose quality parts the quality tables gather; `requests` holds a row per request source, `gpu` the GPU
# telemetry's (tokenledger/ingest/gpu.py).
STAGES = ("requests", "billing", "deployments", "gpu")
CANONICAL = "gateway"
# The rows of a day's canonical log that sql/ingest/gateway_checked.sql may still quarantine without a reason from the
# contract: outside the folder's day, or without deployment_id. Only they (and rows with a reason) keep `raw`.
_MAY_BE_QUARANTINED = ("deployment_id IS NULL OR received_at < $day_start::TIMESTAMPTZ "
                       "OR received_at >= $day_end::TIMESTAMPTZ")


@dataclass(frozen=True)
class IngestCounts:
    """One row of quality.ingest_reconciliation_daily."""

    day: date
    source: str
    rows_read: int
    rows_accepted: int
    rows_quarantined: int
    duplicates_merged: int
    skipped_not_request: int = 0
    # Calls the provider refused or failed whose record names no model (an error body logged alone): requests,
    # but of no model to account them by; their kinds are in the notes.
    failures_no_model: int = 0
    # What the source's own totals say that the rows do not (a Codex session whose turns do not add up to its
    # last cumulative total), one sentence per file; None when nothing is to be said.
    notes: str | None = None

    @property
    def balanced(self) -> bool:
        return self.rows_read == (self.rows_accepted + self.rows_quarantined + self.duplicates_merged
                                  + self.skipped_not_request + self.failures_no_model)

    def as_row(self) -> dict[str, Any]:
        return {**asdict(self), "balanced": self.balanced}


# --- deployments ---------------------------------------------------------------------------------------------

def ingest_deployments_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> IngestCounts:
    """Resolve the inventory (already loaded as cfg_deployments) to the versions in force on the day."""
    target = lake.day_file(layout.lake, "core", "deployments_daily", window.day)
    rows = lake.write_query(con, statement("deployments_daily"), target, window.params())
    counts = IngestCounts(window.day, "deployments", rows, rows, 0, 0)
    write_quality(con, layout, "deployments", [counts], quarantine_relation=None)
    return counts


# --- requests: the canonical gateway logs and the adapters' formats -------------------------------------------------

def request_sources() -> dict[str, tuple[str, dict[str, str], Adapter | None]]:
    """Every request source: its name (the folder under raw/ and the rows' `source`), what its files are called
    in messages, its file formats and its adapter (None for the canonical gateway logs)."""
    sources: dict[str, tuple[str, dict[str, str], Adapter | None]] = {CANONICAL: ("gateway log", GATEWAY_FORMATS,
                                                                                   None)}
    for name, adapter in adapters().items():
        sources[name] = (adapter.title, adapter.formats, adapter)
    return sources


def _parquet_text_relation(con: duckdb.DuckDBPyConnection, file: LandingFile, table: Table,
                           shape: tuple | None = None, paths: list[Path] | None = None) -> str:
    """Every row of one Parquet file: its 1-based row number, `<name>__text` and `<name>__kind` for every contract
    column. A column the file lacks is taken from the dataset's Hive partition folders, if one names it.
    Objects, arrays and binary values are not turned into text at all (their kind says what they were), but a list
    in a list column, which is read as JSON text.

    With `paths` (files of one `_parquet_shape`, `file` the first of them): the rows of all of them, each with
    `file_index`, its file's position in `paths`."""
    schema, partitions = (dict(shape[0]), dict(shape[1])) if shape else (
        parquet_schema(con, file.path, "Parquet"), dict(file.partitions))
    items = []
    for col in table.columns:
        c = col.name
        if c in schema:
            value_kind = parquet_kind(schema[c])
            if value_kind == "array" and col.is_list:
                text = f"to_json({quoted(c)})::VARCHAR"
            elif value_kind in ("object", "array", "binary"):
                text = "NULL::VARCHAR"
            else:
                text = f"CAST({quoted(c)} AS VARCHAR)"
            kind_sql = f"'{value_kind}'" if value_kind else "NULL::VARCHAR"
            items.append(f"{text} AS {c}__text, CASE WHEN {quoted(c)} IS NOT NULL THEN {kind_sql} END AS {c}__kind")
        elif c in partitions:
            value = partitions[c].replace("'", "''")
            items.append(f"'{value}' AS {c}__text, 'string' AS {c}__kind")
        else:
            items.append(f"NULL::VARCHAR AS {c}__text, NULL::VARCHAR AS {c}__kind")
    if paths is None:
        return (f"SELECT file_row_number + 1 AS source_line, NULL::VARCHAR AS line_problem, {', '.join(items)} "
                f"FROM read_parquet({sql_path(file.path)}, file_row_number = true)")
    files = ", ".join(sql_path(p) for p in paths)
    return (f"SELECT file_row_number + 1 AS source_line, file_index::BIGINT AS file_index, "
            f"NULL::VARCHAR AS line_problem, {', '.join(items)} FROM read_parquet([{files}], file_row_number = true)")


def _parquet_shape(con: duckdb.DuckDBPyConnection, file: LandingFile) -> tuple:
    """What a Parquet file's staging statement depends on besides its path: its columns and types, and the Hive
    partition values a missing column is taken from."""
    return tuple(parquet_schema(con, file.path, "Parquet").items()), tuple(sorted(dict(file.partitions).items()))


def _jsonl_text_relation(table: Table, lines: str) -> str:
    """Every physical line of a JSON Lines file (`lines`: source_line, text, line_problem) and `<name>__text`,
    `<name>__kind` for every contract field of a record, and the line itself as `__line` (for `UNKNOWN_FIELDS`)."""
    return (f"SELECT source_line, line_problem, file_index, text AS __line, {json_text_columns(table, 'j')} FROM ("
            # json_transform is fed NULL for a non-object line: DuckDB may evaluate both branches of a CASE. The
            # line's one parse: a line that does not parse gets NULL (try), and its problem beside it.
            f"SELECT source_line, {parsed_line_problem('j')} AS line_problem, file_index, text, j FROM ("
            f"SELECT source_line, line_problem, file_index, text, try(json_transform(CASE WHEN line_problem IS NULL "
            f"THEN text END, '{struct_spec(table)}')) AS j FROM ({lines})))")


def _unknown_fields(table: Table) -> str:
    """A line's fields outside the contract, from `_jsonl_text_relation`'s `__line`: the reasons name a misspelt
    one beside a required field that is missing. Only a row missing one parses its line's keys again."""
    return unknown_fields(table, "try(json_keys(__line))")


# A reason the JSON reader's path cannot complete: its rows carry no line, so the line-by-line path, which can
# name a misspelt field beside the missing one, stages the file again.
_MISSING_REQUIRED = "regexp_matches(reason, ': required (but missing|when )')"


def _passthrough(file_index: int, source: str, adapted: bool = False, failures: bool = False,
                 zones: bool = False) -> list[str]:
    """The staged columns beside the contract's. An adapter's mapping says which records are not requests
    (`not_request`: counted as skipped, never quarantined), which are calls the provider refused or failed that
    name no model (`failure_no_model`, where the mapping reads failures: counted apart, never quarantined), which
    of the record's times were written without a zone and read as UTC (`zoneless_fields`, where the mapping keeps
    them: counted per file in the reconciliation's notes) and what the file's own totals say (`source_note`).
    The canonical log's received_at is UTC by its definition (docs/inputs.md)."""
    return [f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line",
            "line_problem IS NULL AS is_record", f"'{source}' AS source",
            ("coalesce(not_request OR failure_no_model, false) AS skipped" if failures
             else "coalesce(not_request, false) AS skipped") if adapted else "false AS skipped",
            "coalesce(failure_no_model, false) AS failure_no_model" if failures else "false AS failure_no_model",
            "zoneless_fields" if zones else "NULL::VARCHAR AS zoneless_fields",
            "source_note" if adapted else "NULL::VARCHAR AS source_note"]


# The passthrough of files staged together: a row's file_index is its file's position in the statement's list of
# files; the day's file_index and the file's name are looked up from it ($indexes, $files).
_LISTED_PASSTHROUGH = ["list_extract($indexes, file_index + 1)::INTEGER AS file_index",
                       "list_extract($files, file_index + 1) AS source_file", "source_line",
                       "line_problem IS NULL AS is_record", f"'{CANONICAL}' AS source", "false AS skipped",
                       "false AS failure_no_model", "NULL::VARCHAR AS zoneless_fields",
                       "NULL::VARCHAR AS source_note"]


def _day_params(window: DayWindow | None) -> tuple[str | None, dict[str, Any]]:
    """`keep_raw` and its parameters for staging a day's canonical files (None: keep raw for every row)."""
    if window is None:
        return None, {}
    return _MAY_BE_QUARANTINED, {"day_start": window.start, "day_end": window.end}


def _write_staged(con: duckdb.DuckDBPyConnection, query: str, target: Path,
                  params: dict[str, Any] | None = None) -> int:
    """Write staged rows to the scratch file `target`, in any order: each row carries its file_index and
    source_line, which every reader keys or orders by (lake.write_query, `ordered`)."""
    return lake.write_query(con, query, target, params, scratch=True, ordered=False)


def _stage_gateway_parquet(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path,
                           window: DayWindow | None = None, shape: tuple | None = None) -> None:
    """A canonical gateway Parquet file, typed and judged by the gateway_request contract (`shape`: its
    `_parquet_shape`, when already read)."""
    table = load_contract("gateway_request").table()
    keep_raw, day = _day_params(window)
    query = validation_query(table, _parquet_text_relation(con, file, table, shape),
                             _passthrough(file_index, CANONICAL),
                             gate="line_problem", kinds=True, keep_raw=keep_raw)
    try:
        _write_staged(con, query, target, {"file": str(file.path), **day})
    except duckdb.Error as exc:
        raise read_error(file.path, "Parquet", exc) from None


def _stage_gateway_parquets(con: duckdb.DuckDBPyConnection, files: dict[int, LandingFile], stage_dir: Path,
                            window: DayWindow | None = None) -> list[Path]:
    """Canonical gateway Parquet files (by file_index): the files of one shape (`_parquet_shape`) typed and judged
    in one statement into stage_dir/parquet-NNNNNN.parquet (NNNNNN: the first's file_index), each row carrying its
    file's file_index, name and row number. A day of hourly Parquet files would otherwise plan the contract's
    statement, 100-150 ms, 24 times. A file alone in its shape, or in a group whose statement fails, is staged on
    its own (stage_dir/NNNNNN.parquet), so that an error names the file that caused it."""
    table = load_contract("gateway_request").table()
    keep_raw, day = _day_params(window)
    groups: dict[tuple, list[int]] = {}
    for index, file in files.items():
        groups.setdefault(_parquet_shape(con, file), []).append(index)
    staged = []
    for shape, indexes in groups.items():
        # A column the files call file_index would hide DuckDB's own, which numbers the files.
        if len(indexes) > 1 and "file_index" not in dict(shape[0]):
            target = stage_dir / f"parquet-{indexes[0]:06d}.parquet"
            paths = [files[i].path for i in indexes]
            query = validation_query(table, _parquet_text_relation(con, files[indexes[0]], table, shape, paths),
                                     _LISTED_PASSTHROUGH, gate="line_problem", kinds=True, keep_raw=keep_raw)
            try:
                _write_staged(con, query, target, {"indexes": indexes, "files": [str(p) for p in paths], **day})
                staged.append(target)
                continue
            except duckdb.Error:
                target.unlink(missing_ok=True)
        for index in indexes:
            target = stage_dir / f"{index:06d}.parquet"
            _stage_gateway_parquet(con, files[index], index, target, window, shape)
            staged.append(target)
    return staged


# Files read together by DuckDB's JSON reader in one statement, up to this many bytes on disk: planning the
# contract's statement costs ~80 ms, which a day of small files pays once; a larger file has a statement of its own,
# so that a file the reader refuses costs only its own reading.
FAST_BATCH_BYTES = 16 << 20
# A batch of less is read line by line: below it the JSON reader's statement (~0.25 s for a 1,000-request day's eight
# files, one more when a file fails) costs more than it saves (~1.2 CPU-us a line).
READ_JSON_MIN_BYTES = 1 << 20
READ_JSON, LINE_BY_LINE = "read_json", "line by line"


def _stage_gateway_jsonl(con: duckdb.DuckDBPyConnection, files: dict[int, LandingFile], stage_dir: Path,
                         window: DayWindow | None = None, reading: dict[Path, str] | None = None) -> list[Path]:
    """Canonical gateway JSON Lines files (by file_index), typed and judged by the gateway_request contract, in
    batches (`FAST_BATCH_BYTES`) on as many threads as DuckDB has, the largest first: each batch through DuckDB's
    JSON reader (`_stage_read_json`; a batch under `READ_JSON_MIN_BYTES` skips it), then line by line
    (`_stage_gateway_lines`) for each of its files that reader could not read exactly. Both give a line the same
    row: the same text and kind of each field, the same typing and judging. `reading` gets how each file was read
    (READ_JSON or LINE_BY_LINE), by path. An error is the one of the first file in the day's order that has one,
    whatever thread met it first."""
    batches: list[dict[int, LandingFile]] = []
    for index, file in files.items():
        if not batches or _size(batches[-1]) >= FAST_BATCH_BYTES or file.path.stat().st_size >= FAST_BATCH_BYTES:
            batches.append({})
        batches[-1][index] = file
    batches.sort(key=_size, reverse=True)
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    cursors = [con.cursor() for _ in batches]  # one connection each: a connection is not shared between threads
    try:
        with ThreadPoolExecutor(max(1, min(threads, len(batches)))) as pool:
            futures = {min(batch): pool.submit(_stage_jsonl_batch, cur, batch, stage_dir, window)
                       for batch, cur in zip(batches, cursors, strict=True)}
            done = [futures[first].result() for first in sorted(futures)]
    finally:
        for cur in cursors:
            cur.close()
    if reading is not None:
        slow = {index for _, left in done for index in left}
        reading.update({file.path: LINE_BY_LINE if index in slow else READ_JSON for index, file in files.items()})
    return [target for staged, _ in done for target in staged]


def _size(files: dict[int, LandingFile]) -> int:
    return sum(file.path.stat().st_size for file in files.values())


def _stage_jsonl_batch(con: duckdb.DuckDBPyConnection, files: dict[int, LandingFile], stage_dir: Path,
                       window: DayWindow | None = None) -> tuple[list[Path], list[int]]:
    """A batch of `_stage_gateway_jsonl`: the files staged, and the file_indexes read line by line (into
    stage_dir/jsonl-NNNNNN.parquet, NNNNNN the first one's)."""
    staged, left = [], list(files)
    if _size(files) >= READ_JSON_MIN_BYTES:
        staged, left = _stage_read_json(con, files, stage_dir, window)
        left.sort()
    if left:
        staged += _stage_gateway_lines(con, {index: files[index] for index in left},
                                       stage_dir / f"jsonl-{left[0]:06d}.parquet", window)
    return staged, left


def _stage_read_json(con: duckdb.DuckDBPyConnection, files: dict[int, LandingFile], stage_dir: Path,
                     window: DayWindow | None = None, lines: dict[int, int | None] | None = None
                     ) -> tuple[list[Path], list[int]]:
    """Stage `files` through DuckDB's JSON reader into stage_dir/json-NNNNNN.parquet (NNNNNN: the first one's
    file_index). Returns the files staged and the file_indexes left to the line-by-line path: a file
    `physical_lines` does not count (`lines`: the counts, when already taken), one the reader fails on (the one its
    error names, the others read again; without a name, each file alone), and one whose rows are not its lines one
    for one, or hold a row without any contract field (which may have been a line `null`, which the line-by-line
    path quarantines as not an object) or without a required one (the line-by-line path names a misspelt field
    beside it)."""
    table = load_contract("gateway_request").table()
    keep_raw, day = _day_params(window)
    lines = lines or {index: physical_lines(file.path) for index, file in files.items()}
    left = [index for index, count in lines.items() if count is None]
    todo = [index for index in files if lines[index] is not None]
    empty = " AND ".join(f"{c.name} IS NULL" for c in table.columns if c.default is None)
    while todo:
        target = stage_dir / f"json-{todo[0]:06d}.parquet"
        relation = json_records([files[i].path for i in todo], [(c.name, c.is_list) for c in table.columns])
        query = validation_query(table, relation, _LISTED_PASSTHROUGH, gate="line_problem", kinds=True,
                                 keep_raw=keep_raw)
        try:
            _write_staged(con, query, target, {"indexes": todo, "files": [str(files[i].path) for i in todo],
                                               **day})
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException):
            raise
        except duckdb.Error as exc:
            target.unlink(missing_ok=True)
            # The reader names the file it failed on: the others are read again together, one statement more
            # rather than one a file (a small day's files are one batch, and a generated day has a bad line).
            named = [i for i in todo if any(f'"{name}"' in str(exc)
                                            for name in (files[i].path, literal_path(files[i].path)))]
            if len(named) == 1 or len(todo) == 1:
                left += named or todo
                todo = [index for index in todo if index not in left]
                continue
            alone = [_stage_read_json(con, {i: files[i]}, stage_dir, window, {i: lines[i]}) for i in todo]
            return [t for targets, _ in alone for t in targets], left + [i for _, rest in alone for i in rest]
        rows = {index: (count, empty_rows) for index, count, empty_rows in con.execute(
            f"SELECT file_index, count(*), count(*) FILTER (WHERE ({empty}) OR {_MISSING_REQUIRED}) "
            f"FROM read_parquet({sql_path(target)}) GROUP BY ALL").fetchall()}
        differ = [index for index in todo if rows.get(index, (0, 0)) != (lines[index], 0)]
        if not differ:
            return [target], left
        target.unlink()
        left += differ
        todo = [index for index in todo if index not in differ]
    return [], left


def _stage_gateway_lines(con: duckdb.DuckDBPyConnection, files: dict[int, LandingFile], target: Path,
                         window: DayWindow | None = None) -> list[Path]:
    """Canonical gateway JSON Lines files (by file_index) read line by line (tokenledger/ingest/lines.py), typed and
    judged by the gateway_request contract in one statement into `target`: the statement's planning and set-up, about a
    third of a small file's staging, is paid once for all of them.

    When that statement fails, each file is staged again on its own (target's name with `-NNNNNN`), so the error
    names the file that caused it, exactly as a day of one file would."""
    table = load_contract("gateway_request").table()
    indexes = list(files)
    paths = [files[i].path for i in indexes]
    keep_raw, day = _day_params(window)
    params = {"indexes": indexes, "files": [str(p) for p in paths], **day}
    try:
        with jsonl_lines(con, paths) as (cur, lines):
            query = validation_query(table, _jsonl_text_relation(table, _once_each(table, lines)),
                                     _LISTED_PASSTHROUGH, gate="line_problem", kinds=True, keep_raw=keep_raw,
                                     unknown=_unknown_fields(table))
            _write_staged(cur, query, target, params)
    except (duckdb.Error, LedgerError):
        if len(files) == 1:
            index, file = next(iter(files.items()))
            return _stage_gateway_jsonl_alone(con, file, index, target, window)
        target.unlink(missing_ok=True)
        return [path for index, file in files.items()
                for path in _stage_gateway_jsonl_alone(con, file, index, _alone(target, index), window)]
    check_some_records(con, target, {i: files[i].path for i in indexes}, "gateway log")
    return [target]


def _once_each(table: Table, lines: str) -> str:
    """The canonical lines (`jsonl_lines`), a line holding a contract field twice given its problem: which of the two
    values is meant cannot be told. DuckDB's JSON reader refuses such a line (its file is read line by line); a key
    outside the contract written twice is read by neither."""
    problem = duplicate_key_problem("text", {"$": tuple(table.column_names)}, unparsed=True)
    return (f"SELECT source_line, text, coalesce(line_problem, {problem}) AS line_problem, file_index "
            f"FROM ({lines})")


def _alone(target: Path, index: int) -> Path:
    return target.with_name(f"{target.stem}-{index:06d}.parquet")


def _stage_gateway_jsonl_alone(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path,
                               window: DayWindow | None = None) -> list[Path]:
    table = load_contract("gateway_request").table()
    keep_raw, day = _day_params(window)
    with jsonl_lines(con, file.path) as (cur, lines):
        query = validation_query(table, _jsonl_text_relation(table, _once_each(table, lines)),
                                 _passthrough(file_index, CANONICAL),
                                 gate="line_problem", kinds=True, keep_raw=keep_raw, unknown=_unknown_fields(table))
        try:
            _write_staged(cur, query, target, {"file": str(file.path), **day})
        except duckdb.Error as exc:
            raise read_error(file.path, "JSON Lines", exc) from None
    check_some_records(con, target, file.path, "gateway log")
    return [target]


def _record_fields(adapter: Adapter, source_table: Table) -> list[str]:
    """The top-level fields of a record the source contract reads (nothing else of a row is ever selected)."""
    fields = []
    for col in source_table.columns:
        for path in col.paths:
            top = path.removeprefix("$.").split(".")[0].split("[")[0]
            if top not in fields:
                fields.append(top)
    return fields


# The objects of an OTLP line (one export request) that sql/ingest/otel_spans.sql reads a span from, and the keys it
# reads in them: a line holding one of them twice is quarantined (its spans' records are built, not read).
_LINE_PATHS = {"otel_spans": [
    *(f"$.resourceSpans[*].{where}attributes[*].{key}" for where in ("resource.", "scopeSpans[*].spans[*].")
      for key in ("key", "value.stringValue", "value.intValue", "value.doubleValue", "value.boolValue")),
    *(f"$.resourceSpans[*].scopeSpans[*].spans[*].{key}" for key in ("spanId", "traceId", "name", "startTimeUnixNano",
                                                                      "endTimeUnixNano", "status.code"))]}


def _adapted_records(con: duckdb.DuckDBPyConnection, file: LandingFile, adapter: Adapter, source_table: Table,
                     lines: str | None) -> Any:
    """A relation of the file's records as JSON objects: source_line, line_problem, j. A JSON Lines record holding
    a key the contract reads twice in one object is quarantined (`duplicate_key_problem`); with `adapter.records`,
    the line is checked for the keys that statement reads."""
    if file.fmt == "jsonl":
        paths = (_LINE_PATHS[adapter.records] if adapter.records
                 else [path for col in source_table.columns for path in col.paths])
        records = (f"SELECT source_line, coalesce({parsed_line_problem('j')}, "
                   f"{duplicate_key_problem('j', read_objects(paths))}) AS line_problem, j FROM ("
                   f"SELECT source_line, line_problem, CASE WHEN line_problem IS NULL THEN try(text::JSON) END AS j "
                   f"FROM ({lines}))")
        return statement(adapter.records, lines=records) if adapter.records else records
    fields = _record_fields(adapter, source_table)
    if file.fmt == "parquet":
        schema = parquet_schema(con, file.path, f"a {adapter.title}")
        present = [f for f in fields if f in schema]
        values = [f"'{f}', " + (f"try(json({as_text(f, schema[f])}))" if f in adapter.json_columns
                                else f"{quoted(f)}") for f in present]
        return (f"SELECT file_row_number + 1 AS source_line, NULL::VARCHAR AS line_problem, "
                f"json_object({', '.join(values)}) AS j "
                f"FROM read_parquet({sql_path(file.path)}, file_row_number = true)")
    raise AssertionError(file.fmt)


def _adapted_query(adapter: Adapter, records: str, file_index: int) -> str:
    """Type the records by the source's contract, map them onto gateway_request and judge them by it."""
    source_table = load_contract(adapter.contract).table()
    values = ", ".join(
        f"{_first_present(col.paths)} AS {col.name}__json" for col in source_table.columns)
    texts = ", ".join(json_value_columns(col.name, f"{col.name}__json") for col in source_table.columns)
    source_text = (f"SELECT source_line, line_problem, {texts} FROM (SELECT source_line, line_problem, {values} "
                   f"FROM ({records}))")
    zones = zoneless_fields(source_table)
    checked = validation_query(source_table, source_text,
                               ["source_line", "line_problem", f"{zones or 'NULL::VARCHAR'} AS zoneless_fields"],
                               gate="line_problem", kinds=True)
    fragments = {"checked": checked}
    mapping = sql_text(adapter.mapping)
    if "{failure_status}" in mapping:
        fragments["failure_status"] = sql_text("failure_status")
    mapped = statement(adapter.mapping, **fragments)
    return validation_query(load_contract("gateway_request").table(), mapped,
                            _passthrough(file_index, adapter.name, adapted=True,
                                         failures="failure_no_model" in mapping,
                                         zones="zoneless_fields" in mapping),
                            gate="coalesce(line_problem, source_reason)", kinds=True, labels=adapter.labels,
                            raw="source_raw")


def _first_present(paths: tuple[str, ...]) -> str:
    """The value at the first of `paths` that holds one (JSON null counts as none), from the record `j`."""
    values = [f"nullif(json_extract(j, '{p}'), 'null'::JSON)" for p in paths]
    return values[0] if len(values) == 1 else f"coalesce({', '.join(values)})"


def _format_of(file: LandingFile, folder: str, adapter: Adapter | None) -> Adapter | None:
    """The adapter that reads a JSON Lines file of `folder` (None: the canonical contract), told from its first
    records; an InputFileError when they are those of a format read from another folder."""
    kind = sniff(file.path)
    if adapter is None:
        if kind is None or kind == CANONICAL:
            return None
        raise InputFileError(misplaced(file.path, kind, folder))
    chosen = adapter.for_kind(kind)
    if chosen is None:
        raise InputFileError(misplaced(file.path, kind, folder))
    return chosen


def _stage_adapted_file(con: duckdb.DuckDBPyConnection, adapter: Adapter, file: LandingFile, file_index: int,
                        target: Path) -> None:
    params = {"file": str(file.path)}
    if file.fmt == "jsonl":
        adapter = _format_of(file, adapter.name, adapter) or adapter
    source_table = load_contract(adapter.contract).table()
    if file.fmt == "jsonl":
        with jsonl_lines(con, file.path) as (cur, lines):
            query = _adapted_query(adapter, _adapted_records(con, file, adapter, source_table, lines), file_index)
            try:
                _write_staged(cur, query, target, params)
            except duckdb.Error as exc:
                raise read_error(file.path, f"a {adapter.title}", exc) from None
        check_some_records(con, target, file.path, adapter.title)
        return
    if file.fmt == "csv":
        names = csv_header(file.path)
        fields = [f for f in _record_fields(adapter, source_table) if f in names]
        values = ", ".join(f"'{f}', " + (f"try(json({quoted(f)}))" if f in adapter.json_columns else quoted(f))
                           for f in fields)
        with csv_rows(con, file.path, names) as rows:
            records = (f"SELECT source_line, line_problem, CASE WHEN line_problem IS NULL THEN json_object({values}) "
                       f"END AS j FROM ({rows})")
            _write_staged(con, _adapted_query(adapter, records, file_index), target, params)
        return
    query = _adapted_query(adapter, _adapted_records(con, file, adapter, source_table, None), file_index)
    try:
        _write_staged(con, query, target, params)
    except duckdb.Error as exc:
        raise read_error(file.path, f"a {adapter.title}", exc) from None


def stage_gateway_files(con: duckdb.DuckDBPyConnection, files: list[LandingFile], stage_dir: Path,
                        adapter: Adapter | None = None, first_index: int = 0, window: DayWindow | None = None,
                        reading: dict[Path, str] | None = None) -> list[Path]:
    """Type and judge each file by the gateway_request contract (through `adapter` for another format) into
    stage_dir/NNNNNN.parquet (NNNNNN = the file's position in the day's read order, its file_index); the canonical
    JSON Lines files into stage_dir/json-NNNNNN.parquet (batches read by DuckDB's JSON reader) and
    stage_dir/jsonl-NNNNNN.parquet (files read line by line; `reading` gets which way each was read) and the canonical
    Parquet files of one shape into stage_dir/parquet-NNNNNN.parquet, their rows carrying their file_index. Returns
    the staged files (fewer than `files` when files were staged together). With the `window` of the day the
    files are for, a canonical row keeps `raw` only where it may be quarantined (`_MAY_BE_QUARANTINED`)."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    jsonl: dict[int, LandingFile] = {}
    parquet: dict[int, LandingFile] = {}
    for index, file in enumerate(files, start=first_index):
        target = stage_dir / f"{index:06d}.parquet"
        if adapter is not None:
            _stage_adapted_file(con, adapter, file, index, target)
        elif file.fmt == "jsonl":
            _format_of(file, CANONICAL, None)
            jsonl[index] = file  # staged together below
            continue
        else:
            parquet[index] = file  # by shape, below
            continue
        staged.append(target)
    if parquet:
        staged += _stage_gateway_parquets(con, parquet, stage_dir, window)
    if jsonl:
        staged += _stage_gateway_jsonl(con, jsonl, stage_dir, window, reading)
    return staged


def ingest_gateway_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       scratch: Path, idle: bool = False, reading: dict[Path, str] | None = None
                       ) -> list[IngestCounts]:
    """Type, judge, resolve and de-duplicate one day of requests from every source into core.gateway_requests.

    Sources are read in a fixed order (the canonical gateway logs, then each adapter's folder), files by name
    within each; that order decides which copy of a duplicate wins a tie. Returns a reconciliation per source:
    the canonical one always, an adapter's when its folder for the day exists. A day with no request file in any
    source stops with a LedgerError unless the user declared it `idle`: a missing upload must not be published
    as a day without traffic. `reading` gets how each canonical JSON Lines file was read (`stage_gateway_files`)."""
    check_layout(layout, window.day, request_sources())  # nothing under raw/ ignored
    staged: list[Path] = []
    present = [CANONICAL]
    read = 0  # files of the day so far: the next source's first file_index
    for name, (title, formats, adapter) in request_sources().items():
        folder = layout.source_day_dir(name, window.day)
        if name != CANONICAL and folder.exists():
            present.append(name)
        files = landing_files(folder, formats, title)
        staged += stage_gateway_files(con, files, scratch / "gateway" / name, adapter, first_index=read,
                                      window=window, reading=reading)
        read += len(files)
    if not staged and not idle:
        folders = ", ".join(str(layout.source_day_dir(name, window.day)) for name in request_sources())
        raise LedgerError(
            f"no request logs for {window.day}: none of {folders} holds a file. Publishing the day would report "
            "a day without traffic. If the logs are late, land them and re-run the day; if the day really had "
            f"no traffic, declare it idle: tokenledger run --idle (or TOKENLEDGER_IDLE_DAYS={window.day}, or the "
            "ledger resource's idle_days).")
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
            f"Request logs of {window.day} name deployments that config/deployments.yaml does not have in force "
            f"on that day:\n{lines}\nAdd them to {layout.config / 'deployments.yaml'} (with valid_from on or "
            "before that day) and re-run the day."
        )

    con.execute("CREATE OR REPLACE TEMP TABLE gateway_day AS SELECT $day::DATE AS day, "
                "$day_start::TIMESTAMPTZ AS day_start, $day_end::TIMESTAMPTZ AS day_end", window.params())
    con.execute("CREATE OR REPLACE TEMP VIEW checked_gateway AS " + statement("gateway_checked"))
    con.execute("CREATE OR REPLACE TEMP TABLE gateway_duplicates AS " + statement("gateway_duplicates"))

    target = lake.day_file(layout.lake, "core", "gateway_requests", window.day)
    lake.write_query(con, statement("gateway_requests"), target, window.params())
    counts = [IngestCounts(window.day, source, read, accepted, quarantined, merged, skipped, failures, notes)
              for source, read, accepted, quarantined, merged, skipped, failures, notes in run_sql(
                  con, "gateway_reconciliation", {"sources": present}, accepted_file=sql_path(target)).fetchall()]
    write_quality(con, layout, "requests", counts, quarantine_relation="checked_gateway")
    return counts


def _create_staged_view(con: duckdb.DuckDBPyConnection, name: str, staged: list[Path], columns: list[str]) -> None:
    """A view over the staged files, or an empty one of the same shape when the day has no files."""
    if staged:
        files = ", ".join(sql_path(p) for p in staged)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS "
                    f"SELECT * FROM read_parquet([{files}], union_by_name = true)")
        return
    contract = load_contract("gateway_request" if name == "staged_gateway" else "focus_billing").table()
    typed = ", ".join(f"NULL::{contract.column(c).physical_type} AS {c}" for c in columns)
    extra = "NULL::VARCHAR AS row_fingerprint, " if name == "staged_billing" else ""
    source = f"'{CANONICAL if name == 'staged_gateway' else 'billing'}' AS source"
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT NULL::INTEGER AS file_index, NULL::VARCHAR AS source_file, "
        f"NULL::BIGINT AS source_line, true AS is_record, {source}, false AS skipped, false AS failure_no_model, "
        "NULL::VARCHAR AS zoneless_fields, NULL::VARCHAR AS source_note, "
        f"{extra}{typed}, NULL::VARCHAR AS raw, "
        "NULL::VARCHAR AS reason WHERE false"
    )


# --- billing -------------------------------------------------------------------------------------------------

def _require_focus_columns(path: Path, table: Table, present: list[str], where: str) -> None:
    missing = [c.name for c in table.columns if c.required and c.name not in present]
    if missing:
        raise InputFileError(
            f"{path}: has no column {', '.join(missing)}{where}, so it is not a FOCUS billing export tokenledger can "
            "read (FOCUS 1.0-1.2 column names are required). Export FOCUS from your provider or move the file out of "
            "raw/billing, then re-run.")


def _billing_texts(table: Table, present: dict[str, str]) -> str:
    """`<name>__text` of every FOCUS contract column, from `present` (column -> its text expression)."""
    return ", ".join(f"{present[c]} AS {c}__text" if c in present else f"NULL::VARCHAR AS {c}__text"
                     for c in table.column_names)


def _stage_billing_file(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path) -> None:
    table = load_contract("focus_billing").table()
    passthrough = [f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line",
                   "true AS is_record", "'billing' AS source", "false AS skipped", "row_fingerprint"]
    params = {"file": str(file.path)}
    if file.fmt == "csv":
        names = csv_header(file.path)
        _require_focus_columns(file.path, table, names, " in its header (line 1)")
        with csv_rows(con, file.path, names) as rows:
            relation = (f"SELECT source_line, row_fingerprint, line_problem, "
                        f"{_billing_texts(table, {n: quoted(n) for n in names})} FROM ({rows})")
            lake.write_query(con, validation_query(table, relation, passthrough, gate="line_problem"), target,
                             params)
        return
    # A Parquet export: a MAP or STRUCT of tags read as a JSON object; the fingerprint covers every column.
    schema = parquet_schema(con, file.path, "a FOCUS export")
    _require_focus_columns(file.path, table, list(schema), "")
    all_texts = ", ".join(as_text(n, t) for n, t in schema.items())
    relation = (f"SELECT file_row_number + 1 AS source_line, md5(list_value({all_texts})::VARCHAR) AS row_fingerprint, "
                f"{_billing_texts(table, {n: as_text(n, t) for n, t in schema.items()})} "
                f"FROM read_parquet({sql_path(file.path)}, file_row_number = true)")
    try:
        lake.write_query(con, validation_query(table, relation, passthrough), target, params)
    except duckdb.Error as exc:
        raise read_error(file.path, "a FOCUS export", exc) from None


def stage_billing(con: duckdb.DuckDBPyConnection, layout: HomeLayout, stage_dir: Path) -> list[Path]:
    """Every billing export in raw/billing/, each row typed and judged by the focus_billing contract, staged as
    stage_dir/NNNNNN.parquet (NNNNNN: the file's position by name). Nothing here depends on the day: a run of
    several days stages the exports once and takes each day's rows from them (`ingest_billing_day`)."""
    files = landing_files(layout.billing_dir, BILLING_FORMATS, "FOCUS billing")
    stage_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    for index, path in enumerate(files):
        target = stage_dir / f"{index:06d}.parquet"
        _stage_billing_file(con, path, index, target)
        staged.append(target)
    return staged


def ingest_billing_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       scratch: Path, staged: list[Path] | None = None) -> IngestCounts:
    """Keep the rows of every billing export (`staged` by `stage_billing`, or staged here when None) that overlap
    the day and prorate them into core.billing_charges."""
    if staged is None:
        staged = stage_billing(con, layout, scratch / "billing")
    scratch.mkdir(parents=True, exist_ok=True)
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
    write_quality(con, layout, "billing", [counts], quarantine_relation="billing_day")
    return counts


# --- quality parts -------------------------------------------------------------------------------------------

def write_quality(con: duckdb.DuckDBPyConnection, layout: HomeLayout, stage: str, counts: list[IngestCounts],
                   quarantine_relation: str | None) -> None:
    """Write a stage's quarantine rows and reconciliation rows (one per source) for the day, for the quality
    tables to gather."""
    day = counts[0].day
    quarantine = lake.day_file(layout.lake, "quality_parts", f"quarantine_{stage}", day)
    if quarantine_relation:
        lake.write_query(con, statement("quarantine_rows", relation=quarantine_relation), quarantine, {"day": day})
    else:
        lake.write_query(con, "SELECT $day::DATE AS day, NULL::VARCHAR AS source, NULL::VARCHAR AS file, "
                              "NULL::BIGINT AS line, NULL::VARCHAR AS reason, NULL::VARCHAR AS raw WHERE false",
                         quarantine, {"day": day})
    # A note names a file by its place in the home (raw/gpu/dt=.../node-z.csv), never by the path of the machine or
    # work folder that read it: two homes that ran the same files publish the same notes.
    raw = str(layout.raw).rstrip("/") + "/"
    rows = [{**c.as_row(), "notes": c.notes.replace(raw, "raw/") if c.notes else c.notes} for c in counts]
    con.execute("CREATE OR REPLACE TEMP TABLE _reconciliation (day DATE, source VARCHAR, rows_read BIGINT, "
                "rows_accepted BIGINT, rows_quarantined BIGINT, duplicates_merged BIGINT, "
                "skipped_not_request BIGINT, failures_no_model BIGINT, notes VARCHAR, balanced BOOLEAN)")
    con.executemany("INSERT INTO _reconciliation VALUES ($day, $source, $rows_read, $rows_accepted, "
                    "$rows_quarantined, $duplicates_merged, $skipped_not_request, $failures_no_model, $notes, "
                    "$balanced)", rows)
    lake.write_query(con, "SELECT * FROM _reconciliation ORDER BY source",
                     lake.day_file(layout.lake, "quality_parts", f"ingest_reconciliation_{stage}", day))
