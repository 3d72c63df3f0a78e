"""Resources: where the home is, and how a step gets its DuckDB.

Every path comes from configuration: `TOKENLEDGER_HOME` alone gives a working pipeline, and each folder may be
overridden on its own (`TOKENLEDGER_RAW_DIR`, `TOKENLEDGER_CONFIG_DIR`, `TOKENLEDGER_WAREHOUSE`,
`TOKENLEDGER_EXPORTS_DIR`, `TOKENLEDGER_REPORTS_DIR`) or in the resource's run config.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from tokenledger.duck import compute_connection
from tokenledger.paths import HomeLayout

OPTIONAL_DIRS = {
    "raw_dir": "TOKENLEDGER_RAW_DIR",
    "config_dir": "TOKENLEDGER_CONFIG_DIR",
    "warehouse_path": "TOKENLEDGER_WAREHOUSE",
    "exports_dir": "TOKENLEDGER_EXPORTS_DIR",
    "reports_dir": "TOKENLEDGER_REPORTS_DIR",
}


class LedgerResource(dg.ConfigurableResource):
    """The tokenledger home (landing zone, lake, warehouse, exports) and the compute settings of a step."""

    home: str
    raw_dir: str | None = None
    config_dir: str | None = None
    warehouse_path: str | None = None
    exports_dir: str | None = None
    reports_dir: str | None = None
    duckdb_memory_limit: str = "4GB"
    duckdb_threads: int | None = None
    # Above this share of a source's rows quarantined in a day, the day is not published (quarantine_within_tolerance).
    max_quarantine_share: float = 0.001
    # When a day's inputs are expected complete (freshness checks warn after): gateway logs by this hour (UTC) of
    # the next day, billing this many hours after the day ends (FOCUS exports lag usage by a day or more).
    logs_complete_hour_utc: int = 4
    billing_complete_after_hours: int = 36

    @property
    def layout(self) -> HomeLayout:
        return HomeLayout.of(self.home, raw=self.raw_dir, config=self.config_dir, warehouse=self.warehouse_path,
                             exports=self.exports_dir, reports=self.reports_dir)

    @contextmanager
    def compute(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
        """An in-memory DuckDB for one step, and a scratch folder of its own that is removed afterwards."""
        scratch = self.layout.scratch / f"step-{uuid.uuid4().hex[:12]}"
        try:
            with compute_connection(scratch / "spill", self.duckdb_memory_limit, self.duckdb_threads) as con:
                yield con, scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def warehouse(self) -> DuckDBResource:
        """The warehouse file, which holds only views over the lake and the exports (see tokenledger.warehouse)."""
        return DuckDBResource(database=str(self.layout.warehouse))


def ledger_resource() -> LedgerResource:
    """The resource as configured by the environment; optional overrides only when their variable is set."""
    overrides = {field: dg.EnvVar(var) for field, var in OPTIONAL_DIRS.items() if os.getenv(var)}
    return LedgerResource(home=dg.EnvVar("TOKENLEDGER_HOME"), **overrides)
