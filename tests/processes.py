"""Other processes for the operations tests, forked from a server that has already imported the pipeline.

The operations tests run `tokenledger run` and `dagster asset materialize` in processes of their own: killed at
a failpoint, run four at once, holding the warehouse. A new Python process spends 4-5 s of CPU importing Dagster,
the definitions and Great Expectations before its run does anything, and a dozen such processes were a sixth of the
suite's CPU on 2 cores. These are forked instead from a multiprocessing fork server that imported them once
(tests/preload.py): each is still a process of its own (its own PID, DuckDB, Dagster instance and file locks,
killed by SIGKILL as any other), running the same entry point (`tokenledger.cli.main`, Dagster's CLI) with the
environment and working folder given, its stdout and stderr in one file. `spawn` returns an object with the
`subprocess.Popen` methods the tests use.

The entry points themselves still start fresh interpreters: `python -m tokenledger.cli` in
tests/test_faults_operations.py (a bad start date, which the definitions refuse as they are imported), and the
`dagster` executable in `make test` (`dagster definitions validate`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_CONTEXT: Any = None


def _context() -> Any:
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["tests.preload"])
    return _CONTEXT


def _child(entry: str, argv: list[str], env: dict[str, str], cwd: str, output: str) -> None:
    """The forked process: the environment and folder it was given, stdout and stderr to `output`, then the
    entry point; its exit code is the command's."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own stdout
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if entry == "tokenledger":
        from tokenledger.cli import main

        sys.exit(main(argv))
    from dagster._cli import main as dagster_main  # what the `dagster` executable runs

    sys.argv = ["dagster", *argv]
    sys.exit(dagster_main())


class Forked:
    """What the tests use of `subprocess.Popen`, for a forked process whose output is one text file."""

    def __init__(self, entry: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        fd, self._output = tempfile.mkstemp(prefix="tokenledger-forked-", suffix=".log")
        os.close(fd)
        self.args = [entry, *argv]
        self._process = _context().Process(target=_child, args=(entry, argv, env, str(cwd), self._output),
                                           daemon=False)
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._process.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        try:
            return Path(self._output).read_text(errors="replace"), None
        finally:
            Path(self._output).unlink(missing_ok=True)

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn(entry: str, argv: list[str], env: dict[str, str], cwd: Path) -> Forked:
    """Run `tokenledger <argv>` (entry 'tokenledger') or `dagster <argv>` (entry 'dagster') in a forked
    process with exactly `env` as its environment and `cwd` as its folder."""
    if entry not in ("tokenledger", "dagster"):
        raise ValueError(entry)
    return Forked(entry, argv, env, cwd)
