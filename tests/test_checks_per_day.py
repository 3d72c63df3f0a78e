"""A ranged run (one run for many days) records each check's evaluation on each day it materialized, as the Dagster
UI reads them (a check's status per partition): not once for the range, which the UI shows as every day skipped."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import gateway_dir, materialize, request, write_jsonl
from tokenledger.cli import dagster_home_of

DAYS = ["2026-11-16", "2026-11-17", "2026-11-18"]
UPTO = ["core/gateway_requests", "quality/quarantine", "quality/ingest_reconciliation_daily"]


def _land(home: Path, bad_row_on: str | None = None) -> None:
    for day in DAYS:
        records = [request(f"{day}-{i}", received_at=f"{day}T10:0{i}:00Z") for i in range(3)]
        if day == bad_row_on:
            records.append(request(f"{day}-bad", received_at=f"{day}T11:00:00Z", status="okay"))
        write_jsonl(gateway_dir(home, day) / "a.jsonl", records)


def _statuses(instance: dg.DagsterInstance, result) -> dict[dg.AssetCheckKey, dict[str, str]]:
    """For every check the run planned: its status per day, as the UI's check list computes it."""
    from dagster._core.storage.asset_check_state import AssetCheckState, bulk_update_asset_check_state
    from tokenledger.pipelines.partitions import daily_partitions

    planned = [e.dagster_event for e in instance.all_logs(result.run_id, of_type=dg.DagsterEventType
                                                          .ASSET_CHECK_EVALUATION_PLANNED)]
    keys = sorted({e.event_specific_data.asset_check_key for e in planned}, key=str)
    states = bulk_update_asset_check_state(instance, [(k, daily_partitions) for k in keys],
                                           dict.fromkeys(keys, AssetCheckState.empty()))
    return {k: {day: status.value for status, subset in states[k].subsets.items()
                for day in subset.subset_value.get_partition_keys()} for k in keys}


@pytest.fixture
def instance(home: Path):
    with dg.instance_for_test(temp_dir=str(dagster_home_of(home))) as instance:
        yield instance


def test_every_check_has_an_evaluation_for_each_day_of_a_ranged_run(home: Path, instance) -> None:
    _land(home)
    result = materialize(DAYS[0], DAYS[-1], upto=UPTO, instance=instance)
    assert result.success
    statuses = _statuses(instance, result)
    assert len(statuses) >= 10  # every contract and cross-table check of the ingest tables
    for key, by_day in statuses.items():
        assert sorted(by_day) == DAYS, key
        assert set(by_day.values()) <= {"SUCCEEDED", "FAILED"}, (key, by_day)
    # deployments other than m70's served nothing: a warning on each day
    assert set(statuses[dg.AssetCheckKey(dg.AssetKey(["core", "gateway_requests"]), "deployments_with_requests")]
               .values()) == {"FAILED"}
    # each day's evaluation targets that day's materialization, as the check's detail pane shows it
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(list(statuses))
    assert {r.partition for r in latest.values()} == {DAYS[-1]}


def test_a_check_failing_on_one_day_fails_that_day_only(home: Path, instance) -> None:
    _land(home, bad_row_on=DAYS[1])  # a row of 4 quarantined that day: far above the 0.1% tolerance
    result = materialize(DAYS[0], DAYS[-1], upto=UPTO, instance=instance)
    assert not result.success  # a blocking check: the range is not published
    statuses = _statuses(instance, result)
    recon = dg.AssetKey(["quality", "ingest_reconciliation_daily"])
    for name in ("quarantine_within_tolerance", "quarantine_empty"):
        assert statuses[dg.AssetCheckKey(recon, name)] == {
            DAYS[0]: "SUCCEEDED", DAYS[1]: "FAILED", DAYS[2]: "SUCCEEDED"}, name
    failed = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
              and e.event_specific_data.asset_check_key == dg.AssetCheckKey(recon, "quarantine_within_tolerance")
              and not e.event_specific_data.passed]
    assert [f.partition for f in failed] == [DAYS[1]]
    assert failed[0].description.startswith(
        f"too many rows quarantined (limit 0.10%); the day was not published:\n{DAYS[1]} gateway: 1 of 4 rows "
        f"(25.00%) quarantined, by field: status 1\n  {gateway_dir(home, DAYS[1]) / 'a.jsonl'} line 4: status: okay "
        "is not one of ok, error, timeout, disconnected, rejected, cancelled (1 row(s))\n"), failed[0].description
    # the table's other checks were evaluated on each day too, before the step failed
    assert set(statuses[dg.AssetCheckKey(recon, "contract")].values()) == {"SUCCEEDED"}
