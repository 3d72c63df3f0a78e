"""How should a home on object storage (TOKENLEDGER_HOME=s3://bucket/prefix) be read and written? (issue 43)

Each option reads and writes the same files on moto's S3 server (tests/s3server.py, on 127.0.0.1), and `local`
does the same work on local disk, the baseline of every ratio:

- local           DuckDB's own readers and COPY on local files;
- duckdb-s3fs     DuckDB through `con.register_filesystem(s3fs.S3FileSystem(...))`;
- duckdb-arrowfs  DuckDB through a registered fsspec ArrowFSWrapper around pyarrow.fs.S3FileSystem (no s3fs);
- duckdb-httpfs   DuckDB's httpfs extension, where it loads (INSTALL needs DuckDB's extension repository; the
                  duckdb-extension-httpfs wheels on PyPI are built for DuckDB 1.x only);
- arrow           pyarrow's S3 filesystem reads into Arrow record batches that DuckDB scans; pyarrow.parquet writes;
- copy-boto3      boto3 downloads the files to local disk (threads), DuckDB reads them there; writes are made
                  locally, then uploaded;
- copy-arrow      the same with pyarrow.fs.copy_files.

Workloads: the day's gateway JSON Lines (plain and gzipped) counted as read_ndjson detects them, and aggregated by
model as the gateway_request contract types them; those rows as one Parquet file (the lake's options) read for 3
columns and for all of them; a Parquet file of `--write-mb` written (COPY TO); a prefix of 1,000 small objects
listed. Each measurement runs `--repeats` times, each in a child process of its own, round by round through the
options so that other work on the machine weighs on each as on local: the operation's wall time and the child's peak
RSS (interpreter and imports included; its RSS before is shown beside it). The median of the runs that succeeded is
reported with its ratio to local, and a run that failed with its error: some options fail only now and then.

moto is a Python server on the same two cores as the client: absolute throughput is moto's, far below S3's. The
ratios rank the options and show what each client adds; they are not S3's.

    python -m benchmarks.objectstore --requests 1000000
    python -m benchmarks.objectstore --requests 20000 --repeats 1 --write-mb 5      # a smoke run

An option whose packages are missing here is skipped with the reason. s3fs cannot share an environment with the
project's boto3 (s3fs needs aiobotocore, which pins an older botocore), and the httpfs wheels need DuckDB 1.x: run
those from a side venv on this checkout, `PYTHONPATH=. /tmp/objbench-venv/bin/python -m benchmarks.objectstore`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.bench import spawn
from tests.s3server import S3Server
from tokenledger.storage.duck import glob_path, quote_path, sql_path
from tokenledger.storage.lake import LAKE_PARQUET

DAY = date(2026, 11, 16)
PREFIX = "objbench"  # every key of the bench is under it, laid out as the local copy under Files.objects
SMALL_OBJECTS = 1000
THREADS = 8  # downloads and uploads at once


@dataclass(frozen=True)
class Files:
    """The generated day and what is made of it, under `root`; `objects` is what is uploaded, key for key."""

    root: Path
    requests: int
    write_mb: int

    @property
    def home(self) -> Path:
        return self.root / f"home-{self.requests}"

    @property
    def objects(self) -> Path:
        return self.root / f"objects-{self.requests}"

    @property
    def write_source(self) -> Path:
        return self.root / f"write-source-{self.requests}-{self.write_mb}mb.parquet"

    def jsonl_keys(self) -> list[str]:
        return sorted(f"gateway/{p.name}" for p in (self.objects / "gateway").iterdir())


def prepare(files: Files) -> None:
    """Generate the day (once per size) and lay out its JSON Lines, their rows as Parquet, the small objects and
    the source of the write, each made only where it is missing."""
    if not files.home.is_dir():
        from tokenledger.generate import generate_landing_zone

        # As `tokenledger generate --days 1 --seed 7` writes it, renamed once whole: an interrupted run leaves half
        # a day (and the generator's hidden part files), which the next run would otherwise measure.
        partial = files.root / f"home-{files.requests}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        generate_landing_zone(partial, DAY, 1, files.requests, seed=7, other_formats=True)
        partial.rename(files.home)
    objects = files.objects
    for sub in ("gateway", "small", "written"):
        (objects / sub).mkdir(parents=True, exist_ok=True)
    for path in (files.home / "raw" / "gateway" / f"dt={DAY}").iterdir():
        if path.name.endswith((".jsonl", ".jsonl.gz")) and not (objects / "gateway" / path.name).exists():
            os.link(path, objects / "gateway" / path.name)
    for i in range(SMALL_OBJECTS):
        small = objects / "small" / f"obj-{i:04d}.json"
        if not small.exists():
            small.write_text(json.dumps({"i": i}) + "\n")
    con = duckdb.connect()
    # As lake.write_query(ordered=False) writes: DuckDB 1.5 rejects ROW_GROUP_SIZE_BYTES with the order preserved.
    con.execute("SET preserve_insertion_order = false")
    day = objects / "day.parquet"
    if not day.exists():
        rows = json_reader([str(objects / key) for key in files.jsonl_keys()], contract_columns())
        con.execute(f"COPY (SELECT * FROM {rows} WHERE request_id IS NOT NULL) TO {quote_path(day)} ({LAKE_PARQUET})")
    if not files.write_source.exists():
        # The day's rows repeated until the file, written as the lake writes, is about --write-mb.
        day_rows = con.execute("SELECT count(*) FROM read_parquet($f)", {"f": str(day)}).fetchone()[0]
        rows = int(day_rows * files.write_mb * 1e6 / day.stat().st_size)
        copies = " UNION ALL ".join([f"SELECT * FROM read_parquet({sql_path(day)})"] * math.ceil(rows / day_rows))
        con.execute(f"COPY ({copies} LIMIT {rows}) TO {quote_path(files.write_source)} ({LAKE_PARQUET})")


def upload(server: S3Server, files: Files) -> None:
    client = server.client()
    paths = [p for p in files.objects.rglob("*") if p.is_file() and p.parent.name != "written"]
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda p: client.upload_file(str(p), server.bucket, key_of(p.relative_to(files.objects))),
                      paths))


def key_of(relative: Path | str) -> str:
    return f"{PREFIX}/{Path(relative).as_posix()}"


def contract_columns() -> dict[str, str]:
    from tokenledger.contracts import load_contract

    return {c.name: c.physical_type for c in load_contract("gateway_request").table().columns}


def json_reader(paths: list[str], columns: dict[str, str] | None) -> str:
    """DuckDB's JSON Lines reader of `paths`: types detected, or `columns` as declared (a line that does not parse
    is a row of NULLs, as ingest reads it)."""
    listed = "[" + ", ".join(sql_path(p) for p in paths) + "]"
    if columns is None:
        return f"read_ndjson({listed}, ignore_errors = true)"
    spec = ", ".join(f"'{name}': '{kind}'" for name, kind in columns.items())
    return f"read_json({listed}, format = 'newline_delimited', columns = {{{spec}}}, ignore_errors = true)"


# --- the options ----------------------------------------------------------------------------------------------

class Local:
    """DuckDB's own readers and COPY on `url(key)`: a local path here, an s3:// URL in the subclasses."""

    def __init__(self, name: str, con: duckdb.DuckDBPyConnection, files: Files, server: S3Server, tmp: Path):
        self.name, self.con, self.files, self.server, self.tmp = name, con, files, server, tmp

    def url(self, key: str) -> str:
        return str(self.files.objects / key)

    def urls(self, keys: list[str]) -> list[str]:
        return [self.url(key) for key in keys]

    def json(self, columns: dict[str, str] | None) -> str:
        return json_reader(self.urls(self.files.jsonl_keys()), columns)

    def parquet(self, columns: list[str] | None) -> str:
        return f"read_parquet({sql_path(self.url('day.parquet'))})"  # DuckDB projects the query's columns itself

    def write(self, key: str) -> int:
        """Rewrite the write source as the lake writes a file, to `url(key)`; returns the rows written."""
        return self.con.execute(f"COPY (SELECT * FROM read_parquet({sql_path(self.files.write_source)})) "
                                f"TO {quote_path(self.url(key))} ({LAKE_PARQUET})").fetchone()[0]

    def count_objects(self, prefix: str) -> int:
        return self.con.execute("SELECT count(*) FROM glob($pattern)",
                                {"pattern": glob_path(self.url(prefix), "*.json")}).fetchone()[0]


class OnS3(Local):
    """DuckDB reading s3:// URLs itself, through the filesystem `connect` gives it."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.connect()

    def connect(self) -> None:
        if self.name == "duckdb-s3fs":
            self.con.register_filesystem(self.server.s3fs())
        elif self.name == "duckdb-arrowfs":
            from fsspec.implementations.arrow import ArrowFSWrapper  # its protocol is the wrapped fs's, "s3"

            self.con.register_filesystem(ArrowFSWrapper(self.server.arrow_fs()))
        else:
            load_httpfs(self.con)
            s = self.server
            self.con.execute(f"CREATE SECRET (TYPE s3, KEY_ID '{s.access_key}', SECRET '{s.secret_key}', "
                             f"REGION '{s.region}', ENDPOINT '{s.host}:{s.port}', URL_STYLE 'path', USE_SSL false)")

    def url(self, key: str) -> str:
        return f"s3://{self.server.bucket}/{key_of(key)}"


class Arrow(Local):
    """pyarrow's S3 filesystem reads into record batches that DuckDB scans; pyarrow.parquet writes DuckDB's."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.fs = self.server.arrow_fs()

    def path(self, key: str) -> str:
        return f"{self.server.bucket}/{key_of(key)}"

    def json(self, columns: dict[str, str] | None) -> str:
        import pyarrow as pa
        import pyarrow.json as pj

        if columns is None:
            options = pj.ParseOptions()
            with self.fs.open_input_stream(self.path(self.files.jsonl_keys()[0])) as first:
                schema = pj.open_json(first).schema  # as pyarrow infers it from the first block
        else:
            declared = ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns.items())
            schema = self.con.execute(f"SELECT {declared} LIMIT 0").to_arrow_table().schema
            options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")

        def batches():
            for key in self.files.jsonl_keys():
                with self.fs.open_input_stream(self.path(key)) as stream:  # gzip is detected from the name
                    yield from pj.open_json(stream, parse_options=options)

        self.con.register("arrow_json", pa.RecordBatchReader.from_batches(schema, batches()))
        return "arrow_json"

    def parquet(self, columns: list[str] | None) -> str:
        import pyarrow.dataset as ds

        scanner = ds.dataset(self.path("day.parquet"), filesystem=self.fs, format="parquet").scanner(columns=columns)
        self.con.register("arrow_parquet", scanner.to_reader())
        return "arrow_parquet"

    def write(self, key: str) -> int:
        import pyarrow.parquet as pq

        batches = self.con.execute(f"SELECT * FROM read_parquet({sql_path(self.files.write_source)})").to_arrow_reader()
        rows = 0
        with pq.ParquetWriter(self.path(key), batches.schema, filesystem=self.fs, compression="zstd") as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        return rows

    def count_objects(self, prefix: str) -> int:
        return arrow_count(self.server, prefix)


def arrow_count(server: S3Server, prefix: str) -> int:
    from pyarrow import fs

    selector = fs.FileSelector(f"{server.bucket}/{key_of(prefix)}", recursive=True)
    return len(server.arrow_fs().get_file_info(selector))


class Copy(Local):
    """Files copied to local disk first, DuckDB reading them there; a write made locally, then uploaded. boto3's
    transfers, or pyarrow.fs.copy_files (`copy-arrow`)."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.client = self.server.client() if self.name == "copy-boto3" else None  # one client for all threads

    def urls(self, keys: list[str]) -> list[str]:
        targets = [self.tmp / Path(key).name for key in keys]
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(self.copy, [key_of(k) for k in keys], targets))
        return [str(t) for t in targets]

    def url(self, key: str) -> str:
        return self.urls([key])[0]

    def copy(self, key: str, target: Path, upload: bool = False) -> None:
        if self.client is not None:
            if upload:
                self.client.upload_file(str(target), self.server.bucket, key)
            else:
                self.client.download_file(self.server.bucket, key, str(target))
            return
        from pyarrow import fs

        remote, local = (self.server.arrow_fs(), f"{self.server.bucket}/{key}"), (fs.LocalFileSystem(), str(target))
        (source, source_path), (destination, destination_path) = (local, remote) if upload else (remote, local)
        fs.copy_files(source_path, destination_path, source_filesystem=source, destination_filesystem=destination,
                      use_threads=True)

    def write(self, key: str) -> int:
        local = self.tmp / "written.parquet"
        rows = self.con.execute(f"COPY (SELECT * FROM read_parquet({sql_path(self.files.write_source)})) "
                                f"TO {quote_path(local)} ({LAKE_PARQUET})").fetchone()[0]
        self.copy(key_of(key), local, upload=True)
        return rows

    def count_objects(self, prefix: str) -> int:
        if self.name == "copy-arrow":
            return arrow_count(self.server, prefix)
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.server.bucket,
                                                                      Prefix=key_of(prefix) + "/")
        return sum(page.get("KeyCount", 0) for page in pages)


OPTIONS: dict[str, type[Local]] = {"local": Local, "duckdb-s3fs": OnS3, "duckdb-arrowfs": OnS3,
                                   "duckdb-httpfs": OnS3, "arrow": Arrow, "copy-boto3": Copy, "copy-arrow": Copy}


def load_httpfs(con: duckdb.DuckDBPyConnection) -> None:
    """Load httpfs as installed, or from the duckdb-extension-httpfs wheel built for this DuckDB."""
    try:
        con.execute("LOAD httpfs")
    except duckdb.Error as exc:
        import importlib.util

        spec = importlib.util.find_spec("duckdb_extension_httpfs")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"{str(exc).splitlines()[0]} (no duckdb-extension-httpfs wheel installed either; "
                               f"PyPI's are built for DuckDB 1.x, not {duckdb.__version__})") from None
        folder = Path(spec.submodule_search_locations[0]) / "extensions" / f"v{duckdb.__version__}"
        con.execute(f"LOAD {quote_path(folder / 'httpfs.duckdb_extension')}")


def unavailable(option: str) -> str | None:
    """Why `option` cannot run in this interpreter, in one line (None when it can)."""
    try:
        if option == "duckdb-s3fs":
            import s3fs  # noqa: F401
        elif option == "duckdb-arrowfs":
            from fsspec.implementations.arrow import ArrowFSWrapper  # noqa: F401
        elif option == "duckdb-httpfs":
            load_httpfs(duckdb.connect())
        elif option == "copy-boto3":
            import boto3  # noqa: F401
    except (ImportError, RuntimeError, duckdb.Error) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


# --- the workloads --------------------------------------------------------------------------------------------

def answer(option: Local, query: str, source: str) -> str:
    return repr(option.con.execute(query.format(source=source)).fetchall())


WORKLOADS: dict[str, Callable[[Local], Any]] = {
    "json_count": lambda o: answer(o, "SELECT count(*) FROM {source}", o.json(None)),
    "json_by_model": lambda o: answer(o, "SELECT model, count(*), sum(input_tokens), sum(output_tokens), "
                                         "quantile_cont(ttft_ms, 0.99) FROM {source} GROUP BY ALL ORDER BY ALL",
                                      o.json(contract_columns())),
    "parquet_3_columns": lambda o: answer(o, "SELECT model, sum(input_tokens), sum(output_tokens) FROM {source} "
                                             "GROUP BY ALL ORDER BY ALL",
                                          o.parquet(["model", "input_tokens", "output_tokens"])),
    "parquet_all_columns": lambda o: answer(o, "SELECT count(*), sum(hash(COLUMNS(*))) FROM {source}",
                                            o.parquet(None)),
    "write_parquet": lambda o: o.write(f"written/{o.name}.parquet"),
    "list_1000": lambda o: o.count_objects("small"),
}


def measure(option: str, workload: str, files: Files, server: S3Server) -> dict:
    """One workload of one option, timed from the connection to the last row (the temporary files' removal after),
    and this process's resident memory before it and at its peak."""
    base_mb = memory_mb("VmRSS")
    with tempfile.TemporaryDirectory(dir=files.root) as tmp:
        start = time.perf_counter()
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = false")  # see prepare
        result = WORKLOADS[workload](OPTIONS[option](option, con, files, server, Path(tmp)))
        seconds = time.perf_counter() - start
        con.close()
    return {"seconds": round(seconds, 3), "answer": result, "base_rss_mb": base_mb, "peak_rss_mb": memory_mb("VmHWM")}


def memory_mb(field: str) -> float:
    """This process's VmRSS or VmHWM. Not ru_maxrss: Linux counts in it the parent's memory at the fork, before the
    exec (benchmarks.bench.spawn's peak of a child includes the bench's own)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise LookupError(f"no {field} in /proc/self/status")


# --- what the choice also rests on -----------------------------------------------------------------------------

def facts(server: S3Server, files: Files) -> dict[str, str]:
    """The yes-or-no questions beside the timings, each answered 'yes: ...' or with the error it raised. pyarrow's
    endpoints are read from its configuration, so no request can leave for AWS."""
    from pyarrow import fs

    base, day = f"s3://{server.bucket}/{PREFIX}", f"{server.bucket}/{key_of('day.parquet')}"
    checks: dict[str, Callable[[], Any]] = {}
    for option in ("duckdb-arrowfs", "duckdb-s3fs", "duckdb-httpfs"):
        if not unavailable(option):
            checks[f"{option}: COPY TO '{base}/facts/...'"] = lambda o=option: _copy_to(o, server, files)
            checks[f"{option}: glob '{base}/**/*.parquet'"] = lambda o=option: _glob(o, server, files)
    checks["pandas.read_parquet('s3://...'), no filesystem given"] = lambda: _pandas(f"s3://{day}", None)
    checks["pandas.read_parquet('bucket/key', filesystem=pyarrow S3FileSystem)"] = (
        lambda: _pandas(day, server.arrow_fs()))
    checks["pandas.read_parquet('s3://...', filesystem=pyarrow S3FileSystem)"] = (
        lambda: _pandas(f"s3://{day}", server.arrow_fs()))
    checks["pyarrow.fs.S3FileSystem() reads AWS_ENDPOINT_URL"] = lambda: _endpoint(fs.S3FileSystem())
    checks["pyarrow.fs.FileSystem.from_uri('s3://...') reads AWS_ENDPOINT_URL"] = (
        lambda: _endpoint(fs.FileSystem.from_uri(f"s3://{day}")[0]))
    out = {}
    for question, check in checks.items():
        try:
            out[question] = f"yes: {check()}"
        except Exception as exc:  # noqa: BLE001 - the error is the answer
            out[question] = f"no: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return out


def _copy_to(option: str, server: S3Server, files: Files) -> str:
    on_s3 = OnS3(option, duckdb.connect(), files, server, files.root)
    on_s3.con.execute(f"COPY (SELECT 1 AS x) TO {quote_path(on_s3.url(f'facts/{option}.parquet'))} (FORMAT PARQUET)")
    head = server.client().head_object(Bucket=server.bucket, Key=key_of(f"facts/{option}.parquet"))
    return f"{head['ContentLength']} bytes written"


def _glob(option: str, server: S3Server, files: Files) -> str:
    on_s3 = OnS3(option, duckdb.connect(), files, server, files.root)
    found = on_s3.con.execute("SELECT list(file ORDER BY file) FROM glob($g)",
                              {"g": f"s3://{server.bucket}/{PREFIX}/**/*.parquet"}).fetchone()[0]
    return ", ".join(f.removeprefix(f"s3://{server.bucket}/{PREFIX}/") for f in found)


def _endpoint(filesystem: Any) -> str:
    endpoint = filesystem.__reduce__()[1][0]["endpoint_override"]
    if not endpoint:
        raise ValueError("its endpoint_override is empty: it would send requests to AWS")
    return f"endpoint_override {endpoint!r}"


def _pandas(path: str, filesystem: Any) -> str:
    import pandas as pd

    return f"{len(pd.read_parquet(path, columns=['model'], filesystem=filesystem)):,} rows"


# --- the whole bench ------------------------------------------------------------------------------------------

def run(files: Files, options: list[str], repeats: int) -> dict:
    prepare(files)
    results: dict[str, Any] = {"requests": files.requests, "python": sys.executable, "versions": versions(),
                               "write_mb": round(files.write_source.stat().st_size / 1e6, 1), "options": {}}
    with S3Server.start() as server:
        os.environ.update(server.env())
        upload(server, files)
        results["facts"] = facts(server, files)
        skipped = {option: reason for option in options if (reason := unavailable(option))}
        for option, reason in skipped.items():
            print(f"{option}: skipped, {reason}", flush=True)
        ready = [option for option in options if option not in skipped]
        runs: dict[tuple[str, str], list[dict]] = {(o, w): [] for o in ready for w in WORKLOADS}
        # Round by round, every option in turn: other processes on the machine load each one as they load local.
        for i in range(repeats):
            for workload in WORKLOADS:
                for option in ready:
                    runs[option, workload].append(child(option, workload, i, files, server))
                    print(f"{option} {workload} #{i + 1}: {runs[option, workload][-1]}"[:300], flush=True)
    results["options"] = {option: {"skipped": skipped[option]} if option in skipped else
                          {workload: summary(runs[option, workload]) for workload in WORKLOADS} for option in options}
    return results


def child(option: str, workload: str, repeat: int, files: Files, server: S3Server) -> dict:
    log = files.root / "logs" / f"{option}-{workload}-{repeat}.log"
    load = os.getloadavg()[0]
    proc = spawn([sys.executable, "-m", "benchmarks.objectstore", "--measure", option, workload,
                  "--server", f"{server.host}:{server.port}", "--root", str(files.root),
                  "--requests", str(files.requests), "--write-mb", str(files.write_mb)], log)
    lines = log.read_text().strip().splitlines()
    if proc["exit_code"] != 0 or not lines:
        return {"error": f"exit {proc['exit_code']}, see {log}", "load": load}
    return {**json.loads(lines[-1]), "load": load}


def summary(runs: list[dict]) -> dict:
    """The median of the runs that succeeded, and their answer if they agree (a reader that loses bytes can also
    return a wrong count rather than fail); the first error and how many runs failed with one."""
    ok, failed = [r for r in runs if "error" not in r], [r for r in runs if "error" in r]
    out: dict[str, Any] = {"runs_s": [r["seconds"] for r in ok], "load_1min": [r["load"] for r in runs]}
    if failed:
        out.update(failed=f"{len(failed)} of {len(runs)}", error=failed[0]["error"])
    if ok:
        out.update(median_s=statistics.median(out["runs_s"]), peak_rss_mb=max(r["peak_rss_mb"] for r in ok),
                   base_rss_mb=ok[0]["base_rss_mb"])
        answers = {json.dumps(r["answer"]) for r in ok}
        out["answer"] = ok[0]["answer"] if len(answers) == 1 else f"the runs disagree: {sorted(answers)}"
    return out


def versions() -> dict[str, str]:
    import importlib.metadata

    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "-"

    return {name: version(name) for name in ("duckdb", "pyarrow", "fsspec", "s3fs", "boto3", "botocore", "moto")}


def markdown(results: dict) -> str:
    local = results["options"].get("local", {})
    loads = [load for m in results["options"].values() for w in m.values() if isinstance(w, dict)
             for load in w.get("load_1min", [])]
    lines = [f"{results['requests']:,} requests, a {results['write_mb']} MB write, {results['python']}: "
             + ", ".join(f"{k} {v}" for k, v in results["versions"].items())
             + (f"; 1-minute load {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs" if loads else ""), "",
             "| option | workload | median s | x local | peak RSS MB (before) | same answer as local |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    for option, measured in results["options"].items():
        if "skipped" in measured:
            lines.append(f"| {option} | all | skipped: {measured['skipped']} | | | |")
            continue
        for workload, m in measured.items():
            failed = f" failed {m['failed']}: {m['error'][:300]}" if "failed" in m else ""
            if "median_s" not in m:
                lines.append(f"| {option} | {workload} |{failed} | | | |")
                continue
            base = local.get(workload, {}).get("median_s")
            ratio = f"{m['median_s'] / base:.1f}" if base else ""
            same = "yes" if m["answer"] == local.get(workload, {}).get("answer") else "NO"
            rss = f"{m['peak_rss_mb']:.0f} ({m['base_rss_mb']:.0f})"
            lines.append(f"| {option} | {workload} | {m['median_s']:.2f}{failed} | {ratio} | {rss} | {same} |")
    lines += ["", *(f"- {question}: {text}" for question, text in results["facts"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000, help="requests in the generated day")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-mb", type=int, default=100, help="size of the Parquet file written")
    parser.add_argument("--options", nargs="+", choices=list(OPTIONS), default=list(OPTIONS))
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "tokenledger-objbench")
    parser.add_argument("--measure", nargs=2, metavar=("OPTION", "WORKLOAD"), help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    files = Files(args.root.resolve(), args.requests, args.write_mb)
    if args.measure:  # one measurement, in a child process of `run`
        host, port = args.server.split(":")
        try:
            print(json.dumps(measure(*args.measure, files, S3Server(host, int(port)))))
        except Exception as exc:  # noqa: BLE001 - an option that fails is a result
            first = (str(exc).strip().splitlines() or [""])[0].split(" Detail: ")[0]
            print(json.dumps({"error": f"{type(exc).__name__}: {first[:600]}", "peak_rss_mb": memory_mb("VmHWM")}))
        return 0
    results = run(files, args.options, args.repeats)
    out = files.root / f"results-{args.requests}-{Path(sys.prefix).name}.json"
    out.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    print(f"\n(figures in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
