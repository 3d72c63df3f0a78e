"""Capacity, load and the capacity plan of one UTC day (docs/metrics.md, sections 5 and 6).

Request-level work runs in the step's DuckDB, in the SQL file named after what it builds; only small aggregates
reach Python: one row per deployment (its demonstrated figure, the load test that speaks for it, its plan inputs)
and 24 hours per model (the load curve). Here they meet the queueing math of tokenledger/capacity/queueing.py and the
rules that choose a capacity figure and write the note that explains it; the results go back to DuckDB as small
temp tables (`capacity_choice`, `load_backlog`, `capacity_plan_figures`) that the table's SQL file joins.
Decisions: docs/adr/README.md, "Capacity" (0065-0078).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import yaml

from tokenledger.accounting.day import judge_requests
from tokenledger.capacity.loadtest import RUN_FILE, loadtest_results, run_folders
from tokenledger.capacity.queueing import (
    Headroom,
    capacity_shortfall,
    goodput_gpus_needed,
    gpus_needed,
    least_slots,
    littles_law_concurrency,
    p_wait_longer_than,
    seed_rule_replicas,
    unit_gpus,
    units_needed,
)
from tokenledger.capacity.work import model_figures
from tokenledger.contracts import load_contract
from tokenledger.errors import ConfigError, LedgerError
from tokenledger.faults import failpoint
from tokenledger.publish.versions import published_days, published_exports
from tokenledger.report.review import PEAK_BASIS, Review, render_html, render_markdown
from tokenledger.storage import atomic, lake
from tokenledger.storage.duck import (
    literal_path,
    memory_limit_bytes,
    register_arrow,
    run_sql,
    sql_path,
    statement,
    used_params,
)
from tokenledger.storage.lake import DayWindow, attach_day, write_table
from tokenledger.storage.layout import HomeLayout

# The rule of thumb's redundancy (seed 000): the share of a replica's measured concurrency it plans for.
RULE_OF_THUMB_REDUNDANCY = 0.8
# How many missed commitments a capacity note names when no window qualified.
NOTE_COMMITMENTS = 3


# --- reading the lake ----------------------------------------------------------------------------------------------

def _rows(con: duckdb.DuckDBPyConnection, query: str, params: Mapping[str, Any] | None = None
          ) -> list[dict[str, Any]]:
    cursor = con.execute(query, used_params(query, params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _temp_table(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    """A small temp table of rows computed in Python, typed by `schema` (so an empty one still has columns)."""
    table = pa.Table.from_pylist(rows, schema=schema)
    register_arrow(con, f"_{name}_arrow", table)
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _{name}_arrow")
    finally:
        con.unregister(f"_{name}_arrow")


# --- core.loadtest_steps -------------------------------------------------------------------------------------------

def build_loadtest_steps(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, scratch: Path,
                         measured: dict[str, Any]) -> dict[str, Any]:
    """Write core.loadtest_steps for the day: the steps of the runs whose start falls on it.

    Every run under raw/loadtest/ is measured once per connection (the first day of a ranged run), and `measured`
    remembers it, so a backfill of a year measures each run once, not 365 times.
    """
    if "runs" not in measured:
        measured["runs"] = loadtest_results(con, layout, scratch)
    target = lake.day_file(layout.lake, "core", "loadtest_steps", window.day)
    rows = lake.write_query(con, statement("loadtest_steps_of_day"), target, window.params())
    runs = sorted({r["run_id"] for r in measured["runs"] if r["day"] == window.day})
    return {"rows": rows, "runs": len(runs), "runs_measured": len(measured["runs"])}


def _run_days(layout: HomeLayout) -> dict[str, date]:
    """run_id -> UTC day of its start, read from each run.yaml (a file that cannot be read is left to the
    core/loadtest_steps asset, which stops on it with the file, line and field)."""
    days = {}
    for folder in run_folders(layout):
        try:
            start = yaml.safe_load((folder / RUN_FILE).read_text(encoding="utf-8")).get("start")
            if isinstance(start, str):
                start = datetime.fromisoformat(start.replace("Z", "+00:00"))
        except (OSError, AttributeError, ValueError, yaml.YAMLError):
            continue
        if isinstance(start, datetime):
            days[folder.name] = _utc_day(start)
        elif isinstance(start, date):
            days[folder.name] = start
    return days


def _utc_day(moment: datetime) -> date:
    """A naive timestamp is UTC (as everywhere in the inputs)."""
    return (moment if moment.tzinfo is None else moment.astimezone(UTC)).date()


def attach_loadtest_history(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> int:
    """View `loadtest_history`: core.loadtest_steps of every day up to and including this one; returns its runs.

    A run under raw/loadtest/ that started on or before the day but is in none of those files (its day was never
    materialized, or the run arrived after it was) stops the day: capacity would silently ignore it.
    """
    root = layout.lake / "core" / "loadtest_steps"
    files = []
    for path in sorted(root.glob(f"day=*/{lake.DATA_FILE}")):
        try:
            day = date.fromisoformat(path.parent.name.removeprefix("day="))
        except ValueError:
            continue
        if day <= window.day:
            files.append(path)
    columns = load_contract("core_loadtest_steps").table().columns
    for path in files:
        written = {r[0] for r in con.execute("SELECT name FROM parquet_schema($file)",
                                              {"file": literal_path(path)}).fetchall()}
        lacking = [c.name for c in columns if c.name not in written]
        if lacking:
            day = path.parent.name.removeprefix("day=")
            raise LedgerError(
                f"{path}: core.loadtest_steps of {day} was written by an earlier tokenledger and has no column "
                f"{lacking[0]}" + (f" (nor {len(lacking) - 1} more)" if len(lacking) > 1 else "")
                + f", which the capacity of {window.day} reads. Re-materialize core/loadtest_steps for {day} (e.g. "
                f"`dagster asset materialize -m tokenledger.pipelines.definitions --select core/loadtest_steps "
                f"--partition {day}`) and re-run {window.day}.")
    if files:
        con.execute("CREATE OR REPLACE TEMP VIEW loadtest_history AS SELECT * FROM read_parquet(["
                    + ", ".join(sql_path(p) for p in files) + "], union_by_name = true)")
    else:
        con.execute("CREATE OR REPLACE TEMP VIEW loadtest_history AS SELECT "
                    + ", ".join(f"NULL::{c.physical_type} AS {c.name}" for c in columns) + " WHERE false")
    present = {r[0] for r in con.execute("SELECT DISTINCT run_id FROM loadtest_history").fetchall()}
    missing = sorted((day, run) for run, day in _run_days(layout).items() if day <= window.day and run not in present)
    if missing:
        day, run = missing[0]
        raise LedgerError(
            f"load-test run {run} ({layout.loadtest_dir / run}) started on {day} but core.loadtest_steps has no rows "
            f"for it ({lake.day_file(layout.lake, 'core', 'loadtest_steps', day)}), so the capacity of {window.day} "
            f"cannot consider it. Materialize core/loadtest_steps for {day} (e.g. `dagster asset materialize -m "
            f"tokenledger.pipelines.definitions --select core/loadtest_steps --partition {day}`) and re-run "
            f"{window.day}."
            + (f" {len(missing) - 1} more run(s) are missing." if len(missing) > 1 else ""))
    return len(present)


# --- core.capacity_windows and infra.capacity_daily ----------------------------------------------------------------

# What one batch of the windows' percentiles may hold (sql/capacity/capacity_window_stats.sql): a share of DuckDB's
# memory limit (a run's steps run one at a time in its process), at 16 bytes a value (a double, and the slack of the
# vector DuckDB collects a group's values in), three percentiles per successful request in a window.
PERCENTILE_MEMORY_SHARE = 0.25
_PERCENTILE_VALUE_BYTES = 16
_WINDOW_PERCENTILES = 3
_NO_LAST_WINDOW = 2**31 - 1


def window_batches(sizes: Sequence[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
    """Contiguous ranges of window_index covering 0 to _NO_LAST_WINDOW, each holding at most `budget` successful
    requests by `sizes` ((window_index, successful requests), ascending), unless one window alone holds more."""
    starts, held = [0], 0
    for index, successes in sizes:
        if held and held + successes > budget:
            starts.append(index)
            held = 0
        held += successes
    return [(start, end - 1) for start, end in zip(starts, [*starts[1:], _NO_LAST_WINDOW + 1], strict=True)]


def capacity_window_stats(con: duckdb.DuckDBPyConnection, window: DayWindow) -> int:
    """Create `capacity_window_stats` for sql/capacity/capacity_windows.sql (after `judge_requests`): every window's
    counts,
    P99s and output (sql/capacity/capacity_window_stats.sql), a batch of windows at a time; returns the number of
    batches.

    DuckDB keeps every value of an exact percentile in memory and cannot spill it, and a request counts in every
    window that holds it (6 by default): the whole day in one statement held 18 values per successful request,
    and the 100M-request day failed at the 4 GB limit. The batches are cut by each window's successful requests
    (sql/capacity/capacity_window_sizes.sql) so that one holds at most PERCENTILE_MEMORY_SHARE of the limit."""
    sizes_sql = statement("capacity_window_sizes")
    sizes = con.execute(sizes_sql, used_params(sizes_sql, window.params())).fetchall()
    budget = max(1, int(memory_limit_bytes(con) * PERCENTILE_MEMORY_SHARE
                        / (_PERCENTILE_VALUE_BYTES * _WINDOW_PERCENTILES)))
    batches = window_batches(sizes, budget)
    stats = statement("capacity_window_stats")
    for number, (first, last) in enumerate(batches):
        text = ("CREATE OR REPLACE TEMP TABLE capacity_window_stats AS " if number == 0
                else "INSERT INTO capacity_window_stats ") + stats
        con.execute(text, used_params(text, window.params(first_window=first, last_window=last)))
    return len(batches)


def build_capacity_windows(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, scratch: Path
                           ) -> dict[str, Any]:
    """Write core.capacity_windows for the day (sql/capacity/capacity_windows.sql).

    The day's requests are judged once, into a scratch file of the columns the windows read
    (sql/capacity/capacity_requests.sql); the windows' sizes, each batch of their percentiles and the table's counts
    read that file (the view capacity_requests) instead of judging the day again each."""
    version = judge_requests(con, layout, window)
    with lake.scratch_view(con, "capacity_requests", statement("capacity_requests"),
                           scratch / "capacity_requests.parquet", window.params()):
        run_sql(con, "capacity_in_window")
        batches = capacity_window_stats(con, window)
        rows = write_table(con, layout, window, "core", "capacity_windows")
    path = lake.day_file(layout.lake, "core", "capacity_windows", window.day)
    qualified = con.execute(f"SELECT count(*) FILTER (WHERE qualifies) FROM read_parquet({sql_path(path)})"
                            ).fetchone()[0]
    return {"rows": rows, "windows_qualified": qualified, "slo_version": version, "percentile_batches": batches}


def _span(start: datetime, end: datetime) -> str:
    """A window as 10:05–10:35 (UTC); a window ending at midnight ends at 24:00."""
    end_text = "24:00" if end.date() > start.date() and end.time() == datetime.min.time() else end.strftime("%H:%M")
    return f"{start.strftime('%H:%M')}–{end_text}"


def _g(x: float) -> str:
    return f"{x:.4g}"


def demonstrated_note(demo: Mapping[str, Any]) -> str:
    """Why the demonstrated figure is what it is: a lower bound, its window, how many windows held."""
    span = _span(demo["best_window_start"], demo["best_window_end"])
    return (f"lower bound: best {demo['stable_window_min']}-min window {span} UTC where every commitment held "
            f"({demo['windows_qualified']} of {demo['windows']} windows held)")


def no_window_reason(demo: Mapping[str, Any]) -> str:
    """Why no production window qualified, naming the commitments missed and the best each reached."""
    minutes = demo["stable_window_min"]
    if not demo["windows_judged"]:
        if not demo["max_window_effective_requests"]:
            return f"no demonstrated capacity: no effective request in any {minutes}-min window of the day"
        need = max(demo["min_requests_per_bucket"], 1)
        return (f"no demonstrated capacity: no {minutes}-min window had {need} effective requests in an ISL bucket "
                f"to judge (at most {demo['max_window_effective_requests']} in a window)")
    if demo["windows_met"]:
        return (f"no demonstrated capacity: the {demo['windows_met']} {minutes}-min window(s) that held every "
                "commitment ran another configuration than the one in force at the end of the day")
    parts = []
    for missed in demo["missed"][:NOTE_COMMITMENTS]:
        if missed["kind"] == "max":
            best = "no value" if missed["best"] is None else f"{missed['best']:.0f} ms"
            parts.append(f"{missed['commitment']} {best} at best (limit {missed['target']:g} ms, missed in "
                         f"{missed['windows_missed']})")
        else:
            best = "no value" if missed["best"] is None else _g(missed["best"])
            parts.append(f"{missed['commitment']} {best} at best (target {missed['target']:g}, missed in "
                         f"{missed['windows_missed']})")
    return (f"no {minutes}-min window held every commitment ({demo['windows_judged']} judged): "
            + "; ".join(parts))


def other_configuration_note(test: Mapping[str, Any]) -> str:
    """Why the most recent load test of another configuration does not speak for this one (seed 002: a model or
    engine upgrade voids the old capacity conclusion), or '' when there is none newer than the chosen run."""
    run = test.get("other_configuration_run_id")
    if run is None:
        return ""
    return (f"load test {run} ({test['other_configuration_run_start']:%Y-%m-%d %H:%M} UTC) measured another "
            f"configuration ({test['other_configuration_differences']}) and is not carried over")


def loadtest_note(test: Mapping[str, Any]) -> str:
    """What the deployment's load test says, or that there is none of its configuration and why an existing one
    does not count."""
    run = test["loadtest_run_id"]
    if run is None:
        others = test["runs_other_configuration"]
        why = other_configuration_note(test)
        if why:
            return f"no load test of this configuration: {why}"
        return ("no load test of this configuration"
                + (f" ({others} run(s) measured another configuration)" if others else ""))
    lam, minutes = test["lambda_slo_max"], test["lambda_step_minutes"]
    if lam is None:
        return (f"load test {run}: its lowest step ({test['first_failing_step_rate']:g} req/s) did not hold every "
                "commitment")
    if test["loadtest_verified"]:
        return (f"load test {run} verified at {lam:g} req/s ({_g(test['goodput_per_gpu_at_max'])} tok/s per GPU, "
                f"held {minutes:g} min without degradation)")
    needed = test["loadtest_stable_window_min"]
    if minutes < needed:
        why = f"its step was measured for {minutes:g} min, under the {needed} stable minutes needed"
    else:
        why = (f"only {test['lambda_step_windows_met']} of its {test['lambda_step_windows']} {needed}-min windows "
               "held every commitment")
    return f"load test {run} held {lam:g} req/s but is not verified: {why}"


def choose_capacity(demo: Mapping[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """The capacity goodput per GPU of a deployment on a day, its source, verification and note.

    A verified load test; else the day's demonstrated figure (a lower bound, never verified); else an unverified
    load test as a reference figure (flagged); else none, with the reason. Only a run of the same configuration
    identity counts (sql/capacity/capacity_loadtest_choice.sql); a newer run of another identity is named with what
    differs. A verified run also gives the concurrency one replica held within SLO (loadtest_slots_per_replica).
    """
    demonstrated = demo["demonstrated_goodput_per_gpu"]
    has_run_figure = test["loadtest_run_id"] is not None and test["lambda_slo_max"] is not None
    choice = {"deployment_id": demo["deployment_id"], "demonstrated_goodput_per_gpu": demonstrated,
              "capacity_goodput_per_gpu": None, "capacity_source": None, "capacity_verified": False,
              "lambda_slo_max": None, "loadtest_run_id": None, "loadtest_slots_per_replica": None,
              "other_configuration_run_id": test.get("other_configuration_run_id"),
              "other_configuration_differences": test.get("other_configuration_differences")}
    from_test = {"capacity_goodput_per_gpu": test["goodput_per_gpu_at_max"], "capacity_source": "loadtest",
                 "lambda_slo_max": test["lambda_slo_max"], "loadtest_run_id": test["loadtest_run_id"]}
    if has_run_figure and test["loadtest_verified"]:
        note = loadtest_note(test)
        if demonstrated is not None:
            note += f"; production lower bound {_g(demonstrated)} tok/s per GPU"
        if other_configuration_note(test):
            note += f"; {other_configuration_note(test)}"
        return {**choice, **from_test, "capacity_verified": True, "capacity_note": note,
                "loadtest_slots_per_replica": test.get("slots_at_lambda_slo_max")}
    if demonstrated is not None:
        note = f"{demonstrated_note(demo)}; {loadtest_note(test)}"
        return {**choice, "capacity_goodput_per_gpu": demonstrated, "capacity_source": "demonstrated",
                "capacity_note": note}
    if has_run_figure:
        return {**choice, **from_test,
                "capacity_note": f"reference figure, not verified: {loadtest_note(test)}; {no_window_reason(demo)}"}
    return {**choice, "capacity_note": f"{no_window_reason(demo)}; {loadtest_note(test)}"}


_CHOICE_SCHEMA = pa.schema([
    ("deployment_id", pa.string()), ("capacity_goodput_per_gpu", pa.float64()), ("capacity_source", pa.string()),
    ("capacity_verified", pa.bool_()), ("lambda_slo_max", pa.float64()), ("loadtest_run_id", pa.string()),
    ("capacity_note", pa.string()), ("demonstrated_goodput_per_gpu", pa.float64()),
    ("loadtest_slots_per_replica", pa.float64()), ("other_configuration_run_id", pa.string()),
    ("other_configuration_differences", pa.string()),
])


def build_capacity_daily(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.capacity_daily for the day: throughput columns, the capacity chosen per deployment, and the
    figures that follow from it (sql/capacity/capacity_daily.sql)."""
    version = judge_requests(con, layout, window)
    attach_day(con, layout, window, "day_usage", "core", "usage_hourly")
    attach_day(con, layout, window, "day_capacity_windows", "core", "capacity_windows")
    attach_day(con, layout, window, "day_cost_per_mtok", "finance", "cost_per_mtok_daily")
    runs = attach_loadtest_history(con, layout, window)
    demonstrated = {r["deployment_id"]: r for r in _rows(con, statement("capacity_demonstrated"))}
    tested = {r["deployment_id"]: r for r in _rows(con, statement("capacity_loadtest_choice"), window.params())}
    choices = [choose_capacity(demonstrated[dep], tested[dep]) for dep in sorted(tested)]
    _temp_table(con, "capacity_choice", choices, _CHOICE_SCHEMA)
    rows = write_table(con, layout, window, "infra", "capacity_daily", slo_version=version)
    sources = [c["capacity_source"] or "none" for c in choices]
    return {"rows": rows, "slo_version": version, "loadtest_runs_considered": runs,
            **{f"capacity_{s}": sources.count(s) for s in sorted(set(sources))}}


# --- infra.load_hourly ---------------------------------------------------------------------------------------------

def backlog_rows(model: str, demand: Sequence[float], capacity_per_hour: float | None,
                 carried_in: float = 0.0) -> list[dict[str, Any]]:
    """One row per hour: over_capacity (demand above capacity; equal is not over), the fluid backlog at the start
    and at the end of the hour (queueing.fluid_backlog), starting from the backlog `carried_in` at midnight (the
    previous day's last); NULL without a capacity figure."""
    if capacity_per_hour is None:
        return [{"model": model, "hour": h, "over_capacity": None, "backlog_start_tokens": None,
                 "backlog_tokens": None} for h in range(len(demand))]
    shortfall = capacity_shortfall(demand, capacity_per_hour, carried_in)
    starts = [carried_in, *shortfall.backlog[:-1]]
    return [{"model": model, "hour": h, "over_capacity": d > capacity_per_hour, "backlog_start_tokens": s,
             "backlog_tokens": b}
            for h, (d, s, b) in enumerate(zip(demand, starts, shortfall.backlog, strict=True))]


_BACKLOG_SCHEMA = pa.schema([("model", pa.string()), ("hour", pa.int32()), ("over_capacity", pa.bool_()),
                             ("backlog_start_tokens", pa.float64()), ("backlog_tokens", pa.float64()),
                             ("backlog_carried_from_day", pa.date32())])


def carried_backlog(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, float]:
    """model -> the fluid backlog at the end of the previous day's hour 23 (lake/infra/load_hourly of day - 1).

    Demand left unserved at midnight is still unserved after it (seed 000's backlog is a queue, not a daily
    quota), so the next day starts from it. A model the previous day has no file or no capacity figure for starts
    from 0. Days of a ranged run are processed in order, so the previous day's file is the one just written.
    """
    path = lake.day_file(layout.lake, "infra", "load_hourly", window.day - timedelta(days=1))
    if not path.is_file():
        return {}
    return {r["model"]: r["backlog_tokens"] for r in _rows(
        con, f"SELECT model, backlog_tokens FROM read_parquet({sql_path(path)}) "
             "WHERE hour = 23 AND backlog_tokens IS NOT NULL")}


def build_load_hourly(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.load_hourly for the day: the load curve (sql/capacity/load_hourly_demand.sql), the backlog carried
    over its 24 hours per model here, then sql/capacity/load_hourly.sql."""
    judge_requests(con, layout, window)  # day_requests, day_deployments and the policy's peak_basis
    attach_day(con, layout, window, "day_usage", "core", "usage_hourly")
    attach_day(con, layout, window, "day_capacity", "infra", "capacity_daily")
    text = "CREATE OR REPLACE TEMP TABLE load_hourly_demand AS " + statement("load_hourly_demand")
    con.execute(text, used_params(text, window.params()))
    hours: dict[str, list[dict[str, Any]]] = {}
    for row in _rows(con, "SELECT model, hour, output_tokens, daily_capacity_tokens FROM load_hourly_demand "
                          "ORDER BY model, hour"):
        hours.setdefault(row["model"], []).append(row)
    carried = carried_backlog(con, layout, window)
    previous_day = window.day - timedelta(days=1)
    backlog = []
    for model, curve in hours.items():
        daily = curve[0]["daily_capacity_tokens"]
        start = (carried.get(model) or 0.0) if daily is not None else 0.0
        rows_of_model = backlog_rows(model, [h["output_tokens"] for h in curve],
                                     None if daily is None else daily / 24.0, start)
        # Named only when something was carried: a day whose previous night drained (the usual case) is then the
        # same whether the previous day ran before it or not, so days run alone or in parallel stay identical.
        backlog += [{**r, "backlog_carried_from_day": previous_day if start > 0 else None} for r in rows_of_model]
    _temp_table(con, "load_backlog", backlog, _BACKLOG_SCHEMA)
    rows = write_table(con, layout, window, "infra", "load_hourly")
    over = sum(1 for b in backlog if b["over_capacity"])
    return {"rows": rows, "hours_over_capacity": over, "previous_day_found": bool(carried) or lake.day_file(
                layout.lake, "infra", "load_hourly", previous_day).is_file(),
            "backlog_carried_in": sum(v for m, v in carried.items() if m in hours)}


# --- infra.capacity_model_daily ------------------------------------------------------------------------------------

def attach_loadtest_gpu_samples(con: duckdb.DuckDBPyConnection, layout: HomeLayout) -> int:
    """View `loadtest_gpu_samples`: core.gpu_samples of every day a measurement segment of the load tests in
    `capacity_model_test` touches (a run may be days older than the day); returns the days found."""
    days = sorted({d for row in _rows(
        con, "SELECT DISTINCT timezone('UTC', s.segment_start)::DATE AS a, timezone('UTC', s.segment_end)::DATE AS b "
             "FROM loadtest_history AS s JOIN capacity_model_test AS t ON t.loadtest_run_id = s.run_id")
        for d in (row["a"], row["b"])})
    files = [p for d in days if (p := lake.day_file(layout.lake, "core", "gpu_samples", d)).is_file()]
    if files:
        con.execute("CREATE OR REPLACE TEMP VIEW loadtest_gpu_samples AS SELECT * FROM read_parquet(["
                    + ", ".join(sql_path(p) for p in files) + "], union_by_name = true, hive_partitioning = false)")
    else:
        columns = load_contract("core_gpu_samples").table().columns
        con.execute("CREATE OR REPLACE TEMP VIEW loadtest_gpu_samples AS SELECT "
                    + ", ".join(f"NULL::{c.physical_type} AS {c.name}" for c in columns) + " WHERE false")
    return len(files)


_MODEL_SCHEMA = pa.schema([
    ("deployment_id", pa.string()), ("c_prefill", pa.float64()), ("c_decode", pa.float64()),
    ("coefficients_source", pa.string()), ("coefficients_run_id", pa.string()), ("fit_points", pa.int64()),
    ("fit_r2", pa.float64()), ("fit_note", pa.string()), ("loadtest_stale", pa.bool_()),
    ("loadtest_representative", pa.bool_()), ("representativeness_rule", pa.string()),
    ("work_per_output_token_production", pa.float64()), ("work_per_output_token_capacity", pa.float64()),
    ("sustainable_work_per_gpu", pa.float64()), ("peak_work_rate", pa.float64()),
    ("capacity_goodput_per_gpu_rescaled", pa.float64()), ("model_note", pa.string()),
])


def build_capacity_model(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.capacity_model_daily for the day: the load test that speaks for each deployment
    (sql/capacity/capacity_loadtest_choice.sql), the planning peak (sql/capacity/capacity_plan_inputs.sql), the
    mixes (sql/capacity/capacity_model_inputs.sql) and the points of the fit (sql/capacity/work_model_*_points.sql),
    the work model of each deployment here (tokenledger/capacity/work.py), then sql/capacity/capacity_model_daily.sql.
    """
    judge_requests(con, layout, window)
    attach_day(con, layout, window, "day_usage", "core", "usage_hourly")
    attach_day(con, layout, window, "day_gpu_usage_hourly", "infra", "gpu_usage_hourly")
    attach_day(con, layout, window, "day_load_hourly", "infra", "load_hourly")
    attach_day(con, layout, window, "day_capacity", "infra", "capacity_daily")
    attach_loadtest_history(con, layout, window)
    for name, sql in (("capacity_model_test", "capacity_loadtest_choice"),
                      ("capacity_model_peak", "capacity_plan_inputs"),
                      ("capacity_model_inputs", "capacity_model_inputs")):
        text = f"CREATE OR REPLACE TEMP TABLE {name} AS " + statement(sql)
        con.execute(text, used_params(text, window.params()))
    telemetry_days = attach_loadtest_gpu_samples(con, layout)
    points: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    for kind in ("loadtest", "production"):
        for row in _rows(con, statement(f"work_model_{kind}_points")):
            points.setdefault(row["deployment_id"], {}).setdefault(kind, []).append(
                (row["recomputed_input_token_rate"], row["output_token_rate"], row["busy_gpus"]))
    figures = [model_figures(row, points.get(row["deployment_id"], {}).get("loadtest", []),
                             points.get(row["deployment_id"], {}).get("production", []))
               for row in _rows(con, "SELECT * FROM capacity_model_inputs ORDER BY deployment_id")]
    _temp_table(con, "capacity_model_figures", figures, _MODEL_SCHEMA)
    rows = write_table(con, layout, window, "infra", "capacity_model_daily")
    sources = [f["coefficients_source"] or "none" for f in figures]
    return {"rows": rows, "loadtest_telemetry_days": telemetry_days,
            **{f"coefficients_{s}": sources.count(s) for s in sorted(set(sources))}}


# --- infra.capacity_plan_daily -------------------------------------------------------------------------------------

def planning_slots(inputs: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """The concurrent requests one replica holds within SLO and where that figure comes from: the inventory's
    slots_per_replica, else the concurrency a verified load test measured at lambda_slo_max (Little's law on that
    step, per replica under test), else none."""
    if inputs.get("slots_per_replica") is not None:
        return float(inputs["slots_per_replica"]), "inventory"
    measured = inputs.get("loadtest_slots_per_replica")
    if measured is not None and measured > 0:
        return float(measured), "loadtest"
    return None, None


def _headroom(inputs: Mapping[str, Any]) -> Headroom:
    return Headroom(inputs["headroom_n_minus_k"], inputs["headroom_scaling_lag_pct"],
                    inputs["headroom_forecast_error_pct"], inputs["headroom_release_pct"],
                    inputs["headroom_jitter_pct"], gpus_per_failure_domain=_unit_gpus(inputs, _failure_domain(inputs)))


# --- failure domains and the unit bought (docs/metrics.md, section 6, "Failure domains") ---------------------------

def _failure_domain(inputs: Mapping[str, Any]) -> str:
    return inputs.get("headroom_failure_domain") or "replica"


def _unit_gpus(inputs: Mapping[str, Any], unit: str) -> int | None:
    return unit_gpus(unit, inputs["gpus_per_replica"], inputs.get("gpus_per_node"), inputs.get("nodes_per_rack"))


def unsized_failure_domain(inputs: Mapping[str, Any], deployments_file: Path | str) -> str | None:
    """The one-line error when the policy's failure domain (or the unit bought) names a node or a rack and the
    inventory does not say its GPUs (gpus_per_node; nodes_per_rack for a rack): its size is never guessed. None when
    both can be sized."""
    for what, unit in (("the SLO policy's headroom failure_domain", _failure_domain(inputs)),
                       ("its bought_in", inputs.get("bought_in") or "gpu")):
        if _unit_gpus(inputs, unit) is not None:
            continue
        field = "gpus_per_node" if inputs.get("gpus_per_node") is None else "nodes_per_rack"
        return (f"{deployments_file} line {inputs.get('config_line')}: deployment {inputs['deployment_id']} has no "
                f"{field}, so a {unit} ({what}, SLO version {inputs.get('slo_version')}) has no size in GPUs. Give "
                f"{field} to the deployment, or name a domain it can size (failure_domain replica in slo.yaml), and "
                "re-run the day.")
    return None


SECONDS_PER_DAY = 86_400


def failure_and_units(inputs: Mapping[str, Any], gpus: float | None) -> dict[str, Any]:
    """The failure domain the policy's N-k counts, its GPUs and the replicas its failures take down
    (Headroom.failure_replicas); the unit bought, its GPUs, the whole units that hold `gpus` (GPUs needed) and the
    day's capacity per unit (capacity goodput per GPU x 86,400 s x GPUs per unit)."""
    headroom, bought = _headroom(inputs), inputs.get("bought_in") or "gpu"
    per_unit, per_gpu = _unit_gpus(inputs, bought), inputs.get("capacity_goodput_per_gpu")
    return {"headroom_failure_domain": _failure_domain(inputs),
            "gpus_per_failure_domain": headroom.gpus_per_failure_domain,
            "headroom_failure_replicas": (None if headroom.gpus_per_failure_domain is None
                                          else headroom.failure_replicas(inputs["gpus_per_replica"])),
            "bought_in": bought, "gpus_per_unit": per_unit,
            "units_needed": None if gpus is None or per_unit is None else units_needed(gpus, per_unit),
            "daily_capacity_tokens_per_unit": (None if per_gpu is None or per_unit is None
                                               else per_gpu * SECONDS_PER_DAY * per_unit)}


def goodput_sizing(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 002's sizing beside the Erlang C plan: GPUs needed ~ the planning peak's output token rate / the
    capacity goodput per GPU x the policy's headroom (queueing.goodput_gpus_needed); NULL without a capacity figure.
    The Lag (the inventory's scale-out plus warm-up minutes) in GPUs: how much the output token rate grew over that
    many minutes before the planning peak, at the capacity goodput per GPU.

    Where infra.capacity_model_daily has the work model (peak_work_rate and sustainable_work_per_gpu), the base is
    the peak's work rate / the work one GPU sustains at the capacity point, so the mix counts
    (goodput_sizing_basis 'work_model'); otherwise the output tokens alone ('output_only')."""
    per_gpu = inputs.get("capacity_goodput_per_gpu")
    out: dict[str, Any] = {"goodput_sizing_base_gpus": None, "gpus_needed_goodput": None,
                           "replicas_needed_goodput": None, "lag_growth_token_rate": None, "lag_gpus": None,
                           "goodput_sizing_basis": None, "peak_work_rate": inputs.get("peak_work_rate"),
                           "sustainable_work_per_gpu": inputs.get("sustainable_work_per_gpu")}
    lag = inputs.get("lag_minutes")
    if lag is not None and inputs.get("lag_start_output_token_rate") is not None:
        out["lag_growth_token_rate"] = max(0.0, inputs["peak_output_token_rate"]
                                           - inputs["lag_start_output_token_rate"])
    if not per_gpu or per_gpu <= 0:
        return out
    work, sustainable = inputs.get("peak_work_rate"), inputs.get("sustainable_work_per_gpu")
    if work is not None and sustainable:
        need = goodput_gpus_needed(work, sustainable, inputs["gpus_per_replica"], _headroom(inputs))
        out["goodput_sizing_basis"] = "work_model"
    else:
        need = goodput_gpus_needed(inputs["peak_output_token_rate"], per_gpu, inputs["gpus_per_replica"],
                                   _headroom(inputs))
        out["goodput_sizing_basis"] = "output_only"
    out.update(goodput_sizing_base_gpus=need.base_gpus, gpus_needed_goodput=need.gpus_needed,
               replicas_needed_goodput=need.replicas_needed)
    if out["lag_growth_token_rate"] is not None:
        out["lag_gpus"] = out["lag_growth_token_rate"] / per_gpu
    return out


def plan_figures(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The plan of one deployment from its row of sql/capacity/capacity_plan_inputs.sql, with
    tokenledger/capacity/queueing.py.

    Erlang C needs a mean service time: a deployment with arrivals but no successful request has no slot count,
    no replicas and no GPUs needed (the note says so); one without arrivals needs 0 slots and keeps only the
    failure headroom. Replicas need the slots one replica holds (planning_slots): without them the slots are
    computed but not turned into replicas. Seed 002's sizing is computed beside it (goodput_sizing). Each sizing's
    figures carry its name (gpus_needed_erlang_c, gpus_needed_goodput); gpus_needed is the larger of the two, the one
    figure the plan, the verdict and the review use, since the fleet must hold both the peak's concurrency and its
    tokens (binding_sizing says which).
    """
    rate = inputs["peak_arrival_rate"]
    mean_s, p99_s = inputs["mean_service_time_s"], inputs["p99_service_time_s"]
    wait_s = inputs["queue_p99_ms"] / 1000.0
    target = 1.0 - inputs["attainment_target"]
    gpus_per_replica = inputs["gpus_per_replica"]
    slots_per_replica, slots_source = planning_slots(inputs)
    headroom = _headroom(inputs)
    out: dict[str, Any] = {"deployment_id": inputs["deployment_id"],
                           "rule_of_thumb_redundancy": RULE_OF_THUMB_REDUNDANCY,
                           "slots_per_replica_used": slots_per_replica, "slots_per_replica_source": slots_source}
    timed = bool(mean_s) and mean_s > 0
    if rate == 0:
        slots, load, p_wait = 0, 0.0, None
        out["littles_law_concurrency"] = 0.0
        note = (f"no request in the day: 0 slots; only the failure headroom ({headroom.n_minus_k} "
                f"{_failure_domain(inputs)}(s))")
    elif not timed:
        slots = load = p_wait = None
        out["littles_law_concurrency"] = None
        note = ("no successful request to measure the service time: the Erlang C plan (slots, replicas and its GPUs) "
                "cannot be made")
    else:
        load = rate * mean_s
        slots = least_slots(rate, mean_s, wait_s, target)
        p_wait = p_wait_longer_than(slots, load, wait_s, mean_s)
        out["littles_law_concurrency"] = littles_law_concurrency(rate, mean_s)
        note = (f"{inputs['peak_requests']} requests in the {PEAK_BASIS[inputs['peak_basis']]} "
                f"({_span(inputs['peak_window_start'], inputs['peak_window_end'])} UTC) at {mean_s:.3g} s each: "
                f"{load:.3g} Erlangs; {slots} slots give P(wait > {inputs['queue_p99_ms']:g} ms) = {p_wait:.3g} "
                f"<= {target:.3g}")
    if slots_source == "loadtest":
        note += (f"; {slots_per_replica:.3g} slots per replica measured by Little's law at the verified load test's "
                 "lambda_slo_max (the inventory has no slots_per_replica)")
    elif slots_source is None:
        note += ("; no slots_per_replica in the inventory and no verified load test to measure it: replicas by "
                 "Erlang C cannot be planned")
    out.update(offered_load=load, erlang_c_slots=slots, p_wait_over_limit=p_wait)
    if slots_per_replica is None or (rate > 0 and p99_s is None):
        out["rule_of_thumb_required_concurrency"] = out["replicas_needed_seed_rule"] = None
    else:
        required, replicas = seed_rule_replicas(rate, p99_s or 0.0, wait_s, slots_per_replica,
                                                RULE_OF_THUMB_REDUNDANCY)
        out["rule_of_thumb_required_concurrency"], out["replicas_needed_seed_rule"] = required, replicas
    if slots is None or slots_per_replica is None:
        out.update(replicas_needed_erlang=None, headroom_pct_total=None, base_gpus=None, gpus_needed_erlang_c=None,
                   replicas_needed_erlang_c=None, headroom_failure_gpus=None,
                   **{f"headroom_{k}_gpus": None for k in headroom.percentages()})
    else:
        replicas = math.ceil(round(slots / slots_per_replica, 9))
        need = gpus_needed(replicas, gpus_per_replica, headroom)
        out.update(replicas_needed_erlang=replicas, headroom_pct_total=need.pct_factor - 1.0,
                   base_gpus=need.base_gpus, gpus_needed_erlang_c=need.gpus_needed,
                   replicas_needed_erlang_c=need.replicas_needed,
                   headroom_failure_gpus=need.failure_gpus,
                   **{f"headroom_{k}_gpus": v for k, v in need.pct_gpus.items()})
    sizing = goodput_sizing(inputs)
    out.update(sizing)
    erlang_c, goodput = out["gpus_needed_erlang_c"], sizing["gpus_needed_goodput"]
    both = [g for g in (erlang_c, goodput) if g is not None]
    out["gpus_needed"] = max(both) if both else None
    out["binding_sizing"] = (None if not both else "goodput" if erlang_c is None
                             or (goodput or 0) > erlang_c else "erlang_c")
    out["gpus_needed_difference"] = (None if len(both) < 2 else goodput - erlang_c)
    if sizing["goodput_sizing_basis"] == "work_model":
        note += (f"; goodput sizing by the work model: {inputs['peak_work_rate']:.4g} GPU-s/s of work at the peak "
                 f"({inputs['peak_output_token_rate']:.4g} output and {inputs['peak_recomputed_input_token_rate']:.4g}"
                 f" recomputed input tok/s) / {inputs['sustainable_work_per_gpu']:.4g} sustainable per GPU = "
                 f"{sizing['goodput_sizing_base_gpus']:.3g} GPUs before headroom, {sizing['gpus_needed_goodput']:.3g}"
                 " with it")
    elif sizing["gpus_needed_goodput"] is not None:
        note += (f"; goodput sizing: {inputs['peak_output_token_rate']:.4g} output tok/s at the peak / "
                 f"{inputs['capacity_goodput_per_gpu']:.4g} tok/s per GPU = {sizing['goodput_sizing_base_gpus']:.3g}"
                 f" GPUs before headroom, {sizing['gpus_needed_goodput']:.3g} with it")
    else:
        note += "; the goodput sizing needs a capacity goodput per GPU, and the day has none"
    out.update(failure_and_units(inputs, out["gpus_needed"]))
    out["plan_note"] = note
    return out


_PLAN_SCHEMA = pa.schema([
    ("deployment_id", pa.string()), ("littles_law_concurrency", pa.float64()), ("offered_load", pa.float64()),
    ("erlang_c_slots", pa.int64()), ("p_wait_over_limit", pa.float64()), ("replicas_needed_erlang", pa.int64()),
    ("rule_of_thumb_required_concurrency", pa.float64()), ("replicas_needed_seed_rule", pa.int64()),
    ("rule_of_thumb_redundancy", pa.float64()), ("headroom_pct_total", pa.float64()), ("base_gpus", pa.float64()),
    ("headroom_scaling_lag_gpus", pa.float64()), ("headroom_forecast_error_gpus", pa.float64()),
    ("headroom_release_gpus", pa.float64()), ("headroom_jitter_gpus", pa.float64()),
    ("headroom_failure_gpus", pa.float64()), ("gpus_needed_erlang_c", pa.float64()),
    ("replicas_needed_erlang_c", pa.int64()),
    ("plan_note", pa.string()), ("slots_per_replica_used", pa.float64()), ("slots_per_replica_source", pa.string()),
    ("goodput_sizing_base_gpus", pa.float64()), ("gpus_needed_goodput", pa.float64()),
    ("replicas_needed_goodput", pa.int64()), ("gpus_needed_difference", pa.float64()),
    ("gpus_needed", pa.float64()), ("binding_sizing", pa.string()), ("lag_growth_token_rate", pa.float64()),
    ("lag_gpus", pa.float64()), ("goodput_sizing_basis", pa.string()), ("peak_work_rate", pa.float64()),
    ("sustainable_work_per_gpu", pa.float64()),
    ("headroom_failure_domain", pa.string()), ("gpus_per_failure_domain", pa.int64()),
    ("headroom_failure_replicas", pa.int64()), ("bought_in", pa.string()), ("gpus_per_unit", pa.int64()),
    ("units_needed", pa.int64()), ("daily_capacity_tokens_per_unit", pa.float64()),
])


def build_capacity_plan(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.capacity_plan_daily for the day: sql/capacity/capacity_plan_inputs.sql, the plan of each deployment
    here (plan_figures), then sql/capacity/capacity_plan_daily.sql."""
    judge_requests(con, layout, window)
    attach_day(con, layout, window, "day_load_hourly", "infra", "load_hourly")
    attach_day(con, layout, window, "day_capacity", "infra", "capacity_daily")
    attach_day(con, layout, window, "day_capacity_model", "infra", "capacity_model_daily")
    text = "CREATE OR REPLACE TEMP TABLE capacity_plan_inputs AS " + statement("capacity_plan_inputs")
    con.execute(text, used_params(text, window.params()))
    work = {r["deployment_id"]: r for r in _rows(con, "SELECT deployment_id, peak_work_rate, sustainable_work_per_gpu "
                                                      "FROM day_capacity_model")}
    inputs = [{**row, **work.get(row["deployment_id"], {})}
              for row in _rows(con, "SELECT * FROM capacity_plan_inputs ORDER BY deployment_id")]
    for row in inputs:
        if (unsized := unsized_failure_domain(row, layout.config / "deployments.yaml")) is not None:
            raise ConfigError(unsized)
    figures = [plan_figures(row) for row in inputs]
    _temp_table(con, "capacity_plan_figures", figures, _PLAN_SCHEMA)
    rows = write_table(con, layout, window, "infra", "capacity_plan_daily")
    return {"rows": rows, "gpus_needed": sum(f["gpus_needed"] or 0 for f in figures)}


# --- infra.capacity_verdict_daily ----------------------------------------------------------------------------------

def build_capacity_verdict(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.capacity_verdict_daily for the day (sql/capacity/capacity_verdict_daily.sql): the verdict of each
    deployment from the day's finished tables, and the SLO policy for the limits and bucket order they were judged by.
    Returns the count of each verdict."""
    judge_requests(con, layout, window)  # day_slo_policy, day_slo_isl_bucket, day_deployments
    attach_day(con, layout, window, "day_capacity_plan", "infra", "capacity_plan_daily")
    attach_day(con, layout, window, "day_capacity", "infra", "capacity_daily")
    attach_day(con, layout, window, "day_slo_daily", "infra", "slo_daily")
    attach_day(con, layout, window, "day_cost_per_mtok", "finance", "cost_per_mtok_daily")
    rows = write_table(con, layout, window, "infra", "capacity_verdict_daily")
    path = lake.day_file(layout.lake, "infra", "capacity_verdict_daily", window.day)
    counts = dict(con.execute("SELECT verdict, count(*) FROM read_parquet($file) GROUP BY verdict",
                              {"file": literal_path(path)}).fetchall())
    return {"rows": rows, **{f"verdict_{v}": counts.get(v, 0) for v in ("ok", "policy", "short", "slo_missed")}}



# --- the capacity review report ------------------------------------------------------------------------------------

def _day_rows(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, schema: str, table: str
              ) -> list[dict[str, Any]]:
    """The day's rows of a published table as this run computed them: the lake file that publication stages as it
    is (the review is written before the day is published, and published with it)."""
    path = lake.day_file(layout.lake, schema, table, window.day)
    if not path.is_file():
        raise LedgerError(f"{schema}.{table} has no file for {window.day} ({path}): the review is written from the "
                          "day's finished tables. Run the whole day (tokenledger run) first.")
    return _rows(con, "SELECT * FROM read_parquet($file, hive_partitioning = false)", {"file": literal_path(path)})


def _history(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, schema: str, table: str,
             columns: str, run_days: frozenset[date]) -> list[dict[str, Any]]:
    """`columns` of a published table on every day up to this one (the review's trends): this run's days as it
    computed them (they are published together with the review), every other day as published."""
    published, computed = [], []
    for path in sorted((published_exports(layout) / schema / table).glob(f"day=*/{lake.DATA_FILE}")):
        try:
            day = date.fromisoformat(path.parent.name.removeprefix("day="))
        except ValueError:
            continue
        if day < window.day and day not in run_days:  # the day itself: as this run computed it
            published.append(literal_path(path))
    for day in sorted(d for d in run_days | {window.day} if d <= window.day):
        if (path := lake.day_file(layout.lake, schema, table, day)).is_file():
            computed.append(literal_path(path))
    parts = ([f"SELECT {columns} FROM ({published_days('$published')})"] if published else []) + (
        [f"SELECT {columns} FROM read_parquet($computed, union_by_name = true, hive_partitioning = false)"]
        if computed else [])
    if not parts:
        return []
    params = {k: v for k, v in (("published", published), ("computed", computed)) if v}
    return _rows(con, " UNION ALL BY NAME ".join(parts) + " ORDER BY ALL", params)


def review_of_day(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                  run_id: str | None = None, run_days: frozenset[date] = frozenset()) -> Review:
    """The day's tables as they will be published (and the cost and peak history up to the day) and the SLO policy
    they were judged by; `run_id` is the run writing the review and publishing the day, `run_days` its days."""
    judge_requests(con, layout, window)
    policy = {r["model"]: {**r, "isl_buckets": []} for r in _rows(con, "SELECT * FROM day_slo_policy")}
    for bucket in _rows(con, "SELECT model, isl_bucket, ttft_limit_ms FROM day_slo_isl_bucket "
                             "ORDER BY model, bucket_order"):
        policy[bucket["model"]]["isl_buckets"].append(bucket)
    deployments = {r["deployment_id"]: r for r in _rows(
        con, "SELECT deployment_id, arg_max(gpus_per_replica, in_force_to) AS gpus_per_replica, "
             "arg_max(slots_per_replica, in_force_to) AS slots_per_replica, "
             "arg_max(cache_policy, in_force_to) AS cache_policy FROM day_deployments GROUP BY deployment_id")}
    return Review(
        day=window.day,
        capacity=_day_rows(con, layout, window, "infra", "capacity_daily"),
        plan=_day_rows(con, layout, window, "infra", "capacity_plan_daily"),
        load=_day_rows(con, layout, window, "infra", "load_hourly"),
        slo=_day_rows(con, layout, window, "infra", "slo_daily"),
        cost_history=_history(con, layout, window, "finance", "cost_per_mtok_daily",
                              "day, model, deployment_id, currency, cost_per_mtok_goodput, cost_total, "
                              "compliant_output_tokens, output_tokens", run_days),
        policy=policy,
        deployments=deployments,
        tokens=_day_rows(con, layout, window, "infra", "token_split_daily"),
        slo_hourly=_day_rows(con, layout, window, "infra", "slo_hourly"),
        goodput=_day_rows(con, layout, window, "infra", "goodput_hourly"),
        plan_history=_history(con, layout, window, "infra", "capacity_plan_daily",
                              "day, model, deployment_id, peak_output_token_rate", run_days),
        whatif=_day_rows(con, layout, window, "infra", "cache_whatif_daily"),
        gpu_usage_history=_history(con, layout, window, "infra", "gpu_usage_daily",
                                   "day, deployment_id, gpus, gpus_measured, power_w, power_basis, raw_throughput, "
                                   "slo_goodput, goodput_per_watt, goodput_per_watt_nominal", run_days),
        run_id=run_id,
        published_run_id=run_id,
        verdict=_day_rows(con, layout, window, "infra", "capacity_verdict_daily"),
        memory=_day_rows(con, layout, window, "infra", "gpu_memory_daily"),
        sweep=_day_rows(con, layout, window, "infra", "loadtest_sweep_daily"),
        work=_day_rows(con, layout, window, "infra", "capacity_model_daily"),
    )


REVIEW = ("reports", "capacity_review")


def report_paths(layout: HomeLayout, day: date) -> tuple[Path, Path]:
    """reports/capacity-review-YYYY-MM-DD.html and .md: the published review (reports/ shows the current
    version's, tokenledger/publish/versions.py)."""
    stem = layout.reports / f"capacity-review-{day.isoformat()}"
    return stem.with_suffix(".html"), stem.with_suffix(".md")


def staged_report_paths(layout: HomeLayout, day: date) -> tuple[Path, Path]:
    """Where the review of a day is written before publication: lake/reports/capacity_review/day=YYYY-MM-DD/, the
    files publication links into the version as reports/capacity-review-YYYY-MM-DD.html and .md."""
    folder = lake.day_dir(layout.lake, *REVIEW, day)
    published = report_paths(layout, day)
    return folder / published[0].name, folder / published[1].name


def build_capacity_review(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                          run_id: str | None = None, run_days: frozenset[date] = frozenset()) -> dict[str, Any]:
    """Write the day's capacity review, HTML and Markdown, into the lake (each to a temporary name renamed into
    place); publication takes them into the published version with the day's tables."""
    review = review_of_day(con, layout, window, run_id, run_days)
    html, markdown = render_html(review), render_markdown(review)
    failpoint("review:rendered")
    html_path, md_path = staged_report_paths(layout, window.day)
    atomic.write_text(html_path, html)
    atomic.write_text(md_path, markdown)
    return {"deployments": len(review.capacity), "report": str(report_paths(layout, window.day)[0])}
