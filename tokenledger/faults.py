"""Fault injection for the test suite: kill the process at a named point, as `kill -9` would.

`TOKENLEDGER_FAILPOINT=<name>` in a run's environment makes `failpoint(<name>)` end the process with SIGKILL
there: no cleanup, no `finally`, exactly what an operator's kill or an out-of-memory kill does. Unset (always, in
production), a failpoint is one dictionary lookup. The points are where a kill could leave a mixed or orphaned
state: tests/test_faults.py kills a run at each and checks that what readers see is unchanged and that the next
run completes.

`TOKENLEDGER_FAILPOINT=<name>:raise` raises FailpointError there instead: a step that fails the way a bug fails it
(an exception with a traceback), for the tests of what a failed step leaves published.

`TOKENLEDGER_FAILPOINT=<name>:wait:<file>` pauses there: it writes `<file>.reached`, then waits until `<file>`
exists (at most WAIT_S), for the tests of what happens to a run while it is paused (its lock taken away).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

VARIABLE = "TOKENLEDGER_FAILPOINT"
WAIT_S = 600.0


class FailpointError(RuntimeError):
    """Raised at a failpoint named with `:raise`."""


def failpoint(name: str) -> None:
    """Kill this process now if the environment names this point (raise FailpointError for `<name>:raise`)."""
    wanted = os.environ.get(VARIABLE)
    if wanted is None:
        return
    if wanted == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if wanted == f"{name}:raise":
        raise FailpointError(f"failpoint {name} reached ({VARIABLE}={wanted})")
    if wanted.startswith(f"{name}:wait:"):
        release = Path(wanted[len(f"{name}:wait:"):])
        release.with_name(release.name + ".reached").touch()
        deadline = time.monotonic() + WAIT_S
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
