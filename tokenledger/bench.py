"""Benchmarks, kept apart from the tests (which never depend on timing): `make bench`.

Measures one day of N requests (default 1,000,000) from the landing zone's files to the ingested tables: the
three ingest assets materialized through Dagster, in a child process whose wall time and peak resident memory
are reported. Generation is measured separately, also in a child process.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokenledger.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--day", type=date.fromisoformat, default=date(2026, 11, 17))
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--phase", choices=["generate", "ingest"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    home = args.home.resolve()
    if args.phase == "generate":
        print(json.dumps(phase_generate(home, args.day, args.requests)))
        return 0
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(home, args.day)))
        return 0
    common = ["--home", str(home), "--day", args.day.isoformat(), "--requests", str(args.requests)]
    generated = _child([*common, "--phase", "generate"])
    print(f"generate {args.requests:,} requests: {generated['seconds']:.1f} s, "
          f"peak RSS {generated['peak_rss_mb']:.0f} MB")
    ingested = _child([*common, "--phase", "ingest"])
    print(f"ingest one day, files -> core tables ({ingested['requests_ingested']:,} requests): "
          f"{ingested['seconds']:.1f} s, peak RSS {ingested['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
