"""Benchmarks, kept apart from the tests (which never depend on timing): `make bench`.

1. One day of N requests (default 1,000,000) from the landing zone's files to the ingested tables: the three
   ingest assets materialized through Dagster. Generation is measured separately.
2. Validating a day of 10 x N requests (default 10,000,000) against the gateway_request contract, as the
   `contract` check does: every rule counted in one DuckDB pass, the counts judged by the GX suite. The day is
   the ingested one repeated ten times with new request ids.

Each phase runs in a child process whose wall time and peak resident memory are reported.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

INGEST = ["core/deployments_daily", "core/gateway_requests", "core/billing_charges"]


def _child(args: list[str]) -> dict:
    """Run this module in a child process for one phase; it prints one JSON line with its own figures."""
    out = subprocess.run([sys.executable, "-m", "tokenledger.bench", *args], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def phase_generate(home: Path, day: date, requests: int) -> dict:
    from tokenledger.generate import generate_landing_zone

    start = time.perf_counter()
    generate_landing_zone(home, day, 1, requests, seed=7)
    return {"phase": "generate", "seconds": time.perf_counter() - start, "peak_rss_mb": _peak_mb()}


def phase_ingest(home: Path, day: date) -> dict:
    import os
    import warnings

    os.environ["TOKENLEDGER_HOME"] = str(home)
    warnings.filterwarnings("ignore")
    import dagster as dg

    from pipelines.definitions import defs

    assets = [defs.resolve_assets_def(dg.AssetKey.from_user_string(k)) for k in INGEST]
    start = time.perf_counter()
    result = dg.materialize(assets, partition_key=day.isoformat(), raise_on_error=True)
    seconds = time.perf_counter() - start
    import duckdb

    rows = duckdb.connect().execute(
        "SELECT count(*) FROM read_parquet($p)",
        {"p": str(home / "lake" / "core" / "gateway_requests" / f"day={day}" / "data.parquet")}).fetchone()[0]
    return {"phase": "ingest", "seconds": seconds, "peak_rss_mb": _peak_mb(), "requests_ingested": rows,
            "success": result.success}


def phase_validate(home: Path, day: date, copies: int, memory_limit: str) -> dict:
    import duckdb

    from tokenledger.contracts import load_contract
    from tokenledger.duck import compute_connection
    from tokenledger.expectations import CRITICAL, validate_days

    source = home / "lake" / "core" / "gateway_requests" / f"day={day}" / "data.parquet"
    big = home / "bench" / f"gateway_requests_x{copies}.parquet"
    big.parent.mkdir(parents=True, exist_ok=True)
    if not big.exists():
        duckdb.connect().execute(
            f"COPY (SELECT * REPLACE (request_id || '-' || c AS request_id) FROM read_parquet('{source}'), "
            f"range({copies}) t(c)) TO '{big}' (FORMAT PARQUET)")
    start = time.perf_counter()
    with compute_connection(home / "tmp" / "bench-spill", memory_limit) as con:
        result = validate_days(con, "core.gateway_requests", load_contract("gateway_request").table(), {day: big})
    return {"phase": "validate", "seconds": time.perf_counter() - start, "peak_rss_mb": _peak_mb(),
            "rows": result.rows, "critical_findings": len(result.failed(CRITICAL))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokenledger.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--day", type=date.fromisoformat, default=date(2026, 11, 17))
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--validate-copies", type=int, default=10,
                        help="validate a day of this many copies of the ingested day (default 10)")
    parser.add_argument("--memory-limit", default="1GB",
                        help="DuckDB memory limit while validating; beyond it DuckDB spills to disk (default 1GB)")
    parser.add_argument("--phase", choices=["generate", "ingest", "validate"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    home = args.home.resolve()
    if args.phase == "generate":
        print(json.dumps(phase_generate(home, args.day, args.requests)))
        return 0
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(home, args.day)))
        return 0
    if args.phase == "validate":
        print(json.dumps(phase_validate(home, args.day, args.validate_copies, args.memory_limit)))
        return 0
    common = ["--home", str(home), "--day", args.day.isoformat(), "--requests", str(args.requests)]
    generated = _child([*common, "--phase", "generate"])
    print(f"generate {args.requests:,} requests: {generated['seconds']:.1f} s, "
          f"peak RSS {generated['peak_rss_mb']:.0f} MB")
    ingested = _child([*common, "--phase", "ingest"])
    print(f"ingest one day, files -> core tables ({ingested['requests_ingested']:,} requests): "
          f"{ingested['seconds']:.1f} s, peak RSS {ingested['peak_rss_mb']:.0f} MB")
    validated = _child([*common, "--validate-copies", str(args.validate_copies), "--memory-limit",
                        args.memory_limit, "--phase", "validate"])
    print(f"validate one day against its contract ({validated['rows']:,} requests, counted in DuckDB capped at "
          f"{args.memory_limit}, judged by GX): "
          f"{validated['seconds']:.1f} s, peak RSS {validated['peak_rss_mb']:.0f} MB, "
          f"{validated['critical_findings']} critical finding(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
