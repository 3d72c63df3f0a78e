"""Errors a user can act on.

A `LedgerError` is a problem with the user's data or configuration, not with tokenledger: its message names the
file (and line or row, field and rule where there is one) and says what to do. Assets turn it into a Dagster
`Failure` and the CLI prints it without a traceback.
"""


class LedgerError(Exception):
    """A fatal problem in the landing zone or the configuration, described for the person who can fix it."""


class ConfigError(LedgerError):
    """A configuration file is missing, is not valid YAML, or breaks its contract."""


class InputFileError(LedgerError):
    """An input file cannot be read at all (corrupt, wrong format); row-level problems are quarantined instead."""


class EnvironmentProblem(LedgerError):
    """The machine, not the data: a full disk, a folder that cannot be written, DuckDB's memory limit reached."""


# (what the message says, errno values, what to tell the user); the first that matches anywhere in the chain wins.
_PROBLEMS = (
    (("No space left on device", "Disk quota exceeded", "database or disk is full"), (28, 122),
     "the disk is full ({cause}) while {where}. Free space on the disk that holds it (the home, or its tmp/ "
     "folder where DuckDB spills), then re-run: nothing half-written was published."),
    (("Read-only file system", "Permission denied"), (13, 30),
     "cannot write ({cause}) while {where}. tokenledger writes its lake, exports, locks and run history inside "
     "the home: make it writable (keep raw/ read-only with TOKENLEDGER_RAW_DIR if you like), then re-run."),
    (("Out of Memory Error",), (),
     "DuckDB reached its memory limit ({cause}) while {where}: this step holds more of the day in memory than the "
     "limit allows. Raise it (TOKENLEDGER_DUCKDB_MEMORY_LIMIT, e.g. 8GB, or the ledger resource's "
     "duckdb_memory_limit; the machine's memory permitting), then re-run: nothing half-written was published."),
    (("disk I/O error", "Input/output error"), (5,),
     "the disk failed to read or write ({cause}) while {where}; it may be full or failing. Check it (df -h, "
     "dmesg), then re-run: nothing half-written was published."),
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def environment_problem(exc: BaseException, where: str) -> EnvironmentProblem | None:
    """An actionable message when `exc` (or what caused it) is a full disk, an unwritable folder or DuckDB's memory
    limit reached, else None.

    DuckDB and SQLite report these as text deep in their own errors ("IO Error: Could not write file ...: No space
    left on device"), so the cause is looked for in the message of every exception of the chain, and the line that
    names it is kept whole."""
    chain = _chain(exc)
    for needles, numbers, template in _PROBLEMS:
        for error in chain:
            text = str(error).strip()
            found = next((n for n in needles if n in text), None)
            if found is None and getattr(error, "errno", None) not in numbers:
                continue
            lines = text.splitlines() or [repr(error)]
            cause = next((line.strip() for line in lines if found and found in line), lines[0].strip())
            return EnvironmentProblem(template.format(cause=cause, where=where))
    return None
