"""Load-test runs and their lambda_slo_max (spec/inputs.md, Load-test runs; spec/metrics.md, section 5).

A run is a folder `raw/loadtest/<run_id>/` holding `run.yaml` (data_contracts/loadtest_run.odcs.yaml) and request
files in the gateway_request contract. The requests are typed and judged exactly as gateway logs are
(`tokenledger.ingest.stage_gateway_files`), the run's own rules are added (sql/loadtest_checked.sql), duplicates
are merged and the accepted requests assembled by the gateway's own statements, then judged against the SLO
policy in force on the run's day by the production judgement (sql/requests_judged.sql). Every step is measured
on its segment by sql/loadtest_steps.sql into the temp table `loadtest_steps` (data_contracts/
core_loadtest_steps.odcs.yaml), one row per run and step. Decisions: docs/decisions.md, "Capacity math and load
tests".

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

from tokenledger import lake
from tokenledger.accounting import slo_version_in_force
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
from tokenledger.contracts import load_contract
from tokenledger.duck import sql_path, statement, used_params
from tokenledger.errors import ConfigError, InputFileError
from tokenledger.ingest import GATEWAY_FORMATS, DayWindow, stage_gateway_files
from tokenledger.landing import landing_files
from tokenledger.paths import HomeLayout

RUN_FILE = "run.yaml"
RUN_KEYS = {"run_id", "model", "deployment_id", "start", "warmup_min", "steps"}
STEP_KEYS = {"arrival_rate", "start", "end"}
STEPS_TABLE = "loadtest_steps"
QUARANTINE_SAMPLE = 5
# Temp objects one run's measurement creates; the names are those the reused gateway and SLO statements read.
_RUN_OBJECTS = (
    ("VIEW", "requests_judged"), ("TABLE", "day_slo_isl_bucket"), ("TABLE", "day_slo_policy"),
    ("VIEW", "day_deployments"), ("VIEW", "day_requests"), ("TABLE", "gateway_duplicates"),
    ("VIEW", "checked_gateway"), ("VIEW", "staged_loadtest"), ("TABLE", "run_deployment"),
    ("TABLE", "cfg_loadtest_step"), ("TABLE", "cfg_loadtest_run"),
)


@dataclass(frozen=True)
class LoadtestRun:
    """One run.yaml, checked against its contract, the inventory and its folder."""

    folder: Path
    run_id: str
    model: str
    deployment_id: str
    start: datetime
    warmup_min: int
    key_lines: dict[str, int]

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

    Raises a ConfigError naming the file, the line and the field: a run cannot be measured on wrong steps.
    """
    path = folder / RUN_FILE
    if not path.is_file():
        raise ConfigError(f"{folder}: a load-test run folder needs a {RUN_FILE} (run_id, model, deployment_id, "
                          "start, warmup_min and steps with arrival_rate, start and end; docs/decisions.md). "
                          "Add it, or move the folder out of raw/loadtest/, and re-run.")
    doc = _require_mapping(read_yaml(path), path, "the file", 1)
    _check_keys(doc, RUN_KEYS, path, RUN_FILE)
    steps = _require_list(doc.get("steps"), path, "steps", doc.line_of("steps"))
    if not steps:
        raise ConfigError(f"{path} line {doc.line_of('steps')}: steps: a run needs at least one step.")
    contract = load_contract("loadtest_run")
    run_rows = _Rows("loadtest_run", path, [], [])
    run_rows.add(_line(doc, 1), doc, **{k: doc.get(k) for k in RUN_KEYS - {"steps"}})
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
    _load_rows(con, run_rows, contract.table("loadtest_run"))
    _load_rows(con, step_rows, contract.table("loadtest_step"))

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
        raise ConfigError(f"{path} line {step_rows.lines[index]}: warmup_min: {warmup_min} minutes leave nothing "
                          f"of step {index} ({minutes:g} minutes) to measure. Shorten warmup_min (line "
                          f"{doc.line_of('warmup_min')}) or lengthen the step, and re-run.")
    return LoadtestRun(folder, run_id, model, deployment_id, start, warmup_min,
                       {k: doc.line_of(k) for k in RUN_KEYS})


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
    files = [f for f in landing_files(run.folder, {**GATEWAY_FORMATS, RUN_FILE: "yaml"}, "load-test request")
             if f.fmt != "yaml"]
    if not files:
        raise InputFileError(f"{run.folder}: the run has no request files ({', '.join(GATEWAY_FORMATS)} in the "
                             "gateway_request contract). Add them beside run.yaml and re-run.")
    staged = stage_gateway_files(con, files, stage / "requests")
    con.execute("CREATE OR REPLACE TEMP VIEW staged_loadtest AS SELECT * FROM read_parquet(["
                + ", ".join(sql_path(p) for p in staged) + "])")
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
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'cfg_slo_policy'").fetchone()[0]:
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

