"""tokenledger's Dagster definitions: the whole pipeline on one screen.

    ingest      gateway logs, FOCUS billing, deployments -> core.*              (assets/ingest.py)
    quality     quarantine, ingest reconciliation        -> quality.*           (assets/quality.py)
    accounting  token split, SLO attainment, goodput     -> infra.*             (assets/accounting.py)
    cost        allocation, $/MTok, showback, reconcile  -> finance.*, focus.*  (assets/cost.py)
    capacity    load tests, capacity, load, plan, review -> infra.*, reports/   (assets/capacity.py)
    whatif      prefix-cache scenarios over days, traces -> infra.cache_whatif_* (assets/whatif.py)
    publish     the day's tables to exports/ and the warehouse, then the trend (assets/publish.py, trend.py)

Every table is checked against its contract before anything downstream runs (assets/checks.py). The daily
schedule runs yesterday at 06:00 UTC; a sensor re-runs a processed day when a late file lands. A run's steps
execute in its own process unless TOKENLEDGER_EXECUTOR chooses a process per step or Celery workers
(pipelines/executors.py).
"""

from __future__ import annotations

import dagster as dg
from tokenledger.assets import accounting, capacity, cost, ingest, publish, quality, trend, whatif
from tokenledger.pipelines.executors import executor_from_env
from tokenledger.pipelines.jobs import daily_pipeline
from tokenledger.pipelines.progress import step_progress
from tokenledger.pipelines.resources import ledger_resource
from tokenledger.pipelines.schedules import daily_schedule
from tokenledger.pipelines.sensors import late_data_sensor

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([ingest, quality, accounting, cost, capacity, whatif, publish, trend]),
    jobs=[daily_pipeline],
    schedules=[daily_schedule],
    sensors=[late_data_sensor],
    resources={"ledger": ledger_resource()},
    # One process per run unless TOKENLEDGER_EXECUTOR says otherwise (multiprocess, celery): pipelines/executors.py.
    executor=executor_from_env(),
    loggers={"console": dg.colored_console_logger, "progress": step_progress},
)
