"""Runs submitted to the home's Dagster instance, for `tokenledger run --parallel N`.

Without `--parallel`, `tokenledger run` executes each run in its own process (`execute_in_process`), as it always
has. With it, each run is created in the instance and submitted to it like a run launched from the UI: the
instance's run coordinator queues it (Dagster's QueuedRunCoordinator, bounded by the instance's
`max_concurrent_runs`), its daemon dequeues it, and its run launcher starts it where the deployment says (the
DefaultRunLauncher: a process on this machine; a K8sRunLauncher: a pod). The run's steps run on the executor that
`TOKENLEDGER_EXECUTOR` selects (pipelines/definitions.py): in one process, in a process per step, or on Celery
workers. This module only submits, waits and reads the event log back; it schedules nothing itself beyond keeping at
most N of its own runs submitted and unfinished at once.

When no daemon of the instance is alive (no recent heartbeat of its run queue), one is started for the command's
duration and stopped after (`QueueDaemon`); a daemon already serving the instance (`tokenledger ui`, a
deployment's, another command's) is used as it is.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from tokenledger.pipelines.daemon import unfinished_runs
from tokenledger.pipelines.instance import CODE_LOCATION, DEFINITIONS_MODULE, workspace_file
from tokenledger.pipelines.progress import HANDED_OVER, HEARTBEAT_S, RunningSteps

from tokenledger.errors import EnvironmentProblem
from tokenledger.storage.housekeeping import instance_lock

JOB = "daily_pipeline"
QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
POLL_S = 0.5
# A daemon is alive when its last heartbeat is this recent (Dagster's own tolerance is 30 s past a 30 s interval).
DAEMON_FRESH_S = 60.0
# How long a started daemon may take to send its first heartbeat before the command gives up on it.
DAEMON_START_S = 120.0
DAEMON_LOG = "tokenledger-daemon.log"
_STEP_END = {"STEP_SUCCESS": "done", "STEP_FAILURE": "FAILED"}
# While a run is unfinished, a line says what it is doing at least this often (a step that takes minutes, a run
# waiting in the queue or for another run's day): the in-process runs' heartbeat.
STILL_RUNNING_S = HEARTBEAT_S


@dataclass
class SubmittedResult:
    """What `execute_in_process` returns, as far as tokenledger run reads it: success and the run's events."""

    run_id: str
    success: bool
    all_events: list[Any] = field(default_factory=list)


def span_tags(first: date, last: date) -> dict[str, str]:
    """A run's partition tags: one day, or a range that each step walks in order."""
    if first == last:
        return {"dagster/partition": first.isoformat()}
    return {"dagster/asset_partition_range_start": first.isoformat(),
            "dagster/asset_partition_range_end": last.isoformat()}


def daemon_alive(instance) -> bool:
    beat = instance.get_daemon_heartbeats().get(QUEUE_DAEMON)
    return beat is not None and time.time() - beat.timestamp <= DAEMON_FRESH_S


class QueueDaemon:
    """The Dagster daemon dequeuing the instance's runs, for as long as this command has runs to follow.

    `ensure()`, called at every poll, uses the daemon already serving the instance (`tokenledger ui`'s, a
    deployment's, another command's, on this host or another) and starts one only when none is alive, under a lock
    the whole instance shares (`instance_lock`), so that two commands never start two. The one started is
    pipelines/daemon.py's, in a session of its own: it stops by itself once the instance has no unfinished run, so it
    outlives this command when another command's runs still need it. `stop()` stops it at once when nothing is left
    for it to do (the runs' environment is the command's that started it: the next command starts its own)."""

    def __init__(self, instance, log: Callable[[str], None] = print) -> None:
        self.instance = instance
        self.log = log
        self.process: subprocess.Popen | None = None
        self.log_file = Path(os.environ["DAGSTER_HOME"]) / DAEMON_LOG

    def ensure(self) -> None:
        if daemon_alive(self.instance):
            return
        if self.process is not None and self.process.poll() not in (None, 0):
            self._started_badly("exited")
        with instance_lock("dagster daemon start", Path(os.environ["DAGSTER_HOME"]) / ".daemon.lock"):
            if daemon_alive(self.instance):
                return
            self.log("starting the Dagster daemon of this instance (none was running); it stops once no run is "
                     "left for it")
            # The daemon loads the code location by module from the instance's workspace file (as `tokenledger
            # ui`), from any folder, an installed package's as a checkout's. Its output (and its runs' console
            # logs) goes to a file: a pipe nobody reads would fill and stall it. A session of its own: the
            # terminal's Ctrl-C reaches this command, which asks its runs to stop.
            with self.log_file.open("ab") as sink:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "tokenledger.pipelines.daemon",
                     "--workspace", str(workspace_file(Path(self.instance.root_directory)))],
                    start_new_session=True, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
            deadline = time.monotonic() + DAEMON_START_S
            while not daemon_alive(self.instance):
                if self.process.poll() is not None:
                    self._started_badly("exited at start")
                if time.monotonic() > deadline:
                    raise EnvironmentProblem(f"the Dagster daemon sent no heartbeat within {DAEMON_START_S:.0f} s: "
                                             "check the instance's storage (DAGSTER_HOME's dagster.yaml) and "
                                             f"{self.log_file}, or run without --parallel")
                time.sleep(POLL_S)

    def _started_badly(self, what: str) -> None:
        said = self.log_file.read_text(errors="replace").strip().splitlines()[-2:]
        raise EnvironmentProblem(f"the Dagster daemon that dequeues submitted runs {what} ("
                                 + " / ".join(line.strip() for line in said) + f"; all of it in {self.log_file}): "
                                 "fix what it says, or run without --parallel")

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop the daemon this command started, when the instance has no unfinished run left (another command's
        would still need it: it then stops by itself once they are done). The command waits `grace_s` for it, no
        longer: a daemon still stopping then (its code server waits for the processes of the runs it launched to
        exit) finishes by itself, killing its Dagster daemon after pipelines/daemon.py's grace, and wipes its
        heartbeats; a command starting meanwhile starts a fresh one once they are wiped."""
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is not None:
            return
        try:
            left = unfinished_runs(self.instance)
        except Exception:  # noqa: BLE001 - the instance cannot say: leave the daemon to stop by itself
            left = 1
        if left:
            self.log(f"the Dagster daemon keeps serving {left} unfinished run(s) of other commands; it stops by "
                     "itself once they are done")
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()  # the watcher stops the daemon gracefully and wipes its heartbeats
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.log(f"the Dagster daemon is still stopping after {grace_s:.0f} s (the processes of its runs are "
                     f"ending); it stops by itself, its log is {self.log_file}")


@contextmanager
def workspace(instance) -> Iterator[Any]:
    """The project's code location as the instance's daemon and UI load it (its module, named CODE_LOCATION)."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import ModuleTarget

    target = ModuleTarget(module_name=DEFINITIONS_MODULE, attribute=None, working_directory=None,
                          location_name=CODE_LOCATION)
    with WorkspaceProcessContext(instance, target,
                                 code_server_log_level="WARNING") as context:
        request = context.create_request_context()
        errors = request.get_code_location_error(CODE_LOCATION)
        if errors:
            raise EnvironmentProblem(f"the code location {CODE_LOCATION} did not load: {errors.message.strip()}")
        yield context


def submit(instance, context, tags: Mapping[str, str], run_config: Mapping[str, Any]) -> str:
    """Create a run of the daily job with `tags` and submit it to the instance's run coordinator; its run id."""
    from dagster._core.definitions.selector import JobSubsetSelector

    request = context.create_request_context()
    location = request.get_code_location(CODE_LOCATION)
    repository = next(iter(location.get_repositories().values()))
    selector = JobSubsetSelector(location_name=location.name, repository_name=repository.name, job_name=JOB,
                                 op_selection=None)
    remote_job = location.get_job(selector)
    plan = location.get_execution_plan(remote_job, run_config, step_keys_to_execute=None, known_state=None,
                                       instance=instance)
    run = instance.create_run(
        job_name=JOB, run_id=None, run_config=run_config, resolved_op_selection=None,
        step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute, op_selection=None, status=None,
        root_run_id=None, parent_run_id=None, tags={**remote_job.tags, **tags}, job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot, parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(), job_code_origin=remote_job.get_python_origin(),
        asset_selection=None, asset_check_selection=None, asset_graph=repository.asset_graph)
    instance.submit_run(run.run_id, request)
    return run.run_id


class Watcher:
    """Follows submitted runs through the instance: prints a line per finished step, returns finished runs."""

    def __init__(self, instance, write=print, every_s: float = STILL_RUNNING_S) -> None:
        self.instance = instance
        self.write = write
        self.every_s = every_s
        self.cursors: dict[str, int | None] = {}
        self.labels: dict[str, str] = {}
        self.running: dict[str, RunningSteps] = {}  # run -> its steps running (pipelines/progress.py)
        self.said: dict[str, float] = {}  # run -> when a line last said something of it
        self.started = time.monotonic()

    def follow(self, run_id: str, label: str) -> None:
        self.cursors[run_id] = None
        self.labels[run_id] = label
        self.running[run_id] = RunningSteps(self.every_s, began=self.started)
        self.said[run_id] = time.monotonic()

    @property
    def pending(self) -> int:
        return len(self.cursors)

    def poll(self) -> list[tuple[str, SubmittedResult]]:
        """One look at every followed run: new step lines printed; the runs that finished since (id, result)."""
        from dagster import DagsterEventType
        from dagster._core.storage.dagster_run import FINISHED_STATUSES, DagsterRunStatus

        finished = []
        for run_id in list(self.cursors):
            run = self.instance.get_run_by_id(run_id)  # before the steps: a finished run's steps are all recorded
            steps = self.instance.get_records_for_run(
                run_id, cursor=self.cursors[run_id], of_type={DagsterEventType.STEP_START,
                                                              DagsterEventType.STEP_SUCCESS,
                                                              DagsterEventType.STEP_FAILURE,
                                                              DagsterEventType.ENGINE_EVENT})
            if steps.records:
                self.cursors[run_id] = steps.cursor
            now = time.monotonic()
            for record in sorted(steps.records, key=lambda r: r.storage_id):
                event = record.event_log_entry.dagster_event
                if event.event_type_value == "ENGINE_EVENT":
                    if HANDED_OVER in event.engine_event_data.metadata:  # a worker went silent: said as it happens
                        self.write(f"    {now - self.started:7.1f} s  {self.labels[run_id]}  {event.message}")
                    continue
                self.running[run_id].saw(event.event_type_value, event.step_key or "", self.labels[run_id])
                if event.event_type_value == "STEP_START":
                    continue
                self.said[run_id] = now
                step = (event.step_key or "").replace("__", "/")
                self.write(f"    {now - self.started:7.1f} s  {self.labels[run_id]}  {step} "
                           f"{_STEP_END[event.event_type_value]}")
            if run is None or run.status not in FINISHED_STATUSES:
                due = self.running[run_id].due()
                for line in due:
                    self.write(line)
                if due:
                    self.said[run_id] = now
                elif now - self.said[run_id] >= self.every_s and not self.running[run_id].steps():
                    self.said[run_id] = now  # waiting: in the queue, for its run worker, for another run's day
                    self.write(f"    {now - self.started:7.1f} s  {self.labels[run_id]}  "
                               f"{run.status.value.lower() if run is not None else 'submitted'}, no step running")
            if run is not None and run.status in FINISHED_STATUSES:
                events = [entry.dagster_event for entry in self.instance.all_logs(run_id) if entry.dagster_event]
                finished.append((run_id, SubmittedResult(run_id, run.status == DagsterRunStatus.SUCCESS, events)))
                for done in (self.cursors, self.labels, self.running, self.said):
                    del done[run_id]
        return finished


def runs_holding(instance, since: datetime) -> dict[date, str]:
    """The days other runs of the daily job have taken (any command's, the schedule's, the UI's), each with its
    run's id: those of unfinished runs, and those of runs that succeeded since `since` (when the command started:
    what another command published meanwhile is not run again)."""
    from dagster import DagsterRunStatus, RunsFilter
    from tokenledger.pipelines.daemon import UNFINISHED
    from tokenledger.pipelines.resources import run_days

    held: dict[date, str] = {}
    for runs in (RunsFilter(job_name=JOB, statuses=[DagsterRunStatus[s] for s in UNFINISHED]),
                 RunsFilter(job_name=JOB, statuses=[DagsterRunStatus.SUCCESS], created_after=since)):
        for run in instance.get_runs(runs):
            for day in run_days(run.tags):
                held.setdefault(day, run.run_id)
    return held


def _pieces(first: date, last: date, held: Mapping[date, str]) -> list[tuple[date, date, str | None]]:
    """[first, last] cut where the runs of `held` take over: (first, last, the run computing them, or None)."""
    out: list[tuple[date, date, str | None]] = []
    for day in _days(first, last):
        owner = held.get(day)
        if out and out[-1][2] == owner and out[-1][1] == day - timedelta(days=1):
            out[-1] = (out[-1][0], day, owner)
        else:
            out.append((day, day, owner))
    return out


def run_submitted(instance, chunks: list[tuple[date, date]], parallel: int, run_config: Mapping[str, Any],
                  published: Callable[[date, date, Any, str | None], None], failed: dict[date, list[str]],
                  failure_messages: Callable[[Any], list[str]], since: datetime | None = None) -> None:
    """Submit the runs of `chunks`, keeping at most `parallel` of them unfinished, until every day is published or
    failed. A ranged run that fails published nothing: its days are submitted again, one run each (the rule of
    `tokenledger run`).

    A day that a run of the instance already computes (another command's, on this host or another), or published
    since `since` (the command's start), is not submitted again: that run is followed instead, and its outcome is
    the day's (checked and submitted under one lock of the instance, so two commands never both submit a day).
    `published(first, last, result, by)` is called per successful run, `by` the id of a run another command
    submitted (None for this command's own); a failed day's messages go into `failed`."""
    waiting = deque(chunks)
    since = since or datetime.now(UTC)
    spans: dict[str, tuple[date, date]] = {}
    own: set[str] = set()
    submit_lock = Path(os.environ["DAGSTER_HOME"]) / ".submit.lock"
    daemon = QueueDaemon(instance, log=lambda text: print(text, flush=True))
    with workspace(instance) as context:
        watcher = Watcher(instance, write=lambda text: print(text, flush=True))
        try:
            while waiting or watcher.pending:
                daemon.ensure()
                while waiting and len(own & set(watcher.cursors)) < parallel:
                    first, last = waiting.popleft()
                    with instance_lock("submit", submit_lock):
                        held = {day: run for day, run in runs_holding(instance, since).items() if run not in own}
                        for a, b, other in _pieces(first, last, held):
                            label = _label(a, b)
                            if other is not None:
                                if other not in watcher.cursors:
                                    watcher.follow(other, label)
                                    spans[other] = (a, b)
                                else:  # already followed for an earlier piece: widen its span
                                    spans[other] = (min(spans[other][0], a), max(spans[other][1], b))
                                print(f"{label}  already taken by run {other[:8]} (another command's): following it "
                                      "instead of running the days again", flush=True)
                                continue
                            run_id = submit(instance, context, span_tags(a, b), run_config)
                            own.add(run_id)
                            spans[run_id] = (a, b)
                            watcher.follow(run_id, label)
                            print(f"{label}  submitted as run {run_id[:8]}" + (
                                "" if a == b else f" ({(b - a).days + 1} days, one run)"), flush=True)
                for run_id, result in watcher.poll():
                    first, last = spans.pop(run_id)
                    by = None if run_id in own else run_id
                    if result.success:
                        published(first, last, result, by)
                    elif first != last or (by is not None and not _single_day(instance, run_id)):
                        print(f"{_label(first, last)}  a day failed in the ranged run"
                              + ("" if by is None else f" {run_id[:8]} (another command's)")
                              + ", so none of it was published: "
                              "running its days one by one to publish the good ones and name the failed ones",
                              flush=True)
                        waiting.extend((day, day) for day in _days(first, last))
                    else:
                        failed[first] = failure_messages(result) or [_ended(result)]
                        print(f"{first}  FAILED" + ("" if by is None else f" (in run {run_id[:8]}, another "
                                                                          "command's)"))
                        for message in failed[first]:
                            print("    " + message.replace("\n", "\n    "))
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            mine = [run_id for run_id in watcher.cursors if run_id in own]
            for run_id in mine:
                with contextlib.suppress(Exception):
                    instance.run_coordinator.cancel_run(run_id)
            print(f"interrupted: {len(mine)} submitted run(s) asked to stop; nothing of them is published "
                  "unless it finished", flush=True)
            raise
        finally:
            daemon.stop()


def _single_day(instance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id)
    return run is not None and "dagster/partition" in run.tags


def _ended(result: SubmittedResult) -> str:
    """Why a run failed when none of its steps said so: its process died (killed, out of memory), as the code
    server or the run monitoring recorded it, or else where to look."""
    import re

    for event in result.all_events:
        found = re.search(r"(terminated by signal (\d+) \((\w+)\)|unexpectedly exited with code (-?\d+))",
                          event.message or "")
        if found:
            how = (f"signal {found.group(2)}, {found.group(3)}" if found.group(2) else f"exit code {found.group(4)}")
            return (f"run {result.run_id[:8]}: its process ended without finishing ({how}: killed, or out of "
                    "memory); nothing of its days was published. Re-run them; its event log is in the Dagster UI "
                    "(tokenledger ui).")
    return f"run {result.run_id[:8]} failed; open the Dagster UI (tokenledger ui) for its event log"


def _label(first: date, last: date) -> str:
    return first.isoformat() if first == last else f"{first}...{last}"


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
