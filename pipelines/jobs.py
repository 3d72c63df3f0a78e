"""Jobs: the daily pipeline is every partitioned asset of a day, checks included."""

from __future__ import annotations

import dagster as dg

daily_pipeline = dg.define_asset_job(
    "daily_pipeline",
    selection=dg.AssetSelection.all(),
    description="Everything tokenledger computes and publishes for one UTC day (or a range, as one run).",
)
