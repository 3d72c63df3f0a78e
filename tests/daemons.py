"""Counting the Dagster daemons of a test's instances while commands run (at most one per instance is the rule,
pipelines/daemon.py)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path


def daemons(root: Path) -> int:
    """Dagster daemons alive on this machine whose workspace file is under `root` (`python -m dagster._daemon run -w
    <root>/.../workspace.yaml`): a home, or a folder holding several work folders."""
    found = subprocess.run(["pgrep", "-f", f"dagster._daemon run .*-w {root}/"], capture_output=True, text=True)
    return len(found.stdout.split())


def watch_daemons(root: Path, commands: Sequence[subprocess.Popen]) -> tuple[list[str], set[int]]:
    """Each command's output (stdout, text), read until all have ended, and every count of the daemons under `root`
    seen meanwhile, looked at twice a second."""
    outputs: list[str] = [""] * len(commands)

    def read(i: int) -> None:
        outputs[i] = commands[i].communicate(timeout=900)[0]

    readers = [threading.Thread(target=read, args=(i,)) for i in range(len(commands))]
    for reader in readers:
        reader.start()
    seen = set()
    while any(reader.is_alive() for reader in readers):
        seen.add(daemons(root))
        time.sleep(0.5)
    for reader in readers:
        reader.join()
    return outputs, seen
