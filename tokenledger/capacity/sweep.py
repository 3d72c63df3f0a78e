"""infra.loadtest_sweep_daily: goodput against concurrency along the load test that speaks for each deployment on
a UTC day (docs/metrics.md, section 5, Load-test sweep; docs/adr/0122-batching-and-the-sweep.md).

The run is the one the capacity choice takes (sql/capacity/capacity_loadtest_choice.sql: the most recent run of the
configuration identity in force at the end of the day, batching settings included), its steps read from the
load-test history (core.loadtest_steps of every day up to this one) by sql/capacity/loadtest_sweep_daily.sql.
"""

from __future__ import annotations

from typing import Any

import duckdb

from tokenledger.capacity.day import attach_loadtest_history
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path, statement, used_params
from tokenledger.storage.lake import DayWindow, attach_day, write_table
from tokenledger.storage.layout import HomeLayout


def build_loadtest_sweep(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.loadtest_sweep_daily for the day; returns its rows, the deployments swept and those with a knee."""
    attach_day(con, layout, window, "day_deployments", "core", "deployments_daily")
    runs = attach_loadtest_history(con, layout, window)
    text = "CREATE OR REPLACE TEMP TABLE loadtest_choice AS " + statement("capacity_loadtest_choice")
    con.execute(text, used_params(text, window.params()))
    rows = write_table(con, layout, window, "infra", "loadtest_sweep_daily")
    path = lake.day_file(layout.lake, "infra", "loadtest_sweep_daily", window.day)
    swept, knees = con.execute("SELECT count(DISTINCT deployment_id), count(*) FILTER (WHERE is_knee) "
                               "FROM read_parquet($file)", {"file": literal_path(path)}).fetchone()
    return {"rows": rows, "loadtest_runs_considered": runs, "deployments_swept": swept, "knees": knees}
