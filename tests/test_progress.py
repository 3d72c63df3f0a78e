"""`tokenledger run`'s progress lines (pipelines/progress.py): one per finished step, and one every HEARTBEAT_S per
step still running, naming the step, its days and how long it has run."""

from __future__ import annotations

import io
import itertools
import logging
import re
import time

import dagster as dg
import pytest
from tokenledger.pipelines import progress
from tokenledger.pipelines.progress import RunningSteps, _StepLines, days_of, running_line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_running_step_is_said_every_interval_with_its_days_and_time_so_far() -> None:
    clock = Clock()
    steps = RunningSteps(every_s=30, clock=clock)
    clock.now += 10
    steps.saw("STEP_START", "ingest__gateway_requests", "2026-11-16...2026-11-18")
    clock.now += 29
    assert steps.due() == []
    clock.now += 1
    assert steps.due() == ["       40.0 s  ingest/gateway_requests running (2026-11-16...2026-11-18), 30 s so far"]
    assert steps.due() == []  # said: the next line is 30 s on
    steps.saw("STEP_START", "core__deployments_daily", "2026-11-16...2026-11-18")
    clock.now += 30
    assert steps.due() == [
        "       70.0 s  core/deployments_daily running (2026-11-16...2026-11-18), 30 s so far",
        "       70.0 s  ingest/gateway_requests running (2026-11-16...2026-11-18), 60 s so far"]
    steps.saw("STEP_SUCCESS", "ingest__gateway_requests")
    steps.saw("STEP_UP_FOR_RETRY", "core__deployments_daily")  # failed, to be retried: not running until it starts
    clock.now += 60
    assert steps.due() == []
    steps.saw("STEP_START", "publish__exports", "2026-11-16")
    steps.saw("PIPELINE_FAILURE", "")
    clock.now += 60
    assert steps.due() == []


def test_the_days_are_read_from_the_run_tags() -> None:
    assert days_of({"dagster/partition": "2026-11-16"}) == "2026-11-16"
    assert days_of({"dagster/asset_partition_range_start": "2026-11-16",
                    "dagster/asset_partition_range_end": "2026-11-18"}) == "2026-11-16...2026-11-18"
    assert days_of({}) == ""
    assert running_line("trend", "", 5, 4) == "        5.0 s  trend running, 4 s so far"


def test_the_logger_says_a_step_is_running_while_it_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A real run with the logger, its interval made 0.2 s, and a step of 1 s: at least one line while it ran, none
    once the run ended."""
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)

    @dg.op
    def slow() -> None:
        time.sleep(1)

    @dg.job(logger_defs={"progress": progress.step_progress})
    def one_slow_step() -> None:
        slow()

    result = one_slow_step.execute_in_process(run_config={"loggers": {"progress": {}}},
                                              tags={"dagster/partition": "2026-11-16"})
    assert result.success
    lines = capsys.readouterr().out.splitlines()
    running = [line for line in lines if "running" in line]
    assert running and all(re.fullmatch(r"\s+\d+\.\d s  slow running \(2026-11-16\), \d+ s so far", line)
                           for line in running), lines
    assert re.fullmatch(r"\s+\d+\.\d s  slow done", lines[-1]), lines
    time.sleep(0.5)
    assert capsys.readouterr().out == ""  # the run ended: its heartbeat stopped


def test_the_handler_keeps_one_line_per_finished_step() -> None:
    class Event:
        def __init__(self, kind: str) -> None:
            self.event_type_value = kind

    stream = io.StringIO()
    handler = _StepLines(stream, every_s=3600)
    for kind, step in (("STEP_START", "core__gateway_requests"), ("STEP_SUCCESS", "core__gateway_requests")):
        record = logging.LogRecord("x", logging.INFO, "", 0, "", None, None)
        record.dagster_meta = {"dagster_event": Event(kind), "step_key": step,
                               "job_tags": {"dagster/partition": "2026-11-16"}}
        handler.emit(record)
    assert re.fullmatch(r"\s+\d+\.\d s  core/gateway_requests done\n", stream.getvalue())
    assert handler.steps.due() == []


def test_asked_every_second_a_running_step_is_never_left_unsaid_longer_than_the_interval() -> None:
    """The logger's thread asks every second (`early` = 1): a step is said at 29 to 30 s after it started and after
    each line, never at 31 s (issue 57 item 4: a line at least every 30 s during a long step). Fake time, asked at
    0.37 s offsets so no tick lands on a whole second."""
    clock = Clock()
    steps = RunningSteps(every_s=30, clock=clock)
    steps.saw("STEP_START", "ingest__gateway_requests", "2026-11-16")
    started, said = clock.now, [clock.now]
    clock.now += 0.37
    while clock.now - started < 200:
        if lines := steps.due(early=1.0):
            assert lines == [running_line("ingest__gateway_requests", "2026-11-16", clock.now - steps.began,
                                          clock.now - started)]
            said.append(clock.now)
        clock.now += 1.0
    gaps = [later - earlier for earlier, later in itertools.pairwise(said)]
    assert len(gaps) >= 6 and all(29 <= gap <= 30 for gap in gaps), gaps
