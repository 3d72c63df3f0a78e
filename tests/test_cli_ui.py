"""`tokenledger ui` stops cleanly: a SIGTERM to the command (or one Ctrl-C) ends `dagster dev`, its webserver,
daemon and code servers, and the port is free afterwards; Dagster's preview warning for the partitioned checks
tokenledger chose is not printed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, make_home

# `dagster dev` started for real (its webserver, daemon and code server): make test-distributed.
pytestmark = pytest.mark.distributed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_one_signal_ends_the_ui_and_frees_its_port(sig: signal.Signals, tmp_path: Path) -> None:
    home = make_home(tmp_path / "home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "PYTEST_CURRENT_TEST")}
    # In a group of its own, as a shell runs a command: the test then sees everything the command started.
    ui = subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "ui", "--home", str(home), "--port", str(port)],
                          cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not _listening(port):
            assert ui.poll() is None, ui.stdout.read()
            assert time.monotonic() < deadline, "the UI did not listen within 120 s"
            time.sleep(0.5)
        ui.send_signal(sig)  # to the command alone, not its group
        ui.wait(timeout=60)
        deadline = time.monotonic() + 30
        while (_listening(port) or _group_alive(ui.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _listening(port), "the port is still served after the command ended"
        # dagster dev's own processes are in the command's child group; none is left
        children = subprocess.run(["pgrep", "-f", f"dagster.*-p {port}"], capture_output=True, text=True).stdout
        assert children.strip() == "", children
        output = ui.stdout.read()
        assert ui.returncode == 0, output
        assert "PreviewWarning" not in output, output
    finally:
        if ui.poll() is None:
            os.killpg(ui.pid, signal.SIGKILL)
        subprocess.run(["pkill", "-9", "-f", f"dagster.*-p {port}"], check=False)
