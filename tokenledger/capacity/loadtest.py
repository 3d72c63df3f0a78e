"""Load-test runs and their lambda_slo_max (docs/inputs.md, Load-test runs; docs/metrics.md, section 5).

A run is a folder `raw/loadtest/<run_id>/` holding `run.yaml` (data_contracts/inputs/loadtest_run.odcs.yaml) and the
run's requests in its `format`: request files in the gateway_request contract (`gateway`, the default), or
`vllm bench serve` result files (`vllm-bench`, below). The requests are typed and judged exactly as gateway logs
are (`tokenledger.ingest.sources.stage_gateway_files`), the run's own rules are added
(sql/capacity/loadtest_checked.sql),
duplicates are merged and the accepted requests assembled by the gateway's own statements, then judged against
the SLO policy in force on the run's day by the production judgement (sql/accounting/requests_judged.sql). Every step is
measured on its segment by sql/capacity/loadtest_steps.sql into the temp table `loadtest_steps` (data_contracts/
core_loadtest_steps.odcs.yaml), one row per run and step. Decisions:
docs/adr/0067-load-test-runs.md and docs/adr/0068-what-a-load-test-step-proves.md.

A vllm-bench run holds one or more `vllm bench serve --save-result --save-detailed` result files (`*.json`, one
JSON object each), as a sweep of request rates writes them. Source: vllm-project/vllm, `vllm/benchmarks/serve.py`
(`benchmark()` builds the result, `main_async()` saves it) and `vllm/benchmarks/lib/endpoint_request_func.py`
(`RequestFuncOutput`, the per-request success and error) at commits 009e6d4a and 02cfb534 of main (0.31 or later),
and the keys' history from v0.8.0, the first release with `vllm bench serve` (the older
benchmarks/benchmark_serving.py wrote the same JSON), to v0.33.0, read from the released wheels. Read per file
(sql/capacity/vllm_bench_file.sql) and per request (sql/capacity/vllm_bench_requests.sql), all in DuckDB; the file is
one JSON document, parsed once per statement:

- a file is a step at its `request_rate` (req/s), lasting its `duration` (s, the benchmark's wall time from the
  first request sent to the last response). Steps are ranked by request_rate (files in any order, any names);
  the first starts at run.yaml's `start` and each next one where the previous ended. The order does not change
  what a step measures; `date` (the client's local time, no zone) and `model_id` (the checkpoint's name, not the
  inventory's model) are not read: run.yaml says when and what;
- request i of a file is entry i of the parallel lists `input_lens`, `output_lens`, `ttfts` (s), `itls` (a list
  of gaps between streamed chunks, s) and `errors`, with `start_times` (s, `time.perf_counter()`, from 0.15),
  `latencies` (s) and `queue_times` (s, time waiting for the client's --max-concurrency, from 0.31) when the
  version writes them. The lists exist only with --save-detailed (0.9.1 on; always before). Not read: `failed`
  (0.12 on; `completed` says as much), `server_ttfts` and `server_queue_times` (0.33, measured from scheduling,
  not from arrival), `burstiness` (the arrival process, below) and the summary percentiles;
- request_id = `<run_id>/<file name>/<i>`; received_at = the step's start + the request's arrival (start_times[i]
  - queue_times[i]) after the file's first arrival; without start_times, the requests are spread evenly over the
  step, request i at i * duration / n. vLLM's arrivals are a Poisson (burstiness 1) or gamma process, so evenly
  spaced is an approximation of when requests arrived, never of how many;
- status: `ok` by vLLM's own success rule, which the file does not store: the first chunk arrived (ttft > 0) and
  no error was recorded (errors[i] == ""); else `error`, with error_type the exception class of a traceback or
  the HTTP reason phrase (never the text). `completed` must equal the number of successes, or the file is refused;
- input_tokens = input_lens[i] (the server's prompt_tokens when it returned usage), output_tokens =
  output_lens[i] (0 for a failure), cached_input_tokens = 0 (vLLM bench reports no prefix-cache hits), tenant
  `loadtest`, the run's model and deployment;
- ttft_ms = (queue_times[i] +) ttfts[i] * 1000; e2e_ms = (queue_times[i] +) latencies[i] * 1000, or ttfts[i] +
  sum(itls[i]) before 0.31 (the same sum for a failure); itl_max_ms = max(itls[i]) * 1000 (a gap can span several
  tokens of one chunk); queue_ms = queue_times[i] * 1000 when written. TTFT is measured from arrival, queueing
  included (docs/metrics.md), so a request --max-concurrency held back counts its wait; a file with
  max_concurrency set and no queue_times is refused. Milliseconds are rounded to the microsecond;
- a file that cannot be a step (not one JSON object, a required key missing, lists of different lengths, a rate
  of `inf` or with ramp-up, `completed` disagreeing) stops the run with the file, the field and the rule; an
  entry of a list that cannot be a request (a negative length, a gap that is not a number) is quarantined with the
  file, its index (as the line) and the reason, under the vLLM field's name. Prompts and generated_texts are
  never read.

The connection must be a compute connection (UTC) with the config loaded (`tokenledger.config.load_config`); it
is loaded here when it is not.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb

from tokenledger.accounting.day import slo_version_in_force
from tokenledger.config import (
    _check_keys,
    _line,
    _load_rows,
    _Mapping,
    _require_list,
    _require_mapping,
    _Rows,
    load_config,
    read_yaml,
)
from tokenledger.contracts import load_contract, validation_query
from tokenledger.errors import ConfigError, InputFileError
from tokenledger.ingest.landing import LandingFile, landing_files
from tokenledger.ingest.readers import read_error
from tokenledger.ingest.sources import GATEWAY_FORMATS, stage_gateway_files
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path, run_sql, sql_path, statement, used_params
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

RUN_FILE = "run.yaml"
GATEWAY, VLLM_BENCH = "gateway", "vllm-bench"
# The keys of run.yaml per format, in the order messages list them; all required (`format` may be left out for
# gateway, its default). BATCHING_KEYS are taken by every format, and optional.
FORMAT_KEYS = {
    GATEWAY: ("run_id", "model", "deployment_id", "start", "warmup_min", "steps"),
    VLLM_BENCH: ("run_id", "format", "model", "deployment_id", "start", "warmup_min"),
}
FORMAT_FILES = {GATEWAY: "request files in the gateway_request contract",
                VLLM_BENCH: "vllm bench serve --save-result --save-detailed result files"}
# The engine's batching settings the run ran with: optional in every format; each one left out is the inventory's at
# the run's start (sql/capacity/loadtest_batching.sql). Part of the run's configuration identity.
BATCHING_KEYS = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill")
RUN_KEYS = ("run_id", "format", "model", "deployment_id", "start", "warmup_min", *BATCHING_KEYS)
STEP_KEYS = {"arrival_rate", "start", "end"}
VLLM_BENCH_FORMATS = {".json": "json"}
# gateway_request columns -> the vLLM fields they are read from, for quarantine reasons.
VLLM_BENCH_LABELS = {
    "request_id": "<run_id>/<file>/<index>",
    "received_at": "start_times (or the index)",
    "status": "errors and ttfts",
    "input_tokens": "input_lens",
    "output_tokens": "output_lens",
    "ttft_ms": "ttfts * 1000",
    "e2e_ms": "latencies (or ttfts + itls) * 1000",
    "queue_ms": "queue_times * 1000",
    "itl_max_ms": "max(itls) * 1000",
    "error_type": "errors",
}
STEPS_TABLE = "loadtest_steps"
QUARANTINE_SAMPLE = 5
# Temp objects one run's measurement creates; the names are those the reused gateway and SLO statements read.
_RUN_OBJECTS = (
    ("VIEW", "requests_judged"), ("TABLE", "day_slo_isl_bucket"), ("TABLE", "day_slo_policy"),
    ("VIEW", "day_deployments"), ("VIEW", "day_requests"), ("TABLE", "gateway_duplicates"),
    ("VIEW", "checked_gateway"), ("VIEW", "staged_loadtest"), ("TABLE", "run_deployment"),
    ("TABLE", "vllm_bench_steps"), ("TABLE", "vllm_bench_files"), ("TABLE", "cfg_loadtest_step"),
    ("TABLE", "cfg_loadtest_run"),
)


@dataclass(frozen=True)
class LoadtestRun:
    """One run.yaml, checked against its contract, the inventory and its folder."""

    folder: Path
    run_id: str
    fmt: str
    model: str
    deployment_id: str
    start: datetime
    warmup_min: int
    key_lines: dict[str, int]
    files: tuple[Path, ...] = ()  # a vllm-bench run's result files, by name (their file_index)

    @property
    def day(self) -> date:
        return self.start.astimezone(UTC).date()


@dataclass(frozen=True)
class RunIngest:
    """What became of a run's request rows: read = accepted + quarantined + duplicates merged."""

    run_id: str
    rows_read: int
    rows_accepted: int
    rows_quarantined: int
    duplicates_merged: int
    quarantine_sample: list[dict[str, Any]]

    def params(self) -> dict[str, int]:
        return {"rows_read": self.rows_read, "rows_accepted": self.rows_accepted,
                "rows_quarantined": self.rows_quarantined, "duplicates_merged": self.duplicates_merged}


def run_folders(layout: HomeLayout) -> list[Path]:
    """The run folders under raw/loadtest/ by name; hidden and `_` entries are skipped, any other file is an error."""
    root = layout.loadtest_dir
    if not root.is_dir():
        return []
    folders = []
    for path in sorted(root.iterdir()):
        if path.name.startswith((".", "_")):
            continue
        if not path.is_dir():
            raise InputFileError(f"{path}: raw/loadtest/ holds one folder per run (raw/loadtest/<run_id>/ with "
                                 f"{RUN_FILE} and its request files). Move the file into its run's folder.")
        folders.append(path)
    return folders


def read_run(con: duckdb.DuckDBPyConnection, folder: Path) -> LoadtestRun:
    """Check run.yaml against its contract into cfg_loadtest_run and cfg_loadtest_step (one row per step).

    A gateway run's steps are run.yaml's `steps`; a vllm-bench run's are its result files (`_vllm_bench_steps`).
    Raises a ConfigError naming the file, the line and the field: a run cannot be measured on wrong steps.
    """
    path = folder / RUN_FILE
    if not path.is_file():
        raise ConfigError(f"{folder}: a load-test run folder needs a {RUN_FILE} (run_id, model, deployment_id, "
                          "start, warmup_min and steps with arrival_rate, start and end, or format: vllm-bench "
                          "beside vllm bench serve result files; docs/configuration.md). Add it, or move the folder "
                          "out of raw/loadtest/, and re-run.")
    doc = _require_mapping(read_yaml(path), path, "the file", 1)
    fmt = _run_format(doc, path)
    contract = load_contract("loadtest_run")
    run_rows = _Rows("loadtest_run", path, [], [])
    run_rows.add(_line(doc, 1), doc, **{k: doc.get(k) for k in RUN_KEYS})
    files: tuple[Path, ...] = ()
    step_lines: list[int] = []
    if fmt == GATEWAY:
        step_rows = _yaml_steps(doc, path)
        _load_rows(con, run_rows, contract.table("loadtest_run"))
        _load_rows(con, step_rows, contract.table("loadtest_step"))
        step_lines = step_rows.lines
    else:
        _load_rows(con, run_rows, contract.table("loadtest_run"))
        files = _vllm_bench_steps(con, folder)

    run_id, model, deployment_id, start, warmup_min = con.execute(
        "SELECT run_id, model, deployment_id, start, warmup_min FROM cfg_loadtest_run").fetchone()
    if run_id != folder.name:
        raise ConfigError(f"{path} line {doc.line_of('run_id')}: run_id: {run_id!r} is not the name of its folder "
                          f"{folder.name!r}. Make them the same and re-run.")
    too_short = con.execute(
        "SELECT s.step_index, epoch(s.step_end - s.step_start) / 60.0 FROM cfg_loadtest_step AS s, "
        "cfg_loadtest_run AS r WHERE epoch(s.step_end - s.step_start) / 60.0 <= r.warmup_min "
        "ORDER BY s.step_index").fetchall()
    if too_short:
        index, minutes = too_short[0]
        if fmt == GATEWAY:
            raise ConfigError(f"{path} line {step_lines[index]}: warmup_min: {warmup_min} minutes leave nothing of "
                              f"step {index} ({minutes:g} minutes) to measure. Shorten warmup_min (line "
                              f"{doc.line_of('warmup_min')}) or lengthen the step, and re-run.")
        file = con.execute("SELECT source_file FROM vllm_bench_steps WHERE step_index = $i", {"i": index}).fetchone()
        raise ConfigError(f"{path} line {doc.line_of('warmup_min')}: warmup_min: {warmup_min} minutes leave nothing "
                          f"of step {index} ({file[0]}, {minutes:g} minutes) to measure. Shorten warmup_min, or run "
                          "that request rate longer (more --num-prompts), and re-run.")
    return LoadtestRun(folder, run_id, fmt, model, deployment_id, start, warmup_min,
                       {k: doc.line_of(k) for k in RUN_KEYS}, files)


def _run_format(doc: _Mapping, path: Path) -> str:
    """The run's format, after checking that run.yaml has exactly the keys that format takes (one line each)."""
    fmt = doc.get("format", GATEWAY)
    if not isinstance(fmt, str) or fmt not in FORMAT_KEYS:
        raise ConfigError(f"{path} line {doc.line_of('format')}: format: {fmt!r} is not a load-test run format: "
                          + " or ".join(f"{f} ({what})" for f, what in FORMAT_FILES.items())
                          + f"; {GATEWAY} when left out. Fix it and re-run.")
    keys = FORMAT_KEYS[fmt]
    if fmt == VLLM_BENCH and "steps" in doc:
        raise ConfigError(f"{path} line {doc.line_of('steps')}: steps: a {VLLM_BENCH} run takes its steps from its "
                          "result files (one per file, at its request_rate, lasting its duration). Remove steps "
                          "and re-run.")
    _check_keys(doc, set(keys) | {"format", *BATCHING_KEYS}, path, f"a {fmt} {RUN_FILE}")
    missing = [k for k in keys if doc.get(k) is None]
    if missing:
        raise ConfigError(f"{path} line {_line(doc, 1)}: {missing[0]}: required but missing; a {fmt} {RUN_FILE} "
                          f"needs {', '.join(keys)} (docs/configuration.md). Add it and re-run.")
    return str(fmt)


def _yaml_steps(doc: _Mapping, path: Path) -> _Rows:
    """A gateway run's `steps`, as loadtest_step rows."""
    steps = _require_list(doc.get("steps"), path, "steps", doc.line_of("steps"))
    if not steps:
        raise ConfigError(f"{path} line {doc.line_of('steps')}: steps: a run needs at least one step.")
    step_rows = _Rows("loadtest_step", path, [], [])
    for index, step in enumerate(steps):
        step = _require_mapping(step, path, f"step {index} of steps", doc.line_of("steps"))
        _check_keys(step, STEP_KEYS, path, "a step")
        # The contract names a step's start and end step_start and step_end (`end` is a SQL keyword).
        aliased = _Mapping(step)
        aliased.line = _line(step)
        aliased.key_lines = {**step.key_lines, "step_start": step.line_of("start"), "step_end": step.line_of("end")}
        step_rows.add(_line(step), aliased, run_id=doc.get("run_id"), step_index=index,
                      arrival_rate=step.get("arrival_rate"), step_start=step.get("start"), step_end=step.get("end"))
    return step_rows


def _vllm_bench_steps(con: duckdb.DuckDBPyConnection, folder: Path) -> tuple[Path, ...]:
    """A vllm-bench run's result files, checked (sql/capacity/vllm_bench_file.sql into vllm_bench_files), and its steps
    (sql/capacity/vllm_bench_steps.sql into vllm_bench_steps and cfg_loadtest_step). Returns the files by name.

    Raises an InputFileError naming the file, the field and the rule when a file cannot be a step."""
    files = tuple(f.path for f in landing_files(folder, {**VLLM_BENCH_FORMATS, RUN_FILE: "yaml"},
                                                "vLLM bench result") if f.fmt == "json")
    if not files:
        raise InputFileError(f"{folder}: the {VLLM_BENCH} run has no result files (*.json written by vllm bench "
                             "serve --save-result --save-detailed, one per request rate). Add them beside run.yaml "
                             "and re-run.")
    query = statement("vllm_bench_file")
    for index, path in enumerate(files):
        params = used_params(query, {"file": literal_path(path), "source_file": str(path), "file_index": index})
        into = "CREATE OR REPLACE TEMP TABLE vllm_bench_files AS " if index == 0 else "INSERT INTO vllm_bench_files "
        try:
            con.execute(into + query, params)
        except duckdb.Error as exc:
            raise read_error(path, "a vllm bench serve result", exc) from None
        problems = con.execute("SELECT problems FROM vllm_bench_files WHERE file_index = $i",
                               {"i": index}).fetchone()[0]
        if problems:
            raise InputFileError(
                f"{path}: cannot be a step of load-test run {folder.name}:\n" + "".join(f"  {p}\n" for p in problems)
                + "Fix or replace the file (vllm bench serve --save-result --save-detailed at one finite "
                f"--request-rate; docs/configuration.md), or move it out of {folder}, and re-run.")
    shared = con.execute("SELECT request_rate, list(source_file ORDER BY file_index) FROM vllm_bench_files "
                         "GROUP BY request_rate HAVING count(*) > 1 ORDER BY request_rate").fetchall()
    if shared:
        rate, paths = shared[0]
        raise InputFileError(f"{paths[0]} and {paths[1]}: request_rate: both are {rate:g} req/s, and the steps of a "
                             "run need distinct arrival rates (lambda_slo_max names one step). Keep one file per "
                             f"rate (move the other out of {folder}) and re-run.")
    con.execute("CREATE OR REPLACE TEMP TABLE vllm_bench_steps AS " + statement("vllm_bench_steps"))
    con.execute("CREATE OR REPLACE TEMP TABLE cfg_loadtest_step AS "
                "SELECT run_id, step_index, arrival_rate, step_start, step_end FROM vllm_bench_steps")
    return files


def _resolve_deployment(con: duckdb.DuckDBPyConnection, layout: HomeLayout, run: LoadtestRun) -> None:
    """Create run_deployment: the inventory version of the run's deployment in force at its start."""
    query = "CREATE OR REPLACE TEMP TABLE run_deployment AS " + statement("loadtest_deployment")
    con.execute(query, used_params(query, {"deployment_id": run.deployment_id, "start": run.start}))
    found = con.execute("SELECT model FROM run_deployment").fetchall()
    path = run.folder / RUN_FILE
    inventory = layout.config / "deployments.yaml"
    if not found:
        raise ConfigError(f"{path} line {run.key_lines['deployment_id']}: deployment_id: {run.deployment_id!r} "
                          f"has no version in force at the run's start {run.start.isoformat()} in {inventory}. "
                          f"Fix deployment_id or start in {RUN_FILE}, or add the deployment to the inventory, "
                          "and re-run.")
    if found[0][0] != run.model:
        raise ConfigError(f"{path} line {run.key_lines['model']}: model: {run.model!r} is not the model of "
                          f"deployment {run.deployment_id!r}, which serves {found[0][0]!r} in {inventory}. "
                          "Fix model or deployment_id and re-run.")


def _ingest_requests(con: duckdb.DuckDBPyConnection, run: LoadtestRun, stage: Path) -> RunIngest:
    """Type, judge and de-duplicate the run's request files; creates the view day_requests (accepted requests)."""
    if run.fmt == VLLM_BENCH:
        staged = _stage_vllm_bench(con, run, stage / "requests")
    else:
        staged = stage_gateway_files(con, _gateway_files(run.folder), stage / "requests")
    con.execute("CREATE OR REPLACE TEMP VIEW staged_loadtest AS SELECT * FROM read_parquet(["
                + ", ".join(sql_path(p) for p in staged) + "])")
    if run.fmt == VLLM_BENCH:
        _check_vllm_bench_completed(con, run)
    checked = stage / "checked.parquet"
    lake.write_query(con, statement("loadtest_checked"), checked)
    con.execute(f"CREATE OR REPLACE TEMP VIEW checked_gateway AS SELECT * FROM read_parquet({sql_path(checked)})")
    con.execute("CREATE OR REPLACE TEMP TABLE gateway_duplicates AS " + statement("gateway_duplicates"))
    accepted_file = stage / "requests.parquet"
    accepted = lake.write_query(con, statement("gateway_requests"), accepted_file, {"day": run.day})
    con.execute(f"CREATE OR REPLACE TEMP VIEW day_requests AS SELECT * FROM read_parquet({sql_path(accepted_file)})")
    rows_read, quarantined = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE reason IS NOT NULL) FROM checked_gateway").fetchone()
    merged = con.execute("SELECT coalesce(sum(merged), 0) FROM gateway_duplicates").fetchone()[0]
    sample = con.execute(
        "SELECT source_file AS file, source_line AS line, reason FROM checked_gateway WHERE reason IS NOT NULL "
        f"ORDER BY file_index, source_line LIMIT {QUARANTINE_SAMPLE}").fetchall()
    return RunIngest(run.run_id, rows_read, accepted, quarantined, int(merged),
                     [{"file": f, "line": ln, "reason": r} for f, ln, r in sample])


def _gateway_files(folder: Path) -> list[LandingFile]:
    """A gateway run's request files (a vllm bench result among them is the sign of a missing `format`)."""
    if any(p.name.endswith(tuple(VLLM_BENCH_FORMATS)) and not p.name.startswith((".", "_"))
           for p in folder.iterdir()):
        raise InputFileError(f"{folder}: holds *.json files, which a {GATEWAY} run does not read. If they are vllm "
                             f"bench serve results, write format: {VLLM_BENCH} in {RUN_FILE} (and no steps); "
                             "otherwise move them out, and re-run.")
    files = [f for f in landing_files(folder, {**GATEWAY_FORMATS, RUN_FILE: "yaml"}, "load-test request")
             if f.fmt != "yaml"]
    if not files:
        raise InputFileError(f"{folder}: the run has no request files ({', '.join(GATEWAY_FORMATS)} in the "
                             "gateway_request contract). Add them beside run.yaml and re-run.")
    return files


def _stage_vllm_bench(con: duckdb.DuckDBPyConnection, run: LoadtestRun, stage_dir: Path) -> list[Path]:
    """Each result file's requests (sql/capacity/vllm_bench_requests.sql), typed and judged by the gateway_request
    contract with reasons naming the vLLM fields, into stage_dir/NNNNNN.parquet (NNNNNN = the file's file_index)."""
    stage_dir.mkdir(parents=True, exist_ok=True)
    passthrough = ["$file_index::INTEGER AS file_index", "$source_file AS source_file", "source_line",
                   "true AS is_record", f"'{VLLM_BENCH}' AS source"]
    query = validation_query(load_contract("gateway_request").table(), statement("vllm_bench_requests"),
                             passthrough, gate="line_problem", kinds=True, labels=VLLM_BENCH_LABELS)
    staged = []
    for index, path in enumerate(run.files):
        target = stage_dir / f"{index:06d}.parquet"
        try:
            lake.write_query(con, query, target,
                             {"file": literal_path(path), "source_file": str(path), "file_index": index})
        except duckdb.Error as exc:
            raise read_error(path, "a vllm bench serve result", exc) from None
        staged.append(target)
    return staged


def _check_vllm_bench_completed(con: duckdb.DuckDBPyConnection, run: LoadtestRun) -> None:
    """Each file's successes by vLLM's rule must be its own `completed`: else the lists are not the run it
    summarised (a backend that does not stream records no TTFT, so its successes look failed)."""
    differ = con.execute(
        "SELECT f.source_file, f.completed, count(*) FILTER (WHERE s.status = 'ok'), count(*) "
        "FROM vllm_bench_files AS f JOIN staged_loadtest AS s USING (file_index) WHERE f.completed IS NOT NULL "
        "GROUP BY ALL HAVING f.completed <> count(*) FILTER (WHERE s.status = 'ok') ORDER BY f.source_file"
    ).fetchall()
    if differ:
        path, completed, ok, requests = differ[0]
        raise InputFileError(
            f"{path}: completed: {completed}, but {ok} of its {requests} requests succeeded by vLLM's own rule "
            "(errors[i] empty and ttfts[i] above 0), so its per-request lists do not describe the run vLLM "
            "summarised. Benchmark a streaming endpoint (the openai, openai-chat or vllm backends), or move the "
            f"file out of {run.folder}, and re-run.")


def _judge_requests(con: duckdb.DuckDBPyConnection, layout: HomeLayout, run: LoadtestRun) -> None:
    """The SLO policy in force on the run's day for its model, and the view requests_judged over day_requests."""
    window = DayWindow(run.day)
    version = slo_version_in_force(con, layout, window)
    con.execute("CREATE OR REPLACE TEMP VIEW day_deployments AS SELECT * FROM run_deployment")
    policy = "CREATE OR REPLACE TEMP TABLE day_slo_policy AS " + statement("slo_policy_day")
    con.execute(policy, used_params(policy, window.params(slo_version=version)))
    con.execute("CREATE OR REPLACE TEMP TABLE day_slo_isl_bucket AS " + statement("slo_isl_bucket_day"))
    if not con.execute("SELECT count(*) FROM day_slo_isl_bucket").fetchone()[0]:
        raise ConfigError(f"{layout.config / 'slo.yaml'}: SLO version {version} gives no isl_buckets to "
                          f"{run.model}, so load-test run {run.run_id} cannot be judged. Add isl_buckets to the "
                          "version's default (docs/configuration.md) and re-run.")
    con.execute("CREATE OR REPLACE TEMP VIEW requests_judged AS " + statement("requests_judged"))


def _empty_steps_table(con: duckdb.DuckDBPyConnection) -> None:
    table = load_contract("core_loadtest_steps").table()
    columns = ", ".join(f"NULL::{c.physical_type} AS {c.name}" for c in table.columns)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STEPS_TABLE} AS SELECT {columns} WHERE false")


@contextmanager
def _scratch_dir(layout: HomeLayout, scratch: Path | None) -> Iterator[Path]:
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
        yield scratch
        return
    layout.scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="loadtest-", dir=layout.scratch) as tmp:
        yield Path(tmp)


def measure_loadtests(con: duckdb.DuckDBPyConnection, layout: HomeLayout, scratch: Path) -> list[RunIngest]:
    """Measure every run under raw/loadtest/ into the temp table loadtest_steps; returns each run's row counts.

    Staged files go to `scratch`; the table holds everything afterwards, so `scratch` may then be removed.
    """
    if not con.execute("SELECT count(*) FROM (SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name "
                       "FROM duckdb_views()) WHERE table_name = 'cfg_slo_policy'").fetchone()[0]:
        load_config(con, layout)
    _empty_steps_table(con)
    ingested = []
    for folder in run_folders(layout):
        run = read_run(con, folder)
        _resolve_deployment(con, layout, run)
        stage = scratch / "loadtest" / run.run_id
        counts = _ingest_requests(con, run, stage)
        _judge_requests(con, layout, run)
        con.execute(f"INSERT INTO {STEPS_TABLE} BY NAME " + statement("loadtest_steps"),
                    used_params(statement("loadtest_steps"), counts.params()))
        run_sql(con, "loadtest_batching")
        ingested.append(counts)
    for kind, name in _RUN_OBJECTS:
        con.execute(f"DROP {kind} IF EXISTS {name}")
    return ingested


def _results(con: duckdb.DuckDBPyConnection, ingested: list[RunIngest]) -> list[dict[str, Any]]:
    cursor = con.execute(f"SELECT * FROM {STEPS_TABLE} ORDER BY run_id, step_index")
    names = [d[0] for d in cursor.description]
    steps_by_run: dict[str, list[dict[str, Any]]] = {}
    for row in cursor.fetchall():
        step = dict(zip(names, row, strict=True))
        steps_by_run.setdefault(step["run_id"], []).append(step)
    results = []
    for counts in ingested:
        steps = steps_by_run[counts.run_id]
        first = steps[0]
        results.append({
            **{k: first[k] for k in ("run_id", "model", "deployment_id", "day", "slo_version", "gpu_type", "gpus",
                                     "lambda_slo_max", "goodput_per_gpu_at_max", "verified",
                                     "first_failing_step_rate")},
            **counts.params(),
            "quarantine_sample": counts.quarantine_sample,
            "steps": steps,
        })
    return results


def loadtest_results(con: duckdb.DuckDBPyConnection, layout: HomeLayout,
                     scratch: Path | None = None) -> list[dict[str, Any]]:
    """One dict per run: run_id, model, deployment_id, day, lambda_slo_max, goodput_per_gpu_at_max, verified,
    first_failing_step_rate, the run's row counts and a sample of its quarantined rows, and `steps` (the run's
    rows of core.loadtest_steps as dicts). Leaves the temp table loadtest_steps in `con`."""
    with _scratch_dir(layout, scratch) as tmp:
        ingested = measure_loadtests(con, layout, tmp)
    return _results(con, ingested)


def write_loadtest_steps(con: duckdb.DuckDBPyConnection, layout: HomeLayout, target: Path,
                         scratch: Path | None = None) -> list[dict[str, Any]]:
    """Write core.loadtest_steps (one row per run and step, every run under raw/loadtest/) to the Parquet file
    `target` atomically; returns loadtest_results' dicts."""
    results = loadtest_results(con, layout, scratch)
    lake.write_query(con, f"SELECT * FROM {STEPS_TABLE} ORDER BY run_id, step_index", target)
    return results

