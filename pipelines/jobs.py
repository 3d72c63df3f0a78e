"""Jobs: the daily pipeline is every partitioned asset of a day, checks included."""

from __future__ import annotations

import dagster as dg

# In one process: every step already runs DuckDB on all cores, and the contract checks import GX once per run
# instead of once per step process.
daily_pipeline = dg.define_asset_job(
    "daily_pipeline",
    selection=dg.AssetSelection.all(),
    executor_def=dg.in_process_executor,
    description="Everything tokenledger computes and publishes for one UTC day (or a range, as one run).",
)
