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
# How long the daemon keeps going while its instance's storage does not answer (a Postgres failover takes well under
# this): after that it stops, as nothing can be run without it, and the next command starts a fresh one.
UNREACHABLE_S = 300.0
UNFINISHED = ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING")


def unfinished_runs(instance) -> int:
    from dagster import DagsterRunStatus, RunsFilter

    return instance.get_runs_count(RunsFilter(statuses=[DagsterRunStatus[s] for s in UNFINISHED]))


def serve(workspace: Path, idle_s: float = IDLE_S, unreachable_s: float = UNREACHABLE_S) -> int:
    """Run the daemon until the instance has been idle for `idle_s`, or its storage has not answered for
    `unreachable_s`; its exit code."""
    from dagster import DagsterInstance

    stopping = False

    def stop(_signum=None, _frame=None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # The instance first: one whose storage cannot be opened fails here, before a daemon is started that nothing
    # would stop.
    with DagsterInstance.get() as instance:
        process = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "--log-level", "warning",
                                    "-w", str(workspace)], stdin=subprocess.DEVNULL)
        idle_since: float | None = None
        unanswered_since: float | None = None
        grace_s = 120.0  # for the runs the code server launched to finish
        while process.poll() is None and not stopping:
            time.sleep(POLL_S)
            try:
                busy = unfinished_runs(instance) > 0
                unanswered_since = None
            except Exception as exc:  # noqa: BLE001 - the instance's storage hiccuped: look again, unless it is gone
                busy = True
                unanswered_since = unanswered_since or time.monotonic()
                if time.monotonic() - unanswered_since >= unreachable_s:
                    while exc.__cause__ is not None:  # the driver's own words ("database ... does not exist")
                        exc = exc.__cause__
                    print(f"tokenledger daemon: the instance's storage has not answered for {unreachable_s:.0f} s "
                          f"({' '.join(str(exc).split())[:300]}): stopping; the next command starts a daemon again",
                          file=sys.stderr, flush=True)
                    grace_s = 10.0  # nothing can end gracefully without the storage
                    break
            idle_since = None if busy else (idle_since or time.monotonic())
            if idle_since is not None and time.monotonic() - idle_since >= idle_s:
                break
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(grace_s)
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
    parser.add_argument("--unreachable-s", type=float, default=UNREACHABLE_S)
    args = parser.parse_args(argv)
    return serve(args.workspace, args.idle_s, args.unreachable_s)


if __name__ == "__main__":
    sys.exit(main())
