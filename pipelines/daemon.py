"""The Dagster daemon a `tokenledger run --parallel` starts when its instance has none: one per instance, alive for as
long as any command or schedule still has runs waiting or running, then gone.

`python -m tokenledger.pipelines.daemon --workspace W` runs Dagster's daemon (`dagster._daemon run -w W`) and watches
the instance: once it has had no unfinished run (queued, starting, started, canceling) for IDLE_S, it stops the
daemon gracefully (SIGTERM: the code server lets the runs it launched finish) and wipes the heartbeats, so that the
next command starts a fresh one at once. It is started in a session of its own, so it outlives the command that
started it when another command's runs still need it, and no command has to stop it.

Commands decide whether to start one under a lock the whole instance shares (`instance_lock`: an advisory lock of
the Postgres instance, which every host of a deployment shares; a lock file beside the SQLite instance of a home):
two commands, on one host or two, never start two daemons (docs/adr/0110-one-daemon-per-instance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

# How long the daemon stays with nothing to run before it stops itself: well above the gap between a ranged run's
# failure and its days' submission one by one, or between two commands' submissions.
IDLE_S = 30.0
POLL_S = 2.0
UNFINISHED = ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING")


def unfinished_runs(instance) -> int:
    from dagster import DagsterRunStatus, RunsFilter

    return instance.get_runs_count(RunsFilter(statuses=[DagsterRunStatus[s] for s in UNFINISHED]))


def serve(workspace: Path, idle_s: float = IDLE_S) -> int:
    """Run the daemon until the instance has been idle for `idle_s`; its exit code."""
    from dagster import DagsterInstance

    process = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "--log-level", "warning",
                                "-w", str(workspace)], stdin=subprocess.DEVNULL)
    stopping = False

    def stop(_signum=None, _frame=None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with DagsterInstance.get() as instance:
        idle_since: float | None = None
        while process.poll() is None and not stopping:
            time.sleep(POLL_S)
            try:
                busy = unfinished_runs(instance) > 0
            except Exception:  # noqa: BLE001 - the instance's storage hiccuped: look again, never stop on it
                busy = True
            idle_since = None if busy else (idle_since or time.monotonic())
            if idle_since is not None and time.monotonic() - idle_since >= idle_s:
                break
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Its last heartbeat would read as a live daemon for a minute: the next command starts one at once.
        with contextlib.suppress(Exception):
            instance.wipe_daemon_heartbeats()
    return process.returncode or 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokenledger.pipelines.daemon", description=__doc__.split("\n")[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--idle-s", type=float, default=IDLE_S)
    args = parser.parse_args(argv)
    return serve(args.workspace, args.idle_s)


if __name__ == "__main__":
    sys.exit(main())
