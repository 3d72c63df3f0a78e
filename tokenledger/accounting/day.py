"""Token, SLO and goodput accounting of one UTC day (docs/metrics.md, sections 1-3).

Every figure is computed in the step's DuckDB from the ingested day: the request rows are read by views
(`day_requests`, `day_deployments`, `day_usage`), judged by `sql/accounting/requests_judged.sql` against the SLO policy
in force, and aggregated by the SQL file named after each table. Only a day's policy version and row counts reach
Python. Decisions: docs/adr/README.md, "Metrics" (0001-0010).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from tokenledger.errors import ConfigError
from tokenledger.storage import lake
from tokenledger.storage.duck import run_sql, statement, used_params
from tokenledger.storage.lake import DayWindow, attach_day
from tokenledger.storage.layout import HomeLayout


def attach_inputs(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> None:
    """Views `day_requests` (core.gateway_requests) and `day_deployments` (core.deployments_daily) of the day."""
    attach_day(con, layout, window, "day_requests", "core", "gateway_requests")
    attach_day(con, layout, window, "day_deployments", "core", "deployments_daily")


def attach_usage(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> None:
    """Views `day_deployments` and `day_usage` (core.usage_hourly) of the day."""
    attach_day(con, layout, window, "day_deployments", "core", "deployments_daily")
    attach_day(con, layout, window, "day_usage", "core", "usage_hourly")


def slo_version_in_force(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> str:
    """The slo_version whose valid_from is the latest on or before the day (config loaded as cfg_slo_policy)."""
    path = layout.config / "slo.yaml"
    in_force, earliest, ambiguous_names = run_sql(con, "slo_versions_in_force", window.params()).fetchone()
    if ambiguous_names:
        raise ConfigError(f"{path}: slo_version {', '.join(ambiguous_names)} is given more than one valid_from; "
                          "each version needs a name of its own. Rename one and re-run.")
    if not in_force:
        since = f"the earliest valid_from is {earliest}" if earliest else "the file has no versions"
        raise ConfigError(f"{path}: no SLO version is in force on {window.day} ({since}). Add a version with "
                          f"valid_from on or before {window.day} (docs/configuration.md) and re-run the day.")
    if len(in_force) > 1:
        raise ConfigError(f"{path}: versions {', '.join(in_force)} share the same valid_from, so the policy in "
                          f"force on {window.day} is ambiguous. Give each version its own valid_from and re-run.")
    return in_force[0]


def judge_requests(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> str:
    """Resolve each model's SLO policy for the day and create the view `requests_judged`; returns slo_version.

    Creates `day_slo_policy` (one row per model) and `day_slo_isl_bucket` (its buckets), then the view that
    gives every request of the day its bucket, limits and verdicts (sql/accounting/requests_judged.sql).
    """
    attach_inputs(con, layout, window)
    version = slo_version_in_force(con, layout, window)
    policy = "CREATE OR REPLACE TEMP TABLE day_slo_policy AS " + statement("slo_policy_day")
    con.execute(policy, used_params(policy, window.params(slo_version=version)))
    con.execute("CREATE OR REPLACE TEMP TABLE day_slo_isl_bucket AS " + statement("slo_isl_bucket_day"))
    unbucketed = [r[0] for r in con.execute(
        "SELECT p.model FROM day_slo_policy AS p ANTI JOIN day_slo_isl_bucket AS b USING (model) "
        "ORDER BY 1").fetchall()]
    if unbucketed:
        raise ConfigError(f"{layout.config / 'slo.yaml'}: SLO version {version} gives no isl_buckets to "
                          f"{', '.join(unbucketed)}, so their requests cannot be judged. Add isl_buckets to "
                          "the version's default (docs/configuration.md) and re-run.")
    con.execute("CREATE OR REPLACE TEMP VIEW requests_judged AS " + statement("requests_judged"))
    return version


SLO_MEASURES = ("ttft_ms", "queue_ms", "itl_max_ms", "tpot_ms", "e2e_ms")  # sql/accounting/slo_percentiles.sql


def slo_percentiles(con: duckdb.DuckDBPyConnection, scratch: Path) -> None:
    """Create `slo_percentiles` (model, isl_bucket, measure, [P50, P90, P99]) for sql/accounting/slo_daily.sql, after
    `judge_requests`: the day's successful requests written once to a Parquet file in `scratch`
    (sql/accounting/slo_latencies.sql), then each measure's percentiles per ISL bucket and per model ('all') in a
    statement of its own (sql/accounting/slo_percentiles.sql).

    DuckDB keeps every value of an exact percentile (quantile_cont) in memory and cannot spill it. Ten percentile
    columns in one statement held about ten times a measure's values at once: the 100M-request day's slo_daily
    failed at the 4 GB limit. One at a time holds 8 bytes per successful request (0.8 GB at 100M), and the file
    (not a temp table, which DuckDB keeps uncompressed in memory until it spills) is read a column at a time."""
    with lake.scratch_view(con, "slo_latencies", statement("slo_latencies"), scratch / "slo_latencies.parquet"):
        con.execute("CREATE OR REPLACE TEMP TABLE slo_percentiles (model VARCHAR, isl_bucket VARCHAR, measure VARCHAR, "
                    "q DOUBLE[])")
        insert = "INSERT INTO slo_percentiles " + statement("slo_percentiles")
        for measure in SLO_MEASURES:
            for whole_model in (False, True):
                con.execute(insert, {"measure": measure, "all": whole_model})

