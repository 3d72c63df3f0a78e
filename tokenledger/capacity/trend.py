"""infra.capacity_trend: rebuilt from all published days, validated against its contract, then published."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from tokenledger.catalog import TREND
from tokenledger.contracts import load_contract
from tokenledger.errors import LedgerError
from tokenledger.expectations import CRITICAL, Validation, validate_files
from tokenledger.publish.bucket import COMMIT_ATTEMPTS
from tokenledger.publish.versions import (
    EXPORTS,
    Staging,
    publish_files,
    published_days,
    published_exports,
    pull_published,
)
from tokenledger.storage import lake, retry
from tokenledger.storage.duck import literal_path, sql_path, statement
from tokenledger.storage.layout import HomeLayout
from tokenledger.storage.locks import exclusive
from tokenledger.storage.remote import Conflict

SOURCES = {"capacity": ("infra", "capacity_daily"), "cost": ("finance", "cost_per_mtok_daily"),
           "slo": ("infra", "slo_daily")}


@dataclass(frozen=True)
class TrendOutcome:
    rows: int
    days: int
    validation: Validation


def rebuild_trend(con: duckdb.DuckDBPyConnection, layout: HomeLayout) -> TrendOutcome:
    """Recompute the trend over every published day; publish it only if it meets its contract.

    Several runs may finish at once. The rebuild holds a lock, and every run rebuilds after publishing its own
    days, so the last rebuild to take the lock has read every day published before it. The published days are
    read from one version (resolved once), so the trend never mixes two publications. On object storage, where
    runs on other machines take no local lock, the rebuild commits only over the version it read (`Conflict`
    otherwise, and it is built again), which keeps the same promise.
    """
    table = load_contract(TREND.contract_id).table()
    with exclusive(layout.locks / "trend.lock"):
        for _ in retry.attempts(COMMIT_ATTEMPTS):
            # A home on object storage: another machine may publish meanwhile. The trend is built from the version
            # pulled here and committed only if it is still the published one; otherwise it is built again.
            version = pull_published(layout) if layout.remote is not None else None
            try:
                return _rebuild(con, layout, table, version)
            except Conflict:
                continue
    raise LedgerError(f"{TREND.qualified} was rebuilt {COMMIT_ATTEMPTS} times and each time another run published "
                      "first: run the trend again (tokenledger run of any day) once the backfills are done.")


def _rebuild(con: duckdb.DuckDBPyConnection, layout: HomeLayout, table, version: int | None) -> TrendOutcome:
    relative = f"{EXPORTS}/{TREND.schema}/{TREND.name}/{lake.DATA_FILE}"
    exports = published_exports(layout)
    files = {f"{source}_files": sorted(literal_path(p) for p in
                                       (exports / schema / name).glob(f"day=*/{lake.DATA_FILE}"))
             for source, (schema, name) in SOURCES.items()}
    if all(files.values()):
        sources = {f"{source}_days": published_days(f"${source}_files") for source in SOURCES}
        # Attainment is over judged requests. Days published before `judged_requests` existed judged every
        # effective request (no latency-less usage logs were read then): there it is effective_requests.
        slo_columns = {c[0] for c in con.execute(
            f"DESCRIBE SELECT * FROM ({sources['slo_days']})", {"slo_files": files["slo_files"]}).fetchall()}
        judged = ("coalesce(judged_requests, effective_requests)" if "judged_requests" in slo_columns
                  else "effective_requests")
        query = statement("capacity_trend", judged_requests=judged, **sources)
        params = files
    else:  # nothing published yet: an empty table of the contract's shape
        nulls = ", ".join(f"NULL::{c.physical_type} AS {c.name}" for c in table.columns)
        query, params = f"SELECT {nulls} WHERE false", {}
    staging = Staging(layout)
    try:
        rows = staging.add_query(con, query, relative, params=params)
        staged = staging.files[relative]
        validation = validate_files(con, TREND.qualified, table, [staged])
        days = con.execute(f"SELECT count(DISTINCT day) FROM read_parquet({sql_path(staged)})").fetchone()[0]
        if not validation.failed(CRITICAL):
            publish_files(layout, staging, expect_version=version)
    finally:
        staging.discard()
    return TrendOutcome(rows, days, validation)
