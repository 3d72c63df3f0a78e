"""Lock files shared by the processes of one machine: an exclusive `flock` on a file, which the kernel releases when
its holder dies, so a killed process never blocks the next one."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def acquire(path: Path, blocking: bool = True) -> IO[str] | None:
    """Hold the lock of `path` (created if needed) until the returned handle is closed; without `blocking`, None
    when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        handle.close()
        return None
    return handle


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the lock of `path` for the block, waiting for it as long as another process holds it."""
    handle = acquire(path)
    try:
        yield
    finally:
        # Released explicitly, not only by closing: a child process that inherited the descriptor keeps it open.
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
