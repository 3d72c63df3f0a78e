"""One worker of the bench's fan-out (benchmarks/bench.py, `bench_fanout`): a `tokenledger run` on a fixed CPU budget.

    python -m benchmarks.pinned CORE THREADS run --home H --start S --end E [tokenledger run options]

The process pins itself to the one core CORE (`os.sched_setaffinity`, before it imports anything of tokenledger,
Dagster or DuckDB, so every thread it ever starts inherits the core), opens every DuckDB database with THREADS
threads (a `threads` the caller gives is kept), then runs `tokenledger.cli.main` with the rest of its arguments in
this same process: without `--parallel`, `tokenledger run` executes its Dagster runs in itself (no daemon, no run
worker), so the core and the threads bound all of its work. Its last line of output is one JSON object: the cores
it ran on, the threads setting of its compute database as DuckDB reads it back, and tokenledger's exit code.

DuckDB's threads are set here, not by the ledger resource's `duckdb_threads`: `tokenledger run` takes no run config,
and no environment variable reaches that setting (pipelines/resources.py's OPTIONAL_SETTINGS names only the memory
limit), so the worker bounds `duckdb.connect` itself. The other thread pools the pipeline's libraries size by the
CPUs they see (pyarrow's by OMP_NUM_THREADS, numpy's BLAS, numba's) are held to THREADS by the environment the bench
gives the process (`thread_env`): they read it when they load, which `sched_setaffinity` alone would not change.
"""

from __future__ import annotations

import json
import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """The environment that holds the libraries' own thread pools to `threads`."""
    return {name: str(threads) for name in THREAD_VARIABLES}


def bound_duckdb(threads: int) -> None:
    """Every DuckDB database this process opens from now on gets `threads` threads, unless its caller sets them."""
    import duckdb

    connect = duckdb.connect

    def bounded(database: object = ":memory:", read_only: bool = False, config: dict | None = None):
        return connect(database, read_only=read_only, config={"threads": threads, **(config or {})})

    duckdb.connect = bounded


def main(argv: list[str]) -> int:
    core, threads, args = int(argv[0]), int(argv[1]), argv[2:]
    os.sched_setaffinity(0, {core})
    bound_duckdb(threads)
    from tokenledger.cli import main as tokenledger
    from tokenledger.storage import duck

    code = tokenledger(args)
    db = duck._database.get("db")  # the compute database of the last run's steps, open until the process exits
    used = int(db.execute("SELECT current_setting('threads')").fetchone()[0]) if db is not None else None
    print(json.dumps({"cores": sorted(os.sched_getaffinity(0)), "duckdb_threads": used, "exit_code": code}),
          flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
