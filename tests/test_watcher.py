"""What `tokenledger run --parallel` prints while it follows a run (pipelines/submitted.py, Watcher): a line per
finished step, and while a step runs, a line at least every STILL_RUNNING_S naming it and how long it has run."""

from __future__ import annotations

import re
import threading
import time

import dagster as dg
from tokenledger.pipelines.submitted import Watcher

released = threading.Event()


@dg.op
def slow_step() -> int:
    assert released.wait(120), "the test never saw the step running"
    return 1


@dg.job
def one_slow_step():
    slow_step()


def test_a_running_step_is_named_until_it_ends_then_its_end() -> None:
    lines: list[str] = []
    with dg.instance_for_test() as instance:
        run_id = "5eed0000-0000-4000-8000-000000000001"
        runner = threading.Thread(target=one_slow_step.execute_in_process,
                                  kwargs={"instance": instance, "run_id": run_id})
        watcher = Watcher(instance, write=lines.append, every_s=0.05)
        watcher.follow(run_id, "2026-11-16")
        runner.start()
        finished = []
        deadline = time.monotonic() + 120
        while not finished and time.monotonic() < deadline:
            finished = watcher.poll()
            if any("slow_step running" in line for line in lines):
                released.set()
            time.sleep(0.05)
        runner.join(60)
    assert [run for run, _ in finished] == [run_id] and finished[0][1].success
    running = [line for line in lines if "slow_step running" in line]
    assert running and re.fullmatch(r" +\d+\.\d s  slow_step running \(2026-11-16\), \d+ s so far", running[0]), lines
    done = [i for i, line in enumerate(lines) if line.split()[2:] == ["2026-11-16", "slow_step", "done"]]
    assert len(done) == 1 and lines.index(running[-1]) < done[0], lines
    # Before the step started, the lines say where the run is (submitted, queued, starting...).
    assert lines[0].endswith(", no step running"), lines
