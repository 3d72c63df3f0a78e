"""Ingest of one UTC day of GPU telemetry: raw/gpu/dt=YYYY-MM-DD/ (docs/inputs.md, GPU telemetry).

Two forms operators already have, told apart by the file's name:

- `*.json` (`*.json.gz`): a Prometheus range-query result (`/api/v1/query_range`, resultType matrix) of the DCGM
  exporter's series, unnested in DuckDB (sql/ingest/gpu_prometheus_samples.sql): a row is one sample of one series,
  typed by data_contracts/inputs/gpu_prometheus.odcs.yaml;
- `*.csv` (`*.csv.gz`): an `nvidia-smi --query-gpu=... --format=csv -l N` log, read by its own header
  (tokenledger/ingest/readers.py csv_rows): a row is one line, typed by data_contracts/inputs/gpu_nvidia_smi.odcs.yaml,
  its units ("250.33 W") taken off first.

Both are staged in one shape (a row per sample or line, its measures as columns), then the day is assembled like
the other sources: every row read is accepted, quarantined with its file, line and reason, merged into a duplicate
or skipped (a "NaN" sample, a series of another metric, a repeated header line, a sample outside the day), and the
counts reconcile in quality.ingest_reconciliation_daily (source `gpu`). Accepted samples are mapped to the
deployment whose version in force claims the GPU (config/deployments.yaml: gpu_uuids, gpu_hosts, gpu_pods) and
kept one measure a row in core.gpu_samples.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import duckdb

from tokenledger.contracts import load_contract, validation_query, violation_reasons, zoneless_fields
from tokenledger.errors import InputFileError, LedgerError
from tokenledger.ingest.landing import GPU_SOURCE, LandingFile, landing_files
from tokenledger.ingest.readers import csv_header, csv_rows, quoted, read_error
from tokenledger.ingest.sources import IngestCounts, write_quality
from tokenledger.storage import lake
from tokenledger.storage.duck import memory_limit_bytes, run_sql, sql_path, statement
from tokenledger.storage.lake import DayWindow, attach_day, write_table
from tokenledger.storage.layout import HomeLayout

SOURCE = GPU_SOURCE
GPU_FORMATS = {".json": "prometheus", ".json.gz": "prometheus", ".csv": "nvidia_smi", ".csv.gz": "nvidia_smi"}
# The DCGM exporter's series that are read, and the measure each gives.
DCGM_METRICS = {"DCGM_FI_DEV_POWER_USAGE": "power_w", "DCGM_FI_DEV_GPU_UTIL": "gpu_util_pct",
                "DCGM_FI_PROF_SM_ACTIVE": "sm_active", "DCGM_FI_DEV_FB_USED": "fb_used_mib"}
MEASURES = ("power_w", "gpu_util_pct", "sm_active", "fb_used_mib")
# nvidia-smi's header names (their units in brackets taken off) -> the contract's fields, with the unit its values
# carry in --format=csv.
SMI_FIELDS = {"timestamp": ("timestamp", None), "uuid": ("uuid", None), "index": ("index", None),
              "power.draw": ("power_draw", "W"), "utilization.gpu": ("utilization_gpu", "%"),
              "memory.used": ("memory_used", "MiB")}
_SMI_REQUIRED = ("timestamp", "uuid")


# A Prometheus response is one JSON document, which DuckDB's reader holds whole in memory (with its parse): it is
# read only when it is at most this share of the connection's memory_limit once decompressed.
DOCUMENT_SHARE = 8


def _document_bytes(path: Path, limit: int) -> int:
    """The size of a Prometheus response once decompressed: DuckDB's JSON reader takes one object of at most a size
    it is given, and allocates a buffer of that size (a gzip trailer holds the size modulo 4 GiB only: counted, and
    no further than `limit`, so that a file that inflates without bound is refused as soon as it passes it)."""
    if not path.name.endswith(".gz"):
        size = path.stat().st_size
    else:
        size = 0
        try:
            with gzip.open(path, "rb") as f:
                while size <= limit and (chunk := f.read(1 << 20)):
                    size += len(chunk)
        except (OSError, EOFError) as exc:
            raise InputFileError(f"{path}: cannot be read ({exc}). Replace it with a complete copy (or move it out "
                                 "of the landing folder), then re-run the day.") from None
    if size > limit:
        inflated = " once decompressed" if path.name.endswith(".gz") else ""
        raise InputFileError(
            f"{path}: a Prometheus response of more than {limit / 2**20:,.0f} MiB{inflated}: it is read as one JSON "
            f"document held in memory, and this run's memory_limit allows 1/{DOCUMENT_SHARE} of it per document. "
            "Save the range query in smaller pieces (an hour, or a few hosts, per file), or raise the memory limit, "
            "then re-run the day.")
    return size + 1

# The staged shape of both forms (the columns gpu_day_rows.sql and the quarantine read).
_STAGED = ("file_index", "source_file", "source_line", "is_record", "source", "skipped", "skip_reason", "raw",
           "reason", "sampled_at", "gpu_uuid", "hostname", "gpu_index", "gpu_model", "namespace", "pod",
           *MEASURES, "zoneless_fields")


def _measure_items(values: dict[str, str]) -> str:
    return ", ".join(f"{values.get(m, 'NULL::DOUBLE')} AS {m}" for m in MEASURES)


def stage_prometheus(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path) -> None:
    """One Prometheus range-query result, every sample typed and judged by the gpu_prometheus contract."""
    path = file.path
    max_bytes = _document_bytes(path, memory_limit_bytes(con) // DOCUMENT_SHARE)
    # Said, not detected: DuckDB detects it by the name's extension, which the escapes of a path it must read
    # literally (duck.sql_path) can hide.
    compression = "gzip" if path.name.endswith(".gz") else "none"
    try:
        head = con.execute(
            f"SELECT status, error, data.resultType FROM read_json({sql_path(path)}, format = 'unstructured', "
            f"records = true, compression = '{compression}', maximum_object_size = {max_bytes}, "
            "columns = {'status': 'VARCHAR', "
            "'error': 'VARCHAR', 'data': 'STRUCT(resultType VARCHAR)'})").fetchall()
    except duckdb.Error as exc:
        raise read_error(path, "a Prometheus query_range result (JSON)", exc) from None
    status, error, result_type = head[0] if len(head) == 1 else (None, None, None)
    if status != "success" or result_type != "matrix":
        why = (f"its status is {status!r} ({error})" if status not in (None, "success")
               else f"its data.resultType is {result_type!r}, not 'matrix'" if status == "success"
               else "it is not one JSON object with status and data")
        raise InputFileError(f"{path}: is not the result of a Prometheus range query: {why}. Save the response of "
                             "GET /api/v1/query_range (resultType matrix) or move the file out of the landing "
                             "folder, then re-run the day.")
    table = load_contract("gpu_prometheus").table()
    text = statement("gpu_prometheus_samples", path=sql_path(path), max_bytes=str(max_bytes),
                     compression=f"'{compression}'")
    known = ", ".join(f"'{m}'" for m in DCGM_METRICS)
    skip = (f"CASE WHEN coalesce(metric__text NOT IN ({known}), false) THEN 'a series of ' || metric__text || "
            "', which is not read' WHEN lower(trim(value__text)) = 'nan' THEN 'NaN sample: no measurement' END")
    passthrough = [f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line", "true AS is_record",
                   f"'{SOURCE}' AS source", f"({skip}) IS NOT NULL AS skipped", f"{skip} AS skip_reason", "json_path"]
    measure = {m: f"CASE WHEN metric = '{name}' THEN value END" for name, m in DCGM_METRICS.items()}
    query = (f"SELECT {', '.join(_STAGED[:8])}, "
             "CASE WHEN reason IS NOT NULL THEN json_path || ': ' || reason END AS reason, "
             '"timestamp" AS sampled_at, "UUID" AS gpu_uuid, Hostname AS hostname, gpu AS gpu_index, '
             f"modelName AS gpu_model, namespace, pod, {_measure_items(measure)}, "
             "NULL::VARCHAR AS zoneless_fields, json_path "
             f"FROM ({validation_query(table, text, passthrough, kinds=True)})")
    query = _measure_rules(query, {m: f"{name} value" for name, m in DCGM_METRICS.items()}, "json_path || ': '")
    try:
        lake.write_query(con, query, target, {"file": str(path)}, scratch=True, ordered=False)
    except duckdb.Error as exc:
        raise read_error(path, "a Prometheus query_range result (JSON)", exc) from None


def _smi_value(column: str, unit: str | None) -> str:
    """The text of an nvidia-smi value without its unit; a bracketed value ([N/A], [Not Supported]) is missing."""
    value = f"trim({quoted(column)})"
    if unit is None:
        return value
    pattern = f"^(.*\\S)\\s*{re.escape(unit)}$".replace("'", "''")
    return (f"CASE WHEN {value} LIKE '[%]' THEN NULL WHEN regexp_matches({value}, '{pattern}') "
            f"THEN regexp_extract({value}, '{pattern}', 1) ELSE {value} END")


def stage_nvidia_smi(con: duckdb.DuckDBPyConnection, file: LandingFile, file_index: int, target: Path) -> None:
    """One nvidia-smi CSV log, every line typed and judged by the gpu_nvidia_smi contract; a line DuckDB cannot
    parse (fields missing or too many) is quarantined with its line number."""
    path = file.path
    names = csv_header(path)
    by_field = {}
    for name in names:
        field = SMI_FIELDS.get(re.sub(r"\s*\[[^\]]*\]$", "", name).strip().lower())
        if field:
            by_field[field[0]] = (name, field[1])
    missing = [f for f in _SMI_REQUIRED if f not in by_field]
    if missing:
        raise InputFileError(f"{path} line 1: the header has no {', '.join(missing)} column, so it is not an "
                             "nvidia-smi log tokenledger can read. Log with nvidia-smi --query-gpu=timestamp,uuid,"
                             "index,power.draw,utilization.gpu,memory.used --format=csv -l 60 (or move the file out "
                             "of the landing folder), then re-run the day.")
    table = load_contract("gpu_nvidia_smi").table()
    texts = []
    for column in table.columns:
        if column.name not in by_field:
            texts.append(f"NULL::VARCHAR AS {column.name}__text")
        elif column.name == "timestamp":
            texts.append(f"replace(trim({quoted(by_field['timestamp'][0])}), '/', '-') AS timestamp__text")
        else:
            texts.append(f"{_smi_value(*by_field[column.name])} AS {column.name}__text")
    header_again = f"coalesce(trim({quoted(by_field['timestamp'][0])}) = 'timestamp', false)"
    labels = {c: n for c, (n, _) in by_field.items()}
    with csv_rows(con, path, names) as rows:
        relation = f"SELECT source_line, line_problem, {header_again} AS header_again, {', '.join(texts)} FROM ({rows})"
        passthrough = [f"{file_index}::INTEGER AS file_index", "$file AS source_file", "source_line",
                       "line_problem IS NULL AS is_record", f"'{SOURCE}' AS source", "header_again AS skipped",
                       "CASE WHEN header_again THEN 'the header line again' END AS skip_reason", "NULL AS json_path",
                       f"{zoneless_fields(table, labels) or 'NULL::VARCHAR'} AS zoneless_fields"]
        measure = {"power_w": "power_draw", "gpu_util_pct": "utilization_gpu", "fb_used_mib": "memory_used"}
        query = (f"SELECT {', '.join(_STAGED[:9])}, \"timestamp\" AS sampled_at, uuid AS gpu_uuid, "
                 "$host AS hostname, \"index\" AS gpu_index, NULL::VARCHAR AS gpu_model, NULL::VARCHAR AS namespace, "
                 f"NULL::VARCHAR AS pod, {_measure_items(measure)}, zoneless_fields "
                 f"FROM ({validation_query(table, relation, passthrough, gate='line_problem', labels=labels)})")
        query = _measure_rules(query, {m: labels[f] for m, f in measure.items() if f in labels}, "''")
        lake.write_query(con, query, target, {"file": str(path), "host": host_of(path)}, scratch=True,
                         ordered=False)


def _measure_rules(query: str, labels: dict[str, str], prefix: str) -> str:
    """`query`'s staged rows with the measures judged by data_contracts/inputs/gpu_measures.odcs.yaml, the ranges
    every form shares (a value in another unit is out of range in each), each broken rule added to the row's reason
    under the form's own field name (`labels`), after `prefix` (SQL: where in the file the value was)."""
    measures = load_contract("gpu_measures").table()
    # a whole value shown as written (2600, not 2600.0)
    shown = {m: f"regexp_replace({m}::VARCHAR, '\\.0$', '')" for m in MEASURES}
    broken = violation_reasons(measures, text_columns=shown, labels=labels)
    return (f"SELECT {', '.join(_STAGED)} FROM (SELECT * REPLACE (nullif(concat_ws('; ', reason, "
            f"CASE WHEN NOT skipped THEN {prefix} || ({broken}) END), '') AS reason) FROM ({query}))")


def host_of(path: Path) -> str:
    """The host an nvidia-smi log is from: its file name without .csv or .csv.gz."""
    return re.sub(r"\.csv(\.gz)?$", "", path.name)


def stage_gpu_files(con: duckdb.DuckDBPyConnection, files: list[LandingFile], stage_dir: Path) -> list[Path]:
    """Each telemetry file typed and judged by its form's contract into stage_dir/NNNNNN.parquet."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    staged = []
    for index, file in enumerate(files):
        target = stage_dir / f"{index:06d}.parquet"
        (stage_prometheus if file.fmt == "prometheus" else stage_nvidia_smi)(con, file, index, target)
        staged.append(target)
    return staged


def _staged_view(con: duckdb.DuckDBPyConnection, staged: list[Path]) -> None:
    if staged:
        files = ", ".join(sql_path(p) for p in staged)
        con.execute(f"CREATE OR REPLACE TEMP VIEW staged_gpu AS SELECT {', '.join(_STAGED)} "
                    f"FROM read_parquet([{files}], union_by_name = true)")
        return
    types = {"file_index": "INTEGER", "source_line": "BIGINT", "is_record": "BOOLEAN", "skipped": "BOOLEAN",
             "sampled_at": "TIMESTAMPTZ", "gpu_index": "INTEGER", **{m: "DOUBLE" for m in MEASURES}}
    con.execute("CREATE OR REPLACE TEMP VIEW staged_gpu AS SELECT "
                + ", ".join(f"NULL::{types.get(c, 'VARCHAR')} AS {c}" for c in _STAGED) + " WHERE false")


def ingest_gpu_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                   scratch: Path) -> IngestCounts:
    """Type, judge, de-duplicate and map one day of GPU telemetry into core.gpu_samples; a day without a folder
    has no samples (every deployment then keeps its nominal power, labelled so)."""
    files = landing_files(layout.source_day_dir(SOURCE, window.day), GPU_FORMATS, "GPU telemetry")
    staged = stage_gpu_files(con, files, scratch / "gpu")
    _staged_view(con, staged)
    deployments = lake.day_file(layout.lake, "core", "deployments_daily", window.day)
    con.execute(f"CREATE OR REPLACE TEMP VIEW day_deployments AS SELECT * FROM read_parquet({sql_path(deployments)})")
    day_rows = scratch / "gpu_day.parquet"
    scratch.mkdir(parents=True, exist_ok=True)
    lake.write_query(con, statement("gpu_day_rows"), day_rows, window.params(), scratch=True)
    con.execute(f"CREATE OR REPLACE TEMP VIEW gpu_day AS SELECT * FROM read_parquet({sql_path(day_rows)})")
    run_sql(con, "glob_like")
    con.execute("CREATE OR REPLACE TEMP TABLE gpu_matches AS " + statement("gpu_matches"))
    claimed = run_sql(con, "gpu_ambiguous").fetchall()
    if claimed:
        lines = "\n".join(f"  GPU {u} (host {h}, index {i}, pod {ns}/{p}): {a} and {b}"
                          for u, h, i, ns, p, a, b in claimed)
        raise LedgerError(f"GPU telemetry of {window.day} has GPUs that two deployments in force claim at the same "
                          f"time:\n{lines}\nMake the gpu_uuids, gpu_hosts and gpu_pods patterns of "
                          f"{layout.config / 'deployments.yaml'} claim each GPU once, then re-run the day.")
    target = lake.day_file(layout.lake, "core", "gpu_samples", window.day)
    lake.write_query(con, statement("gpu_samples"), target, window.params())
    read, quarantined, skipped, merged = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE reason IS NOT NULL AND NOT skipped), count(*) FILTER (WHERE skipped), "
        "count(*) FILTER (WHERE duplicate) FROM gpu_day").fetchone()
    # nvidia-smi writes its host's local time without a zone: read as UTC, and said per file (docs/inputs.md)
    (notes,) = con.execute(
        "SELECT string_agg(note, '; ' ORDER BY note) FROM (SELECT format('{}: {} line(s) with a time written without "
        "a zone ({}), read as UTC; nvidia-smi writes its host''s local time, so this is right only where the host "
        "runs in UTC (TZ=UTC)', source_file, count(*), string_agg(DISTINCT zoneless_fields, ', ')) AS note "
        "FROM staged_gpu WHERE zoneless_fields IS NOT NULL AND is_record GROUP BY source_file)").fetchone()
    counts = IngestCounts(window.day, SOURCE, read, read - quarantined - skipped - merged, quarantined, merged,
                          skipped, notes=notes)
    write_quality(con, layout, SOURCE, [counts], quarantine_relation="gpu_day")
    return counts


def build_gpu_usage(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, table: str) -> int:
    """Write infra.gpu_usage_hourly (from core.gpu_samples, core.deployments_daily and infra.goodput_hourly) or
    infra.gpu_usage_daily (from the hourly table) for the day; returns its rows."""
    attach_day(con, layout, window, "day_gpu_samples", "core", "gpu_samples")
    if table == "gpu_usage_hourly":
        attach_day(con, layout, window, "day_deployments", "core", "deployments_daily")
        attach_day(con, layout, window, "day_goodput", "infra", "goodput_hourly")
    else:
        attach_day(con, layout, window, "day_gpu_usage_hourly", "infra", "gpu_usage_hourly")
    return write_table(con, layout, window, "infra", table)
