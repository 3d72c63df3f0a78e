"""tokenledger's Dagster definitions: the whole pipeline on one screen.

ingest (gateway logs, FOCUS billing, deployments)  ->  quality (quarantine, reconciliation)  ->  publish
"""

from __future__ import annotations

import dagster as dg

from assets import accounting, capacity, checks, cost, ingest, publish, quality
from pipelines.jobs import daily_pipeline
from pipelines.resources import ledger_resource

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([ingest, quality, accounting, cost, capacity, publish]),
    asset_checks=dg.load_asset_checks_from_modules([checks, cost]),
    jobs=[daily_pipeline],
    resources={"ledger": ledger_resource()},
)
