"""Resources: where the home is, and how a step gets its DuckDB.

Every path comes from configuration: `TOKENLEDGER_HOME` alone gives a working pipeline, and each folder may be
overridden on its own (`TOKENLEDGER_RAW_DIR`, `TOKENLEDGER_CONFIG_DIR`, `TOKENLEDGER_WAREHOUSE`,
`TOKENLEDGER_EXPORTS_DIR`, `TOKENLEDGER_REPORTS_DIR`) or in the resource's run config.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import duckdb
from pydantic import PrivateAttr

from tokenledger.errors import LedgerError
from tokenledger.publish.versions import published_generations, pull_published
from tokenledger.publish.warehouse import WarehouseResource, warehouse_resource
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.housekeeping import clean_orphans, day_locks, dead_runs, register_run, step_scratch
from tokenledger.storage.layout import HomeLayout
from tokenledger.storage.remote import pull_for_run, push_for_run

OPTIONAL_DIRS = {
    "raw_dir": "TOKENLEDGER_RAW_DIR",
    "config_dir": "TOKENLEDGER_CONFIG_DIR",
    "warehouse_path": "TOKENLEDGER_WAREHOUSE",
    "exports_dir": "TOKENLEDGER_EXPORTS_DIR",
    "reports_dir": "TOKENLEDGER_REPORTS_DIR",
}
# Settings a `tokenledger run` user may need without Dagster run config: a very large day can need more memory
# than DuckDB's default limit (what the out-of-memory message says to raise).
OPTIONAL_SETTINGS = {"duckdb_memory_limit": "TOKENLEDGER_DUCKDB_MEMORY_LIMIT"}
# What the process orchestrating a run's steps (an executor of a process per step: pipelines/executors.py) tags the
# run with: the home it computes, which a step executed elsewhere (a Celery worker) checks its own against, and the
# run's own id, telling its steps that the run is held (a re-executed run inherits its parent's tags: hence the id).
HOME_TAG, HELD_TAG = "tokenledger/home", "tokenledger/held_run"
# The generation the run took each of its days with ({"run": run id, "days": {ISO day: number}}), which its
# publication carries (tokenledger/storage/housekeeping.py, day_locks): a step executed anywhere reads it here.
FENCE_TAG = "tokenledger/generations"


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
    # Above this share of a day's hosted-API requests without a price, the day is not published (api_requests_priced):
    # 0 by default, as an unpriced request is cost the ledger does not know
    # (docs/adr/0063-a-request-without-a-price-is-unpriced.md).
    max_unpriced_share: float = 0.0
    # A provider's own cost export and tokenledger's price of a model and tier differ by more than this share of the
    # provider's figure: finance.provider_cost_reconciliation_daily.within_tolerance is false (a contract warning).
    provider_cost_tolerance: float = 0.01
    # When a day's inputs are expected complete (freshness checks warn after): gateway logs by this hour (UTC) of
    # the next day, billing this many hours after the day ends (FOCUS exports lag usage by a day or more).
    logs_complete_hour_utc: int = 4
    billing_complete_after_hours: int = 36
    # Days known to have had no traffic (ISO dates, comma-separated, or `all`), which may be published without a
    # single request log; any other day without logs fails (a missing upload must not look like a quiet day).
    # Also read from TOKENLEDGER_IDLE_DAYS at run time (what `tokenledger run --idle` sets).
    idle_days: str | None = None

    _held: ExitStack | None = PrivateAttr(default=None)
    _fence: dict[str, int] | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """At a run's start: hold the run (`holding_run`), unless the process orchestrating it already does (an
        executor of a process per step: pipelines/executors.py); then, for a home on object storage, fetch what the
        step reads of the run's days."""
        run = context.run
        layout = self.layout
        held_for_steps = run is not None and run.tags.get(HELD_TAG) == run.run_id
        if held_for_steps and run.tags.get(HOME_TAG) != layout.name:
            raise LedgerError(f"run {run.run_id[:8]} computes the home {run.tags[HOME_TAG]}, but this process's "
                              f"TOKENLEDGER_HOME is {layout.name}: a worker computes in the home of its own "
                              "environment, so start each worker with the home of the runs it serves, at the same "
                              "path (docs/deploying.md)")
        if run is None or (layout.remote is None and not layout.home.is_dir()):
            return
        held = ExitStack()
        try:
            if not held_for_steps:
                held.enter_context(self.holding_run(run, context.instance, context.log))
            if layout.remote is not None:
                # After the day locks: what this step reads of the days and the published version, from the
                # bucket (tokenledger/storage/remote.py).
                days = run_days(run.tags)
                pull_for_run(layout.remote, layout.home, days)
                pull_published(layout)
                held.callback(push_for_run, layout.remote, layout.home, days)
        except BaseException as exc:
            held.close()
            if isinstance(exc, OSError):
                raise _cannot_prepare(layout, exc) from None
            raise
        self._held = held

    @contextmanager
    def holding_run(self, run: dg.DagsterRun, instance: dg.DagsterInstance,
                    log: dg.DagsterLogManager) -> Iterator[None]:
        """From a run's start to its end: clean up after killed runs, record the run, and lock its days so that
        another run of the same day waits instead of interleaving its files with this one's.

        A run executed in one process holds itself (setup_for_execution). Under an executor of a process per step,
        the process orchestrating the steps holds the run for their whole span (`holding_run_for_steps`) and the
        steps take nothing: a step taking its run's day locks would wait for the orchestrator, which waits for the
        step; steps holding them each for its own span would make two steps of one run wait on each other, and let
        another run take the days between two steps."""
        layout = self.layout
        days = run_days(run.tags)
        with ExitStack() as held:
            try:
                layout.home.mkdir(parents=True, exist_ok=True)
                fail_dead_runs(layout, instance)
                clean_orphans(layout, days)
                record = register_run(layout, run.run_id)
                held.callback(record.unlink, missing_ok=True)
                generations = held.enter_context(day_locks(
                    layout, days, waiting=lambda day: log.info(
                        f"another run of {day} is in progress; waiting for it to finish before computing the day"),
                    published=published_generations(layout) if days else {}))
            except OSError as exc:
                raise _cannot_prepare(layout, exc) from None
            if days:
                self._fence = generations
                held.callback(setattr, self, "_fence", None)
                instance.add_run_tags(run.run_id, {FENCE_TAG: json.dumps({"run": run.run_id, "days": generations})})
            yield

    @contextmanager
    def holding_run_for_steps(self, run: dg.DagsterRun, instance: dg.DagsterInstance,
                              log: dg.DagsterLogManager) -> Iterator[None]:
        """`holding_run`, in the process orchestrating the run's steps, with the run tagged (HOME_TAG, HELD_TAG) so
        that its steps, wherever they execute, take nothing and compute in the same home."""
        if self.layout.remote is None and not self.layout.home.is_dir():
            yield  # nothing to hold: each step fails saying the home is missing
            return
        with self.holding_run(run, instance, log):
            instance.add_run_tags(run.run_id, {HOME_TAG: self.layout.name, HELD_TAG: run.run_id})
            yield

    def fence(self, context: dg.AssetExecutionContext) -> dict[str, int] | None:
        """The generation this run took each of its days with (what its publication carries), or None for a run
        that holds no day (materialized outside a run of the home)."""
        if self._fence is not None:
            return self._fence
        run = context.instance.get_run_by_id(context.run_id)  # as stored now: tagged after the run started
        said = json.loads(run.tags.get(FENCE_TAG, "{}")) if run is not None else {}
        return said["days"] if said.get("run") == context.run_id else None

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Push what the step wrote (a home on object storage), then release the day locks and the run record."""
        if self._held is not None:
            held, self._held = self._held, None
            held.close()

    def is_idle(self, day: date) -> bool:
        """Whether the user declared `day` idle (idle_days, or TOKENLEDGER_IDLE_DAYS)."""
        declared = ",".join(filter(None, (self.idle_days, os.getenv("TOKENLEDGER_IDLE_DAYS"))))
        entries = {e.strip() for e in declared.split(",") if e.strip()}
        return "all" in entries or day.isoformat() in entries

    @property
    def layout(self) -> HomeLayout:
        return HomeLayout.of(self.home, raw=self.raw_dir, config=self.config_dir, warehouse=self.warehouse_path,
                             exports=self.exports_dir, reports=self.reports_dir)

    @contextmanager
    def compute(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
        """A DuckDB connection of the step's own (to the process's in-memory database: tokenledger.storage.duck), and a
        scratch folder of its own, marked in use while the step runs (so a later run can tell it from the folder of
        a killed step) and removed afterwards."""
        with step_scratch(self.layout.scratch / f"step-{uuid.uuid4().hex[:12]}") as scratch, \
                compute_connection(self.layout.scratch, self.duckdb_memory_limit, self.duckdb_threads) as con:
            yield con, scratch

    def warehouse(self) -> WarehouseResource:
        """The warehouse file, which holds only views over the published tables (see tokenledger.publish.warehouse)."""
        return warehouse_resource(self.layout)


def fail_dead_runs(layout: HomeLayout, instance: dg.DagsterInstance) -> list[str]:
    """Mark the Dagster runs of dead processes that are still 'started' as failed; returns their ids."""
    failed = []
    for record in dead_runs(layout):
        run = instance.get_run_by_id(record["run_id"])
        if run is not None and run.status in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING,
                                              dg.DagsterRunStatus.CANCELING):
            instance.report_run_failed(run, message=f"process {record['pid']} on {record['host']} ended without "
                                                     "finishing this run (killed, or the machine restarted); "
                                                     "tokenledger marked it failed when the next run started. "
                                                     "A day is published in one step or not at all, so the "
                                                     "published days are whole either way.")
            failed.append(record["run_id"])
        record["file"].unlink(missing_ok=True)
    return failed


def _cannot_prepare(layout: HomeLayout, exc: OSError) -> LedgerError:
    return LedgerError(f"cannot prepare {layout.home} for a run ({exc.strerror}: {exc.filename}). Check that the "
                       "home is writable and its disk is not full, then re-run.")


def run_days(tags: dict[str, str]) -> list[date]:
    """The UTC days a run covers, from its partition tags (none for an unpartitioned run such as the trend's)."""
    if key := tags.get("dagster/partition"):
        first = last = key
    elif (first := tags.get("dagster/asset_partition_range_start")) and (
            last := tags.get("dagster/asset_partition_range_end")):
        pass
    else:
        return []
    try:
        start, end = date.fromisoformat(first), date.fromisoformat(last)
    except ValueError:
        return []
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def ledger_resource() -> LedgerResource:
    """The resource as configured by the environment; optional overrides only when their variable is set."""
    overrides = {field: dg.EnvVar(var) for field, var in (OPTIONAL_DIRS | OPTIONAL_SETTINGS).items()
                 if os.getenv(var)}
    return LedgerResource(home=dg.EnvVar("TOKENLEDGER_HOME"), **overrides)


def ledger_run_config(**values: object) -> dict:
    """The ledger resource's run config as `ledger_resource()` configures it (each setting named by its variable, in
    Dagster's `env:` form, so the process that runs a step reads it from its own environment), with `values` added.
    Run config replaces a resource's whole configuration: a run given only `idle_days` would lose its home."""
    config: dict = {"home": {"env": "TOKENLEDGER_HOME"}}
    config.update({field: {"env": var} for field, var in (OPTIONAL_DIRS | OPTIONAL_SETTINGS).items() if os.getenv(var)})
    return {"ledger": {"config": {**config, **values}}}
