"""A Dagster logger that prints one line per finished step, so `tokenledger run` shows a day's progress as its
steps complete, not only when the day ends; and, every HEARTBEAT_S while a step runs, a line saying so (the step,
its days, how long it has run), so that a long step is not mistaken for a hung one.

`RunningSteps` is that heartbeat apart from the logger: fed the steps' starts and ends (a logger's events, or those
read from an instance's event log, as `tokenledger run --parallel` reads them), it says which lines are due.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping

import dagster as dg

_STEP_END = {"STEP_SUCCESS": "done", "STEP_FAILURE": "FAILED"}
# How often a running step is said to be running, in seconds.
HEARTBEAT_S = 30.0
STARTED = ("STEP_START",)
# A step that failed and will be retried is no longer running (its retry starts again with STEP_START).
ENDED = ("STEP_SUCCESS", "STEP_FAILURE", "STEP_UP_FOR_RETRY", "STEP_SKIPPED")
# The metadata key of the engine event a Celery worker reports when it takes over the step of a silent worker
# (pipelines/celery_app.py); the --parallel watcher prints its message.
HANDED_OVER = "tokenledger/handed over"
RUN_ENDED = ("PIPELINE_SUCCESS", "PIPELINE_FAILURE", "PIPELINE_CANCELED")


def days_of(tags: Mapping[str, str]) -> str:
    """The days a run computes, from its tags: '2026-11-16', '2026-11-16...2026-11-18', or '' (no partition)."""
    if day := tags.get("dagster/partition"):
        return day
    first, last = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    if first and last:
        return first if first == last else f"{first}...{last}"
    return ""


def running_line(step_key: str, days: str, since_began_s: float, running_s: float) -> str:
    """'    120.0 s  ingest/gateway_requests running (2026-11-16...2026-11-18), 90 s so far'."""
    step = step_key.replace("__", "/")
    return f"    {since_began_s:7.1f} s  {step} running{f' ({days})' if days else ''}, {running_s:.0f} s so far"


class RunningSteps:
    """The steps running and since when; `due()` gives a line for each that has run HEARTBEAT_S (`every_s`) since it
    started or since its last line. Thread-safe: fed by a logger, asked by a thread of its own."""

    def __init__(self, every_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                 began: float | None = None) -> None:
        self.every_s = HEARTBEAT_S if every_s is None else every_s
        self.clock = clock
        self.began = clock() if began is None else began
        self._running: dict[str, tuple[str, float, float]] = {}  # step key -> (days, started, last said)
        self._lock = threading.Lock()

    def saw(self, event_type: str, step_key: str, days: str = "") -> None:
        """A step's event (Dagster's event type value: STEP_START, STEP_SUCCESS...); others are ignored."""
        with self._lock:
            if event_type in STARTED and step_key:
                now = self.clock()
                self._running[step_key] = (days, now, now)
            elif event_type in ENDED:
                self._running.pop(step_key, None)
            elif event_type in RUN_ENDED:
                self._running.clear()

    def steps(self) -> list[str]:
        """The steps running now."""
        with self._lock:
            return sorted(self._running)

    def due(self, early: float = 0.0) -> list[str]:
        """A line for each step running `every_s` since it started or was last said. `early`: up to this long before
        that, for a caller asking every `early` seconds, so that no step goes unsaid longer than `every_s` (asked
        every second, a line due at 30 s would otherwise come as late as 31 s)."""
        now = self.clock()
        lines = []
        with self._lock:
            for key, (days, started, said) in sorted(self._running.items()):
                if now - said >= self.every_s - early:
                    lines.append(running_line(key, days, now - self.began, now - started))
                    self._running[key] = (days, started, now)
        return lines


class _StepLines(logging.Handler):
    def __init__(self, stream, every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(level=logging.DEBUG)
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.steps = RunningSteps(every_s, clock, began=self.started)
        self._write = threading.Lock()
        self._ended = threading.Event()
        self._beating: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event")
        kind = getattr(event, "event_type_value", "")
        step_key = meta.get("step_key") or ""
        self.steps.saw(kind, step_key, days_of(meta.get("job_tags") or {}))
        if kind in STARTED and self._beating is None:
            self._beating = threading.Thread(target=self._beat, name="tokenledger-progress", daemon=True)
            self._beating.start()
        elif kind in RUN_ENDED:
            self._ended.set()
        outcome = _STEP_END.get(kind)
        if outcome is None:
            return
        step = step_key.replace("__", "/")
        self._say(f"    {self.clock() - self.started:7.1f} s  {step} {outcome}")

    def _say(self, line: str) -> None:
        with self._write:
            self.stream.write(line + "\n")
            self.stream.flush()

    def _beat(self) -> None:
        """Until the run ends: a line for each step that has run another HEARTBEAT_S (looked at 4 times as often, at
        most a second apart, and said up to that much early, so no step runs longer than HEARTBEAT_S unsaid)."""
        poll = min(1.0, self.steps.every_s / 4)
        while not self._ended.wait(poll):
            for line in self.steps.due(early=poll):
                self._say(line)


@dg.logger(description="One line per finished step on standard output, and one every 30 s per step still running "
                       "(tokenledger run's progress).")
def step_progress(init_context: dg.InitLoggerContext) -> logging.Logger:
    logger = logging.getLogger(f"tokenledger.progress.{id(init_context)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.handlers = [_StepLines(sys.stdout)]
    return logger
