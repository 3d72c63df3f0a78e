"""Fault injection for the test suite: kill the process at a named point, as `kill -9` would.

`TOKENLEDGER_FAILPOINT=<name>` in a run's environment makes `failpoint(<name>)` end the process with SIGKILL
there: no cleanup, no `finally`, exactly what an operator's kill or an out-of-memory kill does. Unset (always, in
production), a failpoint is one dictionary lookup. The points are where a kill could leave a mixed or orphaned
state: tests/test_faults.py kills a run at each and checks that what readers see is unchanged and that the next
run completes.
"""

from __future__ import annotations

import os
import signal

VARIABLE = "TOKENLEDGER_FAILPOINT"


def failpoint(name: str) -> None:
    """Kill this process now if the environment names this point."""
    if os.environ.get(VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
