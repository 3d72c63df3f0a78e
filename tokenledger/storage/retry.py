"""The one way tokenledger tries again: a loop over `attempts(...)` whose body returns (or breaks) on success and
continues on a failure worth another try; the loop's end (its `else`) is where it gives up, with its own message."""

from __future__ import annotations

import time
from collections.abc import Iterator


def attempts(count: int | None = None, *, within_s: float | None = None, pause_s: float = 0.0,
             most_s: float = float("inf")) -> Iterator[int]:
    """Attempt numbers 0, 1, 2...: at most `count` of them, and none more once `within_s` seconds have passed since
    the first. After each attempt it sleeps `pause_s`, doubled each time up to `most_s` (so that processes
    contending for one thing spread out)."""
    deadline = None if within_s is None else time.monotonic() + within_s
    pause = pause_s
    attempt = 0
    while count is None or attempt < count:
        yield attempt
        attempt += 1
        if deadline is not None and time.monotonic() > deadline:
            return
        if pause > 0:
            time.sleep(pause)
            pause = min(pause * 2, most_s)
