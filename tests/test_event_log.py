"""The home's Dagster event log (pipelines/event_log.py) stores what Dagster's own SQLite event log stores.

A ranged run of a partitioned asset with a check goes once through an instance on Dagster's default storage and
once through an instance on LedgerEventLogStorage; the runs' event logs, the materialized partitions, the latest
materialization of each and the check's executions must be the same."""

import os
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.events import DagsterEventType
from dagster._core.storage.event_log import SqliteEventLogStorage
from tokenledger.pipelines.instance import EARLIER_TEXTS

from tests.conftest import make_home
from tokenledger.cli import _EARLIER_DAGSTER_YAML, DAGSTER_YAML, use_home

DAYS = ["2026-11-16", "2026-11-17", "2026-11-18"]
_partitions = dg.DailyPartitionsDefinition(start_date="2026-11-01", timezone="UTC")


@dg.asset(partitions_def=_partitions, backfill_policy=dg.BackfillPolicy.single_run(),
          check_specs=[dg.AssetCheckSpec("rows_positive", asset="tokens", partitions_def=_partitions)])
def tokens(context: dg.AssetExecutionContext):
    days = context.partition_keys
    yield dg.MaterializeResult(metadata={"days": len(days)})
    yield dg.AssetCheckResult(check_name="rows_positive", passed=True)


@dg.asset(partitions_def=_partitions, backfill_policy=dg.BackfillPolicy.single_run(), deps=[tokens])
def cost(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"first": context.partition_keys[0]})


_job = dg.define_asset_job("ranged", selection=[tokens, cost])
_defs = dg.Definitions(assets=[tokens, cost], jobs=[_job])


def _run_and_read(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with dg.DagsterInstance.get() as instance:
        result = _defs.resolve_job_def("ranged").execute_in_process(
            instance=instance, tags={"dagster/asset_partition_range_start": DAYS[0],
                                     "dagster/asset_partition_range_end": DAYS[-1]})
        assert result.success
        storage = type(instance.event_log_storage).__name__
        log = [(e.dagster_event.event_type_value, e.dagster_event.asset_key, e.dagster_event.partition)
               for e in instance.all_logs(result.run_id) if e.dagster_event]
        latest = {}
        for key in (dg.AssetKey("tokens"), dg.AssetKey("cost")):
            for day in DAYS:
                event = instance.get_latest_materialization_event(key) if day == DAYS[-1] else None
                latest[(key, day)] = event.dagster_event.partition if event else None
        materialized = {key.to_user_string(): sorted(instance.get_materialized_partitions(key))
                        for key in (dg.AssetKey("tokens"), dg.AssetKey("cost"))}
        check_key = dg.AssetCheckKey(dg.AssetKey("tokens"), "rows_positive")
        checks = sorted((r.status.value, r.run_id == result.run_id) for r in
                        instance.event_log_storage.get_asset_check_execution_history(check_key, limit=10))
        # The tags Dagster indexes per partition (a day's data version, which staleness reads).
        versions = {key.to_user_string(): sorted(instance.event_log_storage.get_latest_tags_by_partition(
            key, DagsterEventType.ASSET_MATERIALIZATION, ["dagster/data_version"]))
            for key in (dg.AssetKey("tokens"), dg.AssetKey("cost"))}
        records = {key.to_user_string(): record.asset_entry.last_materialization.dagster_event.partition
                   for record in instance.get_asset_records() for key in [record.asset_entry.asset_key]}
    return {"storage": storage, "log": log, "latest": latest, "materialized": materialized, "checks": checks,
            "records": records, "versions": versions}


def test_a_ranged_run_is_stored_as_dagsters_own_sqlite_event_log_stores_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The storage switches on Dagster's event batches for its process; the test leaves the variable as it was.
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "0")
    monkeypatch.delenv("DAGSTER_EVENT_BATCH_SIZE")
    default_home, ledger_home = tmp_path / "default", tmp_path / "ledger"
    default_home.mkdir()
    (default_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    ledger_home.mkdir()
    (ledger_home / "dagster.yaml").write_text(DAGSTER_YAML)

    default = _run_and_read(default_home, monkeypatch)
    assert "DAGSTER_EVENT_BATCH_SIZE" not in os.environ
    # Whether the index has a table is asked of SQLite once per table (Dagster asks before storing each check
    # evaluation, planned or done, and each materialization's tags).
    asked: list[str] = []
    dagsters_has_table = SqliteEventLogStorage.has_table
    monkeypatch.setattr(SqliteEventLogStorage, "has_table",
                        lambda storage, name: asked.append(name) or dagsters_has_table(storage, name))
    ledger = _run_and_read(ledger_home, monkeypatch)
    assert "asset_check_executions" in asked and len(asked) == len(set(asked)), asked
    assert os.environ["DAGSTER_EVENT_BATCH_SIZE"] == "1000"

    assert (default["storage"], ledger["storage"]) == ("SqliteEventLogStorage", "LedgerEventLogStorage")
    # The run's events, in order: 2 assets x 3 days planned, the check planned, then each step's materializations.
    assert ledger["log"] == default["log"]
    planned = [e for e in ledger["log"] if e[0] == "ASSET_MATERIALIZATION_PLANNED"]
    assert sorted((k.to_user_string(), p) for _, k, p in planned) == sorted(
        (a, d) for a in ("cost", "tokens") for d in DAYS)
    assert sum(1 for e in ledger["log"] if e[0] == "ASSET_MATERIALIZATION") == 6
    for name in ("latest", "materialized", "checks", "records", "versions"):
        assert ledger[name] == default[name], name
    assert ledger["materialized"] == {"tokens": DAYS, "cost": DAYS}
    assert ledger["records"] == {"tokens": DAYS[-1], "cost": DAYS[-1]}
    assert ledger["versions"] == {"tokens": DAYS, "cost": DAYS}
    # Dagster records a planned execution per day and the one evaluation the step yielded.
    assert ledger["checks"] == [("PLANNED", True)] * 3 + [("SUCCEEDED", True)]


def test_a_home_written_by_an_earlier_version_gets_the_new_event_log(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOKENLEDGER_HOME", "DAGSTER_HOME"):  # use_home sets them
        monkeypatch.setenv(name, "unset")
    home = make_home(tmp_path / "home")
    (home / ".dagster").mkdir()
    for earlier in EARLIER_TEXTS:  # every text an earlier version wrote, SQLite's and Postgres's
        (home / ".dagster" / "dagster.yaml").write_text(earlier)
        use_home(home)
        assert (home / ".dagster" / "dagster.yaml").read_text() == DAGSTER_YAML
    # Today's: the queue looks every second, the UI opens without the newsletter prompt.
    instance = yaml.safe_load(DAGSTER_YAML)
    assert instance["run_coordinator"]["config"] == {"dequeue_interval_seconds": 1}
    assert instance["nux"] == {"enabled": False} and instance["telemetry"] == {"enabled": False}
    # One a user edited is theirs.
    edited = _EARLIER_DAGSTER_YAML + "run_queue:\n  max_concurrent_runs: 2\n"
    (home / ".dagster" / "dagster.yaml").write_text(edited)
    use_home(home)
    assert (home / ".dagster" / "dagster.yaml").read_text() == edited
