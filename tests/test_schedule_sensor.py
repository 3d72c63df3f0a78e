"""The daily schedule picks yesterday's UTC partition; the late-data sensor re-runs a processed day."""

from __future__ import annotations

import os
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from tokenledger.pipelines.definitions import defs
from tokenledger.pipelines.resources import LedgerResource
from tokenledger.pipelines.schedules import SCHEDULE_HOUR_UTC, daily_schedule
from tokenledger.pipelines.sensors import late_data_sensor

from tests.conftest import failure_text, gateway_dir, materialize, request, write_jsonl

DAY = "2026-11-16"


def test_a_tick_runs_the_previous_utc_day_after_the_logs_are_complete() -> None:
    assert LedgerResource.model_fields["logs_complete_hour_utc"].default < SCHEDULE_HOUR_UTC
    schedule = defs.resolve_schedule_def(daily_schedule.name)
    assert schedule.cron_schedule == "0 6 * * *" and schedule.execution_timezone == "UTC"
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 30, 6, 0, tzinfo=UTC))
    requests = schedule.evaluate_tick(context).run_requests
    assert [r.partition_key for r in requests] == ["2026-11-29"]
    # Across a month boundary too: the day that ended, never the day in progress.
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 12, 1, 6, 0, tzinfo=UTC))
    assert [r.partition_key for r in schedule.evaluate_tick(context).run_requests] == ["2026-11-30"]


def _evaluate_sensor(instance: dg.DagsterInstance) -> list:
    ledger = LedgerResource(home=os.environ["TOKENLEDGER_HOME"])
    # The resource holds a run's locks from set-up to tear-down, so Dagster opens it as a context, as the daemon does.
    with dg.build_sensor_context(instance=instance, resources={"ledger": ledger}, definitions=defs) as context:
        result = late_data_sensor.evaluate_tick(context)
    return result.run_requests or []


# The sensor reads only when each day's gateway and billing tables were last materialized (pipelines/sensors.py):
# its tests run the steps those tables need, with their checks, not the whole job.
def _ingest(day: str, instance: dg.DagsterInstance) -> bool:
    return materialize(day, upto=["core/gateway_requests", "core/billing_charges"], instance=instance).success


def test_a_late_file_in_a_processed_day_requests_that_day_again(home: Path) -> None:
    warnings.filterwarnings("ignore")
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [request("r1"), request("r2")])
    write_jsonl(gateway_dir(home, "2026-11-18") / "a.jsonl", [request("x1", received_at="2026-11-18T01:00:00Z")])
    with dg.DagsterInstance.ephemeral() as instance:
        assert _ingest(DAY, instance)
        assert _evaluate_sensor(instance) == []  # nothing newer than the run; 11-18 was never processed

        time.sleep(0.05)
        write_jsonl(gateway_dir(home, DAY) / "b-late.jsonl", [request("r3")])
        requests = _evaluate_sensor(instance)
        assert [(r.partition_key, r.job_name or "daily_pipeline") for r in requests] == [(DAY, "daily_pipeline")]
        assert requests[0].run_key.startswith(f"late-{DAY}-")
        assert requests[0].tags["tokenledger/reason"].startswith("late data: newest file ")

        # Once the day has run again, the file is no longer late.
        assert _ingest(DAY, instance)
        assert _evaluate_sensor(instance) == []


def test_a_late_billing_file_requests_the_processed_days_it_covers(home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    warnings.filterwarnings("ignore")
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")  # processed days without request logs
    with dg.DagsterInstance.ephemeral() as instance:
        for day in ("2026-11-16", "2026-11-17"):
            assert _ingest(day, instance)
        time.sleep(0.05)
        (home / "raw" / "billing" / "late.csv").write_text(
            '"ChargePeriodStart","ChargePeriodEnd","EffectiveCost","BilledCost","BillingCurrency","ChargeCategory"\n'
            '"2026-11-16 22:00:00","2026-11-18 02:00:00",1.0,1.0,"USD","Usage"\n')
        assert sorted(r.partition_key for r in _evaluate_sensor(instance)) == ["2026-11-16", "2026-11-17"]


def _evaluations(result) -> dict[str, tuple[bool, str]]:
    return {e.event_specific_data.asset_check_key.name: (e.event_specific_data.passed,
                                                          e.event_specific_data.description)
            for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}


def test_freshness_checks_warn_when_inputs_are_late_and_never_block(home: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = ["core/deployments_daily", "core/gateway_requests", "core/billing_charges"]
    # no logs and no bill for a day long past: ingest stops the day (it is not known to be idle) ...
    monkeypatch.delenv("TOKENLEDGER_IDLE_DAYS")
    assert "no request logs for 2026-11-16" in failure_text(materialize(DAY, selection=ingest))
    # ... and once declared idle, it runs, while the freshness checks still warn that nothing arrived
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", DAY)
    result = materialize(DAY, selection=ingest)
    assert result.success
    checks = _evaluations(result)
    assert checks["gateway_logs_fresh"] == (False, "2026-11-16: no gateway logs by 2026-11-17 04:00 UTC")
    assert checks["billing_fresh"] == (False, "2026-11-16: no billing rows by 2026-11-18 12:00 UTC")

    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [request("r1")])
    (home / "raw" / "billing" / "b.csv").write_text(
        '"ChargePeriodStart","ChargePeriodEnd","EffectiveCost","BilledCost","BillingCurrency","ChargeCategory"\n'
        '"2026-11-16 00:00:00","2026-11-17 00:00:00",1.0,1.0,"USD","Usage"\n')
    checks = _evaluations(materialize(DAY, selection=ingest))
    assert checks["gateway_logs_fresh"] == (True, "logs complete")
    assert checks["billing_fresh"] == (True, "billing complete")



def test_freshness_before_and_after_the_expected_hour() -> None:
    from datetime import date

    from tokenledger.assets.checks import freshness_verdict

    day, deadline = date(2026, 11, 29), datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    early, late = datetime(2026, 11, 30, 3, 0, tzinfo=UTC), datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    assert freshness_verdict(day, early, deadline, False, "gateway logs") == (
        True, "2026-11-29: no gateway logs yet; expected by 2026-11-30 04:00 UTC")
    assert freshness_verdict(day, early, deadline, True, "gateway logs") == (
        False, "2026-11-29: ran at 2026-11-30 03:00 UTC, before its gateway logs are expected complete "
               "(2026-11-30 04:00 UTC); re-run the day after that")
    assert freshness_verdict(day, late, deadline, True, "gateway logs") == (True, "")
    assert freshness_verdict(day, late, deadline, False, "gateway logs") == (
        False, "2026-11-29: no gateway logs by 2026-11-30 04:00 UTC")
