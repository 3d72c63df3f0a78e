"""Steps on Celery workers (TOKENLEDGER_EXECUTOR=celery, pipelines/executors.py), end to end on real processes.

A real Redis (tests/redisserver.py, with a password) is the broker; two Celery workers of their own process
(`celery -A tokenledger.pipelines.celery_app worker`, one task at a time, so a step's pid is its worker's) serve a
generated home
of six days. `tokenledger run --parallel 2` submits two ranged runs of three days to the home's instance; its daemon
launches their orchestrating processes, which hand each step to the broker. The published tables must equal, row
for row, those of the same days run in one process on a copy of the home, and the instance's event log must show
steps executed by both workers, two steps of one run at once: the run is held (its day locks) by its orchestrating
process, not by each step, which would make the steps of one run wait on each other; a run whose day another holds
hands out no step until the day is free. A worker killed with SIGKILL in the middle of publishing a day leaves what
readers see as it was; the broker hands the step to another worker once its visibility timeout has passed, and that
worker publishes the day again. A broker that is gone fails a run before any step, with one line naming it and what
to check, and a step of a run of another home is refused. These start real brokers, workers and daemons,
so they run in `make test-distributed`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from tokenledger.pipelines.executors import (
    BROKER_ENV,
    EXECUTOR_ENV,
    HEARTBEAT_S,
    VISIBILITY_TIMEOUT_S,
    keep_visible,
)
from tokenledger.pipelines.resources import HELD_TAG, HOME_TAG
from tokenledger.pipelines.submitted import DAEMON_LOG

from tests.conftest import PROJECT_ROOT
from tests.redisserver import RedisServer, redis_server_fixture  # noqa: F401  (the fixture `redis_server`)
from tokenledger.catalog import PUBLISHED_TABLES, WHOLE_TABLES
from tokenledger.faults import VARIABLE as FAILPOINT
from tokenledger.storage.housekeeping import day_locks
from tokenledger.storage.layout import HomeLayout

pytestmark = pytest.mark.distributed

START, END = "2026-11-02", "2026-11-07"
WORKERS = ("tokenledger-a", "tokenledger-b")
READY_S = 60
# How soon a worker killed mid-step must be found and its step executed by another, with the default settings: the
# broker's visibility timeout (renewed every HEARTBEAT_S by a live worker) and a worker's look for such tasks.
DETECTED_S = 120


def tokenledger(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenledger.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


def celery_env(home: Path, broker: str) -> dict[str, str]:
    """What the command, the runs and the workers share: the home, its instance, the executor and the broker."""
    return {"TOKENLEDGER_HOME": str(home), "DAGSTER_HOME": str(home / ".dagster"), EXECUTOR_ENV: "celery",
            BROKER_ENV: broker}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("celery") / "home"
    done = tokenledger("generate", "--home", str(home), "--start", START, "--days", "6", "--requests-per-day", "100",
                       "--seed", "3", "--bad-rows-per-day", "0", "--canonical-only")
    assert done.returncode == 0, done.stderr
    return home


def copy_of(generated: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(generated, target, ignore=shutil.ignore_patterns(".dagster"))
    (target / ".dagster").mkdir()
    return target


@contextmanager
def celery_workers(env: dict[str, str], logs: Path, names: tuple[str, ...] = WORKERS
                   ) -> Iterator[dict[str, subprocess.Popen]]:
    """The workers `names`, each a `celery worker` process of its own executing one task at a time; their processes
    by name once each says it is ready, stopped (warm shutdown) after."""
    logs.mkdir(parents=True, exist_ok=True)
    started: dict[str, subprocess.Popen] = {}
    try:
        for name in names:
            with (logs / f"{name}.log").open("wb") as sink:
                started[name] = subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "tokenledger.pipelines.celery_app", "worker", "--hostname",
                     f"{name}@%h", "--pool", "solo", "--concurrency", "1", "--without-mingle", "--without-gossip",
                     "--loglevel", "INFO"],
                    cwd=PROJECT_ROOT, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=sink,
                    stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_S
        for name, process in started.items():
            log = logs / f"{name}.log"
            while not re.search(rf"\b{name}@\S+ ready\.", said := log.read_text(errors="replace")):
                assert process.poll() is None, f"worker {name} exited: {said[-3000:]}"
                assert time.monotonic() < deadline, f"worker {name} not ready within {READY_S} s: {said[-3000:]}"
                time.sleep(0.2)
        yield started
    finally:
        for process in started.values():
            process.terminate()
        for process in started.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def published(home: Path) -> dict[str, list[tuple]]:
    """Every published table's rows, the day of the day tables included (from their folders), in one order."""
    out = {}
    with duckdb.connect() as con:
        for ref in (*PUBLISHED_TABLES, *WHOLE_TABLES):
            folder = home / "exports" / ref.schema / ref.name
            if folder.is_dir():
                out[ref.qualified] = con.execute(
                    f"SELECT * FROM read_parquet('{folder}/**/*.parquet', hive_partitioning = true) ORDER BY ALL"
                ).fetchall()
    return out


@dataclass(frozen=True)
class Step:
    key: str
    pid: int
    worker: str
    started: float
    ended: float


@dataclass(frozen=True)
class Executed:
    run: dg.DagsterRun
    steps: list[Step]  # every step that succeeded: the process and Celery worker that executed it, and when
    waits: list[str]  # what the run logged while it waited for another run's day


@contextmanager
def instance_of(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    """The home's Dagster instance, as its processes open it (its event log's folder is read from DAGSTER_HOME)."""
    with monkeypatch.context() as patched:
        patched.setenv("DAGSTER_HOME", str(home / ".dagster"))
        with dg.DagsterInstance.get() as instance:
            yield instance


def executed(home: Path, monkeypatch: pytest.MonkeyPatch) -> list[Executed]:
    """Every run of the home's instance, from its event log."""
    out = []
    with instance_of(home, monkeypatch) as instance:
        for run in instance.get_runs():
            starts, ends, workers, waits = {}, {}, {}, []
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if "another run of" in (entry.user_message or ""):
                    waits.append(entry.user_message)
                if event is None:
                    continue
                if event.event_type_value == "STEP_START":
                    starts[entry.step_key] = (event.pid, entry.timestamp)
                elif event.event_type_value == "STEP_SUCCESS":
                    ends[entry.step_key] = entry.timestamp
                elif event.event_type_value == "ENGINE_EVENT" and "Celery worker" in event.engine_event_data.metadata:
                    workers[entry.step_key] = event.engine_event_data.metadata["Celery worker"].value
            out.append(Executed(run, [Step(key, pid, workers.get(key, ""), at, ends[key])
                                      for key, (pid, at) in starts.items() if key in ends], waits))
    return out


@pytest.fixture(scope="module")
def cluster(generated: Path, tmp_path_factory: pytest.TempPathFactory,
            redis_server: RedisServer) -> Iterator[tuple[Path, dict[str, str], dict[str, int]]]:
    """A copy of the generated home served by the two workers: the home, the environment its commands and workers
    share, the workers' pids by name."""
    home = copy_of(generated, tmp_path_factory.mktemp("cluster"), "home")
    env = celery_env(home, redis_server.url())
    with celery_workers(env, home.parent / "workers") as workers:
        yield home, env, {name: process.pid for name, process in workers.items()}


def test_a_backfill_on_two_celery_workers_publishes_what_one_process_publishes(
        cluster: tuple[Path, dict[str, str], dict[str, int]], generated: Path, tmp_path: Path,
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    spread, env, pids = cluster
    done = tokenledger("run", "--home", str(spread), "--start", START, "--end", END, "--parallel", "2", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    for day in ("2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06", "2026-11-07"):
        assert f"{day}  published" in done.stdout
    assert redis_server.password not in done.stdout + done.stderr
    alone = copy_of(generated, tmp_path, "alone")
    one = tokenledger("run", "--home", str(alone), "--start", START, "--end", END)
    assert one.returncode == 0, one.stdout + one.stderr

    tables_alone, tables_spread = published(alone), published(spread)
    assert {"finance.cost_per_mtok_daily", "infra.capacity_plan_daily", "focus.cost_and_usage_daily",
            "infra.capacity_trend"} <= {table for table, rows in tables_alone.items() if rows}
    assert set(tables_alone) == set(tables_spread) and len(tables_alone) == len(PUBLISHED_TABLES) + 2
    for table, rows in tables_alone.items():
        assert tables_spread[table] == rows, table

    runs = [r for r in executed(spread, monkeypatch) if "dagster/asset_partition_range_start" in r.run.tags]
    assert sorted((r.run.tags["dagster/asset_partition_range_start"], r.run.status.value) for r in runs) == [
        ("2026-11-02", "SUCCESS"), ("2026-11-05", "SUCCESS")]
    assert {r.run.tags[HOME_TAG] for r in runs} == {str(spread)}
    # Every step of both runs was executed by a worker, each worker executed some, and the worker named in the event
    # log is the process that executed the step.
    steps = [step for r in runs for step in r.steps]
    assert len(steps) > 40
    assert {s.pid for s in steps} == set(pids.values())
    assert {(s.worker.split("@")[0], s.pid) for s in steps} == set(pids.items())
    # The runs' own processes (launched by the daemon) held the runs: no step waited for a day lock, and in each run
    # two steps were executing at once, one on each worker.
    assert all(r.waits == [] for r in runs)
    assert all(any(a.pid != b.pid and a.started < b.ended and b.started < a.ended for a in r.steps for b in r.steps)
               for r in runs)


def test_a_run_hands_out_no_step_while_another_run_holds_its_day(
        cluster: tuple[Path, dict[str, str], dict[str, int]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The day lock keeps two runs of one day apart under Celery too: the run's orchestrating process takes it
    before handing out any step. Here the test holds the day, as another run of it would."""
    home, env, _ = cluster
    day = "2026-11-07"

    def this_run() -> list[Executed]:
        return [r for r in executed(home, monkeypatch) if r.run.tags.get("dagster/partition") == day]

    with (tmp_path / "run.log").open("w+") as said, day_locks(HomeLayout.of(home), [date.fromisoformat(day)]):
        command = subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "run", "--home", str(home), "--start",
                                    day, "--parallel", "1"], env={**os.environ, **env}, stdout=said,
                                   stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not any(r.waits for r in this_run()):
            assert command.poll() is None and time.monotonic() < deadline, said.read()
            time.sleep(0.5)
        released = time.time()
    assert command.wait(300) == 0, (tmp_path / "run.log").read_text()
    [run] = this_run()
    assert run.run.status == dg.DagsterRunStatus.SUCCESS
    assert run.waits == [f"another run of {day} is in progress; waiting for it to finish before computing the day"]
    assert run.steps and min(step.started for step in run.steps) > released


def what_readers_see(home: Path) -> tuple[str, dict[str, str]]:
    """The version `.published/current` names and the sha256 of every file readers reach under exports/ and
    reports/."""
    files = {}
    for top in ("exports", "reports"):
        for folder, _, names in os.walk(home / top, followlinks=True):
            for name in names:
                path = Path(folder, name)
                files[str(path.relative_to(home))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return os.readlink(home / ".published" / "current"), files


def test_a_worker_killed_while_publishing_leaves_the_day_as_it_was_and_another_worker_publishes_it(
        generated: Path, tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed with SIGKILL right before the day's publication switch leaves what readers see byte for byte
    as it was; the broker hands the step's task, never acknowledged, to the other worker once the visibility timeout
    has passed since the dead worker's last heartbeat (pipelines/executors.py, `celery_settings`; the default, 60 s),
    which says so in the run's event log and publishes the day again, and the command ends: all of it within 2
    minutes of the kill.

    Only the doomed worker (TOKENLEDGER_FAILPOINT=publish:before-switch) serves the run until it dies, so it is the
    one that takes the publish step; the other starts after. Their broker is a database of its own, away from the
    module's two workers."""
    day, doomed, survivor = "2026-11-04", "tokenledger-doomed", "tokenledger-survivor"
    home = copy_of(generated, tmp_path, "home")
    first = tokenledger("run", "--home", str(home), "--start", day,
                        env={"TOKENLEDGER_HOME": str(home), "DAGSTER_HOME": str(home / ".dagster")})
    assert first.returncode == 0, first.stdout + first.stderr
    before, rows = what_readers_see(home), published(home)
    assert before[1] and rows["finance.cost_per_mtok_daily"]
    env = celery_env(home, redis_server.url(db=1))  # the default visibility timeout
    logs = tmp_path / "workers"

    with (tmp_path / "run.log").open("w") as sink, \
            celery_workers({**env, FAILPOINT: "publish:before-switch"}, logs, (doomed,)) as doomed_worker:
        command = subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "run", "--home", str(home), "--start",
                                    day, "--parallel", "1"], env={**os.environ, **env}, stdout=sink,
                                   stderr=subprocess.STDOUT)
        try:
            assert doomed_worker[doomed].wait(180) == -signal.SIGKILL, (logs / f"{doomed}.log").read_text()
            killed, killed_at = time.monotonic(), time.time()
            assert what_readers_see(home) == before
            with celery_workers(env, logs, (survivor,)):
                # Nothing else of the run is left to execute: the survivor's first task is the publish step again.
                while "] received" not in (logs / f"{survivor}.log").read_text(errors="replace"):
                    assert what_readers_see(home) == before
                    assert command.poll() is None, (tmp_path / "run.log").read_text()
                    assert time.monotonic() - killed < DETECTED_S, "the publish step was not handed out again"
                    time.sleep(0.2)
                assert command.wait(max(1.0, DETECTED_S - (time.monotonic() - killed))) == 0, (
                    (tmp_path / "run.log").read_text())
                ended = time.monotonic() - killed
        finally:
            if command.poll() is None:  # a failed assertion: the command stops its runs and its daemon on SIGINT
                command.send_signal(signal.SIGINT)
                command.wait(60)
    said = (tmp_path / "run.log").read_text()
    assert f"{day}  published" in said and "FAILED" not in said

    # The day is published again, with the same rows, through a new version.
    after = what_readers_see(home)
    assert after[0] != before[0] and set(after[1]) == set(before[1])
    assert published(home) == rows
    [run] = [r for r in executed(home, monkeypatch) if any(step.worker for step in r.steps)]  # not the first run
    assert run.run.status == dg.DagsterRunStatus.SUCCESS
    with instance_of(home, monkeypatch) as instance:
        entries = instance.all_logs(run.run.run_id)
    handed = [(e.timestamp, e.dagster_event.engine_event_data.metadata["Celery worker"].value.split("@")[0])
              for e in entries if e.step_key == "publish__exports" and e.dagster_event and
              e.dagster_event.event_type_value == "ENGINE_EVENT" and
              "Celery worker" in e.dagster_event.engine_event_data.metadata]
    assert [worker for _, worker in handed] == [doomed, survivor]
    # Handed out again once the dead worker's last heartbeat (at most HEARTBEAT_S before the kill) is the visibility
    # timeout old, not before; the run done within DETECTED_S of the kill.
    assert VISIBILITY_TIMEOUT_S - HEARTBEAT_S - 2 < handed[1][0] - killed_at < DETECTED_S, (handed, killed_at)
    assert ended < DETECTED_S
    assert {s.worker.split("@")[0] for s in run.steps if s.key == "publish__exports"} == {survivor}
    # The survivor said, in the run's event log, which step it took over from which worker.
    [said_over] = [e.dagster_event.message for e in entries if e.dagster_event and e.dagster_event.event_type_value ==
                   "ENGINE_EVENT" and "tokenledger/handed over" in e.dagster_event.engine_event_data.metadata]
    assert re.fullmatch(rf"step publish/exports on worker {doomed}@\S+: no answer for {VISIBILITY_TIMEOUT_S} s; "
                        rf"handed to worker {survivor}@\S+", said_over), said_over
    # And the command printed it as it happened, before the step's end.
    printed = (tmp_path / "run.log").read_text()
    assert f"{day}  {said_over}\n" in printed, printed
    assert printed.index(said_over) < printed.index(f"{day}  publish/exports done"), printed


def test_a_live_worker_keeps_its_task_from_being_handed_out_again_and_a_dead_ones_is(
        redis_server: RedisServer) -> None:
    """The heartbeat (`keep_visible`) against the real broker: a task held unacknowledged for longer than twice the
    visibility timeout stays with its worker while the heartbeat beats, and goes back to the queue once it stops, as
    when its worker dies. A step may so run longer than the visibility timeout without being executed twice."""
    import threading

    from celery import Celery
    from kombu import Connection

    url, visibility = redis_server.url(db=2), 2
    app = Celery("heartbeat-test", broker=url)
    with Connection(url, transport_options={"visibility_timeout": visibility}) as connection:
        name = f"heartbeat-{uuid.uuid4().hex[:6]}"
        queue = connection.SimpleQueue(name)
        queue.put({"step": "publish__exports"})
        message = queue.get(timeout=5)  # taken, not acknowledged: in the broker's index of unacknowledged tasks
        channel = connection.default_channel
        qos = channel.qos

        def waiting() -> int:  # the queue's length (an empty queue is no key: qsize would say it does not exist)
            return channel.client.llen(name)
        stop = threading.Event()
        beat = threading.Thread(target=keep_visible, args=(app, message.delivery_tag, stop, 0.3))
        beat.start()
        try:
            deadline = time.monotonic() + 2.5 * visibility
            while time.monotonic() < deadline:
                qos.restore_visible(interval=1)  # what every worker does at each poll
                assert waiting() == 0, "handed out again while its worker lives"
                time.sleep(0.2)
        finally:
            stop.set()
            beat.join()
        deadline = time.monotonic() + visibility + 5
        while waiting() == 0:
            assert time.monotonic() < deadline, "a task without heartbeat was not handed out again"
            qos.restore_visible(interval=1)
            time.sleep(0.2)
        queue.clear()
        queue.close()


def test_a_broker_that_is_gone_fails_the_run_before_any_step_in_one_line(generated: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with RedisServer.start() as gone:
        pass  # started, then stopped: nothing answers on its port any more
    home = copy_of(generated, tmp_path, "home")
    reason = (f"cannot reach the Celery broker 127.0.0.1:{gone.port} that {BROKER_ENV} names (Error 111 connecting "
              f"to 127.0.0.1:{gone.port}. Connection refused.): check that the broker is running and accepts "
              "connections from this machine on that host and port (Redis: redis-cli -h HOST -p PORT ping) and the "
              f"URL in {BROKER_ENV}, then re-run; or unset {EXECUTOR_ENV} to execute the steps in the run's own "
              "process")
    # The command checks the broker before it submits anything: one line, exit 2, no run.
    done = tokenledger("run", "--home", str(home), "--start", START, "--parallel", "1",
                       env=celery_env(home, gone.url()))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {reason}\n")
    assert executed(home, monkeypatch) == []
    # A run launched otherwise (the schedule, the sensor, the UI: here the Dagster CLI) checks it too, before any
    # step, and fails with the same line.
    launched = subprocess.run([sys.executable, "-m", "dagster", "job", "execute",
                               "-m", "tokenledger.pipelines.definitions", "-j", "daily_pipeline",
                               "--tags", json.dumps({"dagster/partition": START})],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, **celery_env(home, gone.url())})
    said = launched.stdout + launched.stderr
    assert launched.returncode != 0 and gone.password not in said
    [run] = executed(home, monkeypatch)
    assert run.run.status == dg.DagsterRunStatus.FAILURE and run.steps == []
    with instance_of(home, monkeypatch) as instance:
        events = [e.dagster_event for e in instance.all_logs(run.run.run_id) if e.dagster_event]
    assert not any(e.event_type_value == "STEP_START" for e in events)
    failure = next(e for e in events if e.event_type_value == "PIPELINE_FAILURE").event_specific_data.error
    assert failure.message.strip() == f"tokenledger.errors.EnvironmentProblem: {reason}"
    assert not (home / "exports").exists() or not any((home / "exports").rglob("*.parquet"))


def test_a_broker_lost_mid_run_fails_the_run_naming_it_and_publishes_nothing(generated: Path, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker stopped while a step of the run executes on a worker: the run fails at once (its orchestrating
    process was waiting on the broker for the step's result), the command names the broker (never its password) and
    what to check, in one line under the failed day, and says nothing is published."""
    day, worker = "2026-11-03", "tokenledger-orphan"
    home = copy_of(generated, tmp_path, "home")
    logs = tmp_path / "workers"
    started = RedisServer.start()  # a broker of its own, stopped by the test
    broker = started.__enter__()
    stopped = False
    try:
        env = celery_env(home, broker.url())
        with (tmp_path / "run.log").open("w") as sink, celery_workers(env, logs, (worker,)):
            command = subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "run", "--home", str(home),
                                        "--start", day, "--parallel", "1"], env={**os.environ, **env}, stdout=sink,
                                       stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 180
                while "] received" not in (logs / f"{worker}.log").read_text(errors="replace"):
                    assert command.poll() is None, (tmp_path / "run.log").read_text()
                    assert time.monotonic() < deadline, "no step was handed to the worker"
                    time.sleep(0.2)
                started.__exit__(None, None, None)  # the broker gone in the middle of the run's first step
                stopped, lost = True, time.monotonic()
                try:
                    assert command.wait(120) == 1, (tmp_path / "run.log").read_text()
                except subprocess.TimeoutExpired:
                    daemon_log = home / ".dagster" / DAEMON_LOG
                    processes = subprocess.run(["ps", "-eo", "pid,ppid,etime,args", "--forest"], text=True,
                                               capture_output=True).stdout
                    pytest.fail("the command did not end within 120 s of the broker's loss; it said:\n"
                                + (tmp_path / "run.log").read_text() + "\nthe worker said:\n"
                                + (logs / f"{worker}.log").read_text(errors="replace")[-4000:]
                                + "\nthe daemon said:\n"
                                + (daemon_log.read_text(errors="replace")[-4000:] if daemon_log.exists() else "")
                                + "\nprocesses:\n" + "\n".join(line[:200] for line in processes.splitlines()
                                                              if "python" in line or "redis" in line))
                failed_within = time.monotonic() - lost
            finally:
                if command.poll() is None:
                    command.send_signal(signal.SIGINT)
                    command.wait(60)
    finally:
        if not stopped:
            started.__exit__(None, None, None)
    said = (tmp_path / "run.log").read_text()
    assert broker.password not in said and "Traceback" not in said
    failure = re.search(rf"^{day}  FAILED\n((?:    .*\n)+)", said, re.M)
    assert failure, said
    assert (f"    lost the Celery broker redis://127.0.0.1:{broker.port}/0 that {BROKER_ENV} names while the run's "
            "steps executed (") in failure.group(1), said
    assert ("check that the broker is running and reachable from this machine and the workers (Redis: redis-cli -h "
            "HOST -p PORT ping; its log, its memory limit), then re-run the run's days; a day its run had not "
            "published is left as it was\n") in failure.group(1), said
    assert "Published to" not in said and f"Nothing of {day} is published" in said
    assert failed_within < 60, failed_within
    [run] = executed(home, monkeypatch)
    assert run.run.status == dg.DagsterRunStatus.FAILURE
    assert not (home / "exports").exists() or not any((home / "exports").rglob("*.parquet"))


def test_a_step_refuses_a_run_of_another_home(home: Path) -> None:
    """A worker computes in the home its own TOKENLEDGER_HOME names: a step of a run of another home (the tags its
    orchestrating process gave the run) fails at once instead of computing there."""
    from tokenledger.pipelines.definitions import defs

    run_id = str(uuid.uuid4())
    result = defs.resolve_job_def("daily_pipeline").execute_in_process(
        run_id=run_id, partition_key="2026-11-16", tags={HOME_TAG: "/srv/ledger-elsewhere", HELD_TAG: run_id},
        raise_on_error=False, asset_selection=[dg.AssetKey(["core", "deployments_daily"])])
    assert not result.success
    refused = next(e for e in result.all_events if e.event_type_value == "RESOURCE_INIT_FAILURE")
    assert refused.event_specific_data.error.message.startswith(
        f"tokenledger.errors.LedgerError: run {result.run_id[:8]} computes the home /srv/ledger-elsewhere, but this "
        f"process's TOKENLEDGER_HOME is {home}: a worker computes in the home of its own environment")
    assert not (home / "lake").exists()
