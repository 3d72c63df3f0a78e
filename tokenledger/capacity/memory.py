"""The GPU memory budget of one UTC day (docs/metrics.md, section 6; docs/adr/0120-the-gpu-memory-budget.md).

Per GPU deployment in force: weights, KV cache, runtime and margin per GPU, the KV cache's capacity in tokens and in
concurrent sequences at the day's mean and P99 context, and the two flags (no margin left; the planning peak's
concurrency within 10% of what the KV cache holds). All of it is sql/capacity/gpu_memory_daily.sql over the
inventory version in force at the end of the day, the day's requests (counted per distinct context, never listed)
and infra.capacity_plan_daily's Little's law; this module only attaches what the statement reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from tokenledger.accounting.day import judge_requests
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path
from tokenledger.storage.lake import DayWindow, attach_day, write_table
from tokenledger.storage.layout import HomeLayout


def build_gpu_memory(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write infra.gpu_memory_daily for the day (sql/capacity/gpu_memory_daily.sql); returns its rows and how many
    deployments each flag fired for, and how many lack the inventory facts of a budget."""
    judge_requests(con, layout, window)  # day_requests, day_deployments
    attach_day(con, layout, window, "day_capacity_plan", "infra", "capacity_plan_daily")
    rows = write_table(con, layout, window, "infra", "gpu_memory_daily")
    path: Path = lake.day_file(layout.lake, "infra", "gpu_memory_daily", window.day)
    no_margin, near, unknown = con.execute(
        "SELECT count(*) FILTER (WHERE kv_takes_all_memory), count(*) FILTER (WHERE concurrency_near_kv_limit), "
        "count(*) FILTER (WHERE kv_capacity_tokens IS NULL) FROM read_parquet($file)",
        {"file": literal_path(path)}).fetchone()
    return {"rows": rows, "kv_takes_all_memory": no_margin, "concurrency_near_kv_limit": near,
            "budget_not_computed": unknown}
