"""Commits without rename on object storage: how should a day be published to a bucket?
(docs/adr/0042-a-bucket-is-published-by-a-conditional-put-of-one-manifest.md)

One day as tokenledger publishes it (the 15 published tables and the 8 core tables, one Parquet file each of 3 to
194 KB, 1 MB in all, plus 3 CSV, the day's JSON manifest and an HTML report) goes into a bucket on moto's S3 server
(tests/s3server.py, 127.0.0.1) four ways:

- tokenledger-commit   tokenledger.publish.bucket.commit as it is: every file under the commit's own keys, then the one
                       manifest `.published/current.json` replaced by a conditional put (If-Match the ETag read);
- tokenledger-publish  the same, then what publishing does after it: the copies under exports/ and reports/ that
                       folder readers list, and the collection of unreferenced uploads;
- delta                deltalake (delta-rs): a Delta table per table, partitioned by day, the day replaced by
                       `write_deltalake(mode="overwrite", predicate="day = '...'")`; commits are `_delta_log/N.json`
                       created with `If-None-Match: *` (delta-rs 1.x's default on S3: no locking provider);
- iceberg              pyiceberg: a table per table in a SQL catalog on SQLite (the stand-in for Postgres), the
                       warehouse in the bucket, the day replaced by `dynamic_partition_overwrite`; the commit is
                       the catalog row's compare-and-swap of the metadata location;
- ducklake             DuckDB's DuckLake extension, where this DuckDB loads it: DuckDB 2.0's extensions cannot be
                       downloaded here, and PyPI's duckdb-extension-ducklake pins duckdb==1.5.5 (its file refuses to
                       load in another version), so it is only reported.

The tables of one option are written by 8 threads, as tokenledger.storage.remote uploads. Files that no table format
holds (CSV, JSON, HTML) are plain puts after the tables' commits in delta and iceberg.

Measured: the median wall time of publishing a new day and of re-publishing the same day (`--repeats` each, after
a warm-up day that creates the tables); the S3 requests of one of each, and of a consistent read of a day (moto's
request recorder); two writers in two processes at once, on two days and on the same day (`--rounds` each): what
each raised, the commit attempts and retries, and whether every table's day is whole from one writer; readers of
every table's day while it is re-published: how many reads mixed two versions across tables; and what a plain
folder reader (pyarrow, DuckDB without extensions, as pandas and Spark read a folder) counts in the day's folders
once the day was published `--repeats` + 2 times. moto is a Python server on the same two cores: absolute times are
moto's; the counts of requests and the behaviours are the formats'.

    PYTHONPATH=. /tmp/commit-venv/bin/python -m benchmarks.commits                       # the full run
    PYTHONPATH=. /tmp/commit-venv/bin/python -m benchmarks.commits --tables 4 --repeats 1 --rounds 1

deltalake and pyiceberg are no project dependencies: run it from a side venv on this checkout, made with
`python -m venv /tmp/commit-venv && /tmp/commit-venv/bin/pip install duckdb==2.0.1 pyarrow==26.0.1 boto3
'moto[server]' pytest deltalake 'pyiceberg[sql-sqlite,pyarrow]'`. An option whose packages are missing is skipped
with the reason.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import logging
import math
import multiprocessing
import os
import re
import statistics
import tempfile
import threading
import time
import urllib.request
import warnings
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.s3server import S3Server
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES

FIRST_DAY = date(2026, 11, 1)
THREADS = 8  # as tokenledger.storage.remote.TRANSFER_THREADS
SIZES_KB = (1, 200)
OPTIONS = ("tokenledger-commit", "tokenledger-publish", "delta", "iceberg", "ducklake")
# The key of a commit's write, per option, among the recorded requests.
MANIFEST = r"\.published/current\.json$"
COMMIT_KEYS = {"tokenledger-commit": MANIFEST, "tokenledger-publish": MANIFEST,
               "delta": r"_delta_log/\d{20}\.json$", "iceberg": r"/metadata/\d{5}-[0-9a-f-]+\.metadata\.json$"}


# --- the day --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    qualified: str
    published: bool
    rows: int

    @property
    def schema(self) -> str:
        return self.qualified.split(".")[0]

    @property
    def name(self) -> str:
        return self.qualified.split(".")[1]

    def path(self, day: date) -> str:
        """Where tokenledger publishes the table's day: exports/ for a published table, lake/ for a core one."""
        return f"{'exports' if self.published else 'lake'}/{self.schema}/{self.name}/day={day}/data.parquet"


def tables(count: int) -> list[Table]:
    """The first `count` of the day's tables, sized from 1 to 200 KB of rows (log-spaced, ~14 bytes a row): 3 to
    194 KB as Parquet files, with their footers."""
    refs = [(t.qualified, True) for t in PUBLISHED_TABLES] + [(t.qualified, False) for t in CORE_TABLES]
    low, high = (math.log(kb * 1024) for kb in SIZES_KB)
    spread = [math.exp(low + (high - low) * ((i * 7) % len(refs)) / (len(refs) - 1)) for i in range(len(refs))]
    return [Table(name, published, max(20, int(size / 14))) for (name, published), size in
            zip(refs, spread, strict=True)][:count]


def rows(table: Table, day: date, run_id: str) -> Any:
    """The table's rows of the day, written by `run_id`: the same rows for the same table and day."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(zlib.crc32(f"{table.qualified} {day}".encode()))
    n = table.rows
    return pa.table({"day": pa.array([day] * n, pa.date32()), "run_id": pa.array([run_id] * n),
                     "hour": pa.array(rng.integers(0, 24, n), pa.int32()),
                     "model": pa.array(rng.choice(["llama-70b", "qwen-32b", "mistral-7b"], n)),
                     "requests": pa.array(rng.integers(0, 50_000, n)), "tokens": pa.array(rng.integers(0, 9**9, n)),
                     "value": pa.array(rng.random(n).round(4))})


def side_files(day: date, run_id: str) -> dict[str, bytes]:
    """The day's files that are no table: the finance CSVs, the day's manifest, the capacity review."""
    files = {f"exports/csv/finance/{name}/day={day}.csv": f"day,run_id,value\n{day},{run_id},1.0\n".encode() * 200
             for name in ("cost_per_mtok_daily", "tenant_showback_daily", "cost_reconciliation_daily")}
    files[f"exports/manifests/day={day}.json"] = json.dumps({"day": str(day), "run_id": run_id}).encode()
    files[f"reports/capacity-review-{day}.html"] = b"<html><body>" + b"<p>review</p>" * 2000 + b"</body></html>"
    return files


def threads(work: list, do: Callable) -> list:
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(do, work))


# --- the options ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """What a process needs to reach an option's tables: picklable, for the writers in other processes."""

    option: str
    env: dict[str, str]
    bucket: str
    endpoint: str
    prefix: str
    tmp: str
    tables: tuple[Table, ...]


class Option:
    def __init__(self, s: Setting) -> None:
        self.s = s
        os.environ.update(s.env)

    def create(self, day: date) -> None:
        """Make the tables, with a first day in them (not timed)."""
        self.publish(day, "create")

    def publish(self, day: date, run_id: str) -> dict:
        """Publish (or re-publish) the day; returns what it knows of its retries and of the tables that failed."""
        raise NotImplementedError

    def read(self, day: date) -> dict[str, collections.Counter]:
        """The day of every table as a consistent reader of this option reads it: rows by run_id, per table."""
        raise NotImplementedError

    def day_folder(self, table: Table, day: date) -> str | None:
        """The folder (bucket/key) a plain folder reader lists for the table's day; None where there is none."""
        raise NotImplementedError

    def put_side_files(self, day: date, run_id: str) -> None:
        import boto3

        client = boto3.client("s3")
        threads(list(side_files(day, run_id).items()), lambda item: client.put_object(
            Bucket=self.s.bucket, Key=f"{self.s.prefix}/{item[0]}", Body=item[1]))


class Tokenledger(Option):
    def __init__(self, s: Setting) -> None:
        super().__init__(s)
        from tokenledger.publish.bucket import CURRENT_KEY
        from tokenledger.storage.remote import RemoteHome

        puts = self.manifest_puts = []

        class CountingHome(RemoteHome):
            # Each conditional put of the manifest is one attempt of a commit: counted around the call, at the bucket.
            def put(self, relative: str, body: bytes, **condition: Any) -> str:
                if relative == CURRENT_KEY:
                    puts.append(relative)
                return super().put(relative, body, **condition)

        self.remote = CountingHome.parse(f"s3://{s.bucket}/{s.prefix}")

    def publish(self, day: date, run_id: str) -> dict:
        import pyarrow.parquet as pq

        from tokenledger.publish import bucket

        with tempfile.TemporaryDirectory(dir=self.s.tmp) as tmp:
            staged = {}
            for table in self.s.tables:  # staged locally first, as a run stages its files
                staged[table.path(day)] = Path(tmp) / f"{table.qualified}.parquet"
                pq.write_table(rows(table, day, run_id), staged[table.path(day)], compression="zstd")
            for relative, body in side_files(day, run_id).items():
                staged[relative] = Path(tmp) / relative.replace("/", "_")
                staged[relative].write_bytes(body)
            before = len(self.manifest_puts)
            manifest = bucket.commit(self.remote, staged)
            if self.s.option == "tokenledger-publish":
                bucket.mirror_plain_prefixes(self.remote, manifest, staged)
                bucket.collect(self.remote, manifest)
        return {"retries": len(self.manifest_puts) - before - 1, "failed_tables": []}

    def read(self, day: date) -> dict[str, collections.Counter]:
        import pyarrow.parquet as pq

        from tokenledger.publish.bucket import current_manifest

        files = current_manifest(self.remote).files  # one GET: the version every path below belongs to

        def one(table: Table) -> collections.Counter:
            body, _ = self.remote.get(files[table.path(day)]["key"])
            return collections.Counter(pq.read_table(io.BytesIO(body), columns=["run_id"])["run_id"].to_pylist())

        return dict(zip([t.qualified for t in self.s.tables], threads(list(self.s.tables), one), strict=True))

    def day_folder(self, table: Table, day: date) -> str | None:
        if self.s.option == "tokenledger-commit" or not table.published:
            return None  # only the manifest names the files; the copies under exports/ are publishing's
        return f"{self.s.bucket}/{self.s.prefix}/{table.path(day).rsplit('/', 1)[0]}"


class Delta(Option):
    def uri(self, table: Table) -> str:
        return f"s3://{self.s.bucket}/{self.s.prefix}/{table.schema}/{table.name}"

    @property
    def storage(self) -> dict[str, str]:
        env = self.s.env
        return {"AWS_ENDPOINT_URL": self.s.endpoint, "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
                "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"], "AWS_REGION": env["AWS_REGION"],
                "AWS_ALLOW_HTTP": "true"}  # no AWS_S3_LOCKING_PROVIDER: delta-rs 1.x commits with If-None-Match

    def publish(self, day: date, run_id: str) -> dict:
        from deltalake import write_deltalake

        def one(table: Table) -> str | None:
            try:
                write_deltalake(self.uri(table), rows(table, day, run_id), partition_by=["day"],
                                mode="append" if run_id == "create" else "overwrite",
                                predicate=None if run_id == "create" else f"day = '{day}'",
                                storage_options=self.storage)
            except Exception as exc:  # noqa: BLE001 - a table that failed is part of the answer
                return f"{table.qualified}: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
            return None

        failed = [f for f in threads(list(self.s.tables), one) if f]
        self.put_side_files(day, run_id)
        return {"retries": None, "failed_tables": failed}

    def read(self, day: date) -> dict[str, collections.Counter]:
        import pyarrow.dataset as ds
        from deltalake import DeltaTable

        def one(table: Table) -> collections.Counter:
            dataset = DeltaTable(self.uri(table), storage_options=self.storage).to_pyarrow_dataset()
            read = dataset.to_table(columns=["run_id"], filter=ds.field("day") == day)
            return collections.Counter(read["run_id"].to_pylist())

        return dict(zip([t.qualified for t in self.s.tables], threads(list(self.s.tables), one), strict=True))

    def day_folder(self, table: Table, day: date) -> str | None:
        return f"{self.uri(table).removeprefix('s3://')}/day={day}"


class Iceberg(Option):
    def __init__(self, s: Setting) -> None:
        super().__init__(s)
        from pyiceberg.catalog.sql import SqlCatalog

        self.retries = _CountRetries()
        # A new day's dynamic_partition_overwrite deletes nothing, and says so each time.
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        logging.getLogger("pyiceberg").addHandler(self.retries)
        self.catalog = SqlCatalog("bench", uri=f"sqlite:///{s.tmp}/iceberg-catalog.db",
                                  warehouse=f"s3://{s.bucket}/{s.prefix}",
                                  **{"s3.endpoint": s.endpoint, "s3.access-key-id": s.env["AWS_ACCESS_KEY_ID"],
                                     "s3.secret-access-key": s.env["AWS_SECRET_ACCESS_KEY"],
                                     "s3.region": s.env["AWS_REGION"]})

    def create(self, day: date) -> None:
        for table in self.s.tables:
            self.catalog.create_namespace_if_not_exists(table.schema)
            created = self.catalog.create_table(table.qualified, schema=rows(table, day, "create").schema)
            with created.update_spec() as spec:
                spec.add_identity("day")
        self.publish(day, "create")

    def publish(self, day: date, run_id: str) -> dict:
        before = self.retries.count

        def one(table: Table) -> str | None:
            try:
                self.catalog.load_table(table.qualified).dynamic_partition_overwrite(rows(table, day, run_id))
            except Exception as exc:  # noqa: BLE001 - a table that failed is part of the answer
                return f"{table.qualified}: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
            return None

        failed = [f for f in threads(list(self.s.tables), one) if f]
        self.put_side_files(day, run_id)
        return {"retries": self.retries.count - before, "failed_tables": failed}

    def read(self, day: date) -> dict[str, collections.Counter]:
        from pyiceberg.expressions import EqualTo

        def one(table: Table) -> collections.Counter:
            scan = self.catalog.load_table(table.qualified).scan(row_filter=EqualTo("day", str(day)),
                                                                 selected_fields=("run_id",))
            return collections.Counter(scan.to_arrow()["run_id"].to_pylist())

        return dict(zip([t.qualified for t in self.s.tables], threads(list(self.s.tables), one), strict=True))

    def day_folder(self, table: Table, day: date) -> str | None:
        return f"{self.s.bucket}/{self.s.prefix}/{table.schema}/{table.name}/data/day={day}"


class _CountRetries(logging.Handler):
    """pyiceberg logs each commit it retries after a concurrent update (Transaction.commit_transaction)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "retrying" in record.getMessage()


CLASSES: dict[str, type[Option]] = {"tokenledger-commit": Tokenledger, "tokenledger-publish": Tokenledger,
                                    "delta": Delta, "iceberg": Iceberg}


def unavailable(option: str) -> str | None:
    """Why `option` cannot run in this interpreter, in one line (None when it can)."""
    import importlib

    needs = {"tokenledger-commit": ["boto3"], "tokenledger-publish": ["boto3"], "delta": ["deltalake"],
             "iceberg": ["pyiceberg.catalog.sql", "sqlalchemy", "pyiceberg.io.pyarrow"]}.get(option, [])
    try:
        for module in needs:
            importlib.import_module(module)
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    if option == "ducklake":
        import duckdb

        try:
            duckdb.connect().execute("LOAD ducklake")
        except duckdb.Error as exc:
            return f"DuckDB {duckdb.__version__}: {' '.join(str(exc).split())}"
        return "its extension loads, but this bench has no DuckLake writer: the data path on s3:// needs httpfs"
    return None


# --- counting requests ----------------------------------------------------------------------------------------

ENTRY = re.compile(r'\{"headers": \{(.*?)\}, "method": "([A-Z]+)", "url": "([^"]*)"')


class Recording:
    """moto's request recorder (moto-api/recorder) over a block: every request the server received, by kind."""

    def __init__(self, server: S3Server) -> None:
        self.server, self.requests = server, []

    def call(self, what: str) -> bytes:
        request = urllib.request.Request(f"{self.server.endpoint}/moto-api/recorder/{what}",
                                         method="GET" if what.startswith("download") else "POST")
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.read()

    def __enter__(self) -> Recording:
        self.call("reset-recording")
        self.call("start-recording")
        return self

    def __exit__(self, *exc: object) -> None:
        self.call("stop-recording")
        # Not line by line: the server's threads append their entries (bodies included) in several writes each,
        # which interleave under concurrent requests. An entry's headers, method and URL come first and are short.
        for headers, method, raw_url in ENTRY.findall(self.call("download-recording").decode()):
            url = urlsplit(raw_url)
            path = unquote(url.path).split("/", 2)[2] if unquote(url.path).count("/") > 1 else ""
            if method == "GET" and (not path or "list-type" in url.query):
                kind = "LIST"
            elif method == "PUT" and "x-amz-copy-source" in headers.lower():
                kind = "COPY"
            elif method == "POST" and "delete" in url.query:
                kind = "DELETE"
            elif method == "POST" and "uploads" in url.query:
                kind = "MPU-START"
            elif method == "POST" and "uploadId" in url.query:
                kind = "MPU-END"
            elif method == "PUT" and "partNumber" in url.query:
                kind = "PART"
            else:
                kind = method
            self.requests.append((kind, path))
        self.call("reset-recording")  # the recording holds the bodies: not kept

    def kinds(self) -> dict[str, int]:
        return dict(sorted(collections.Counter(kind for kind, _ in self.requests).items()))

    def commits(self, option: str) -> int:
        """The writes of commit objects: a PUT, or the start of a multipart upload (pyiceberg's pyarrow output)."""
        return sum(1 for kind, path in self.requests
                   if kind in ("PUT", "MPU-START") and re.search(COMMIT_KEYS[option], path))


# --- the measurements -----------------------------------------------------------------------------------------

def writer(setting: Setting, day: date, run_id: str, start_at: float) -> dict:
    """One writer in a process of its own: publish the day from `start_at` (a wall-clock time shared with the
    other writer); what it raised, if anything."""
    option = CLASSES[setting.option](setting)
    time.sleep(max(0.0, start_at - time.time()))
    start = time.perf_counter()
    try:
        done = option.publish(day, run_id)
    except Exception as exc:  # noqa: BLE001 - the error is the answer
        done = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}", "retries": None,
                "failed_tables": []}
    return {**done, "seconds": round(time.perf_counter() - start, 2)}


def two_writers(server: S3Server, option: Option, days: tuple[date, date], rounds: int) -> dict:
    """Two processes publishing `days` (one each; the same day twice for the same-day case) at the same moment."""
    results = []
    context = multiprocessing.get_context("spawn")
    for r in range(rounds):
        run_ids = (f"writer-a-{r}", f"writer-b-{r}")
        with Recording(server) as recording, ProcessPoolExecutor(2, mp_context=context) as pool:
            start_at = time.time() + 4  # both processes imported and connected by then
            futures = [pool.submit(writer, option.s, day, run_id, start_at)
                       for day, run_id in zip(days, run_ids, strict=True)]
            outcomes = [f.result() for f in futures]
        read = {day: option.read(day) for day in set(days)}
        tables_by_writer = {str(day): dict(sorted(collections.Counter(
            "+".join(sorted(counted)) for counted in read[day].values()).items())) for day in set(days)}
        once = 2 if isinstance(option, Tokenledger) else 2 * len(option.s.tables)  # each commit written once
        results.append({"writers": outcomes, "commit_puts": recording.commits(option.s.option), "commits_once": once,
                        # whole: every table's day from one writer, the same writer for every table
                        "whole": {day: len(found) == 1 and "+" not in next(iter(found))
                                  for day, found in tables_by_writer.items()},
                        "tables_by_writer": tables_by_writer})
    return {"rounds": results}


def torn_reads(option: Option, day: date, publishes: int, plain: bool = False) -> dict:
    """Readers of every table's day while the day is re-published (`publishes` times, in a thread): how many of
    their reads mixed two versions across the tables. `plain`: reading the day's folders, not the format."""
    import pyarrow.dataset as ds

    from tokenledger.storage.remote import arrow_filesystem

    filesystem = arrow_filesystem()

    def plain_read() -> dict[str, collections.Counter]:
        return {t.qualified: collections.Counter(ds.dataset(folder, filesystem=filesystem, format="parquet")
                                                 .to_table(columns=["run_id"])["run_id"].to_pylist())
                for t in option.s.tables if (folder := option.day_folder(t, day))}

    reads = mixed = 0
    for i in range(publishes):
        done = threading.Event()

        def publish(run_id: str, done: threading.Event = done) -> None:
            try:
                option.publish(day, run_id)
            finally:
                done.set()

        publisher = threading.Thread(target=publish, args=(f"torn-{i}",))
        publisher.start()
        while not done.is_set():
            seen = plain_read() if plain else option.read(day)
            reads += 1
            mixed += len(set().union(*map(set, seen.values()))) > 1
        publisher.join()
    return {"reads": reads, "mixed": mixed}


def plain_folder_rows(option: Option, day: date) -> dict:
    """What plain readers count in the day's folders (no table format): pyarrow (as pandas reads) and DuckDB
    without extensions, against the rows of the current version."""
    import duckdb
    import pyarrow.dataset as ds

    from tokenledger.storage.remote import arrow_filesystem

    folders = [(t, option.day_folder(t, day)) for t in option.s.tables]
    folders = [(t, f) for t, f in folders if f]
    if not folders:
        return {"note": "no folder: readers go through the manifest"}
    filesystem = arrow_filesystem()
    arrow = sum(ds.dataset(f, filesystem=filesystem, format="parquet").count_rows() for _, f in folders)
    con = duckdb.connect()  # DuckDB over pyarrow's datasets of the folders (httpfs is not installable here)
    con.register("folders", ds.dataset([f for _, f in folders], filesystem=filesystem, format="parquet"))
    duck = con.execute("SELECT count(*) FROM folders").fetchone()[0]
    return {"current_rows": sum(t.rows for t, _ in folders), "pyarrow_rows": arrow, "duckdb_rows": duck,
            "files": sum(len(filesystem.get_file_info(_selector(f))) for _, f in folders)}


def _selector(folder: str) -> Any:
    from pyarrow import fs

    return fs.FileSelector(folder, recursive=True)


def measure(server: S3Server, name: str, tmp: Path, count: int, repeats: int, rounds: int) -> dict:
    (tmp / name).mkdir()
    option = CLASSES[name](Setting(name, server.env(), server.bucket, server.endpoint, f"commitbench/{name}",
                                   str(tmp / name), tuple(tables(count))))
    option.create(FIRST_DAY)
    new_days = [FIRST_DAY + timedelta(days=1 + i) for i in range(repeats)]
    again = FIRST_DAY + timedelta(days=1)

    def timed(day: date, run_id: str) -> float:
        start = time.perf_counter()
        done = option.publish(day, run_id)
        if done["failed_tables"]:
            raise RuntimeError(f"{name} failed to publish {day}: {done['failed_tables'][0]}")
        return time.perf_counter() - start

    publish = [timed(day, f"run-{day}") for day in new_days]
    republish = [timed(again, f"rerun-{i}") for i in range(repeats)]
    result: dict[str, Any] = {"publish_s": round(statistics.median(publish), 2), "publish_runs_s": publish,
                              "republish_s": round(statistics.median(republish), 2), "republish_runs_s": republish}
    with Recording(server) as recording:
        option.publish(FIRST_DAY + timedelta(days=repeats + 1), "counted")
    result["publish_requests"] = recording.kinds()
    with Recording(server) as recording:
        option.publish(again, "counted-again")
    result["republish_requests"] = recording.kinds()
    start = time.perf_counter()
    with Recording(server) as recording:
        read = option.read(again)
    result["read_s"] = round(time.perf_counter() - start, 2)
    result["read_requests"] = recording.kinds()
    result["read_rows"] = sum(sum(c.values()) for c in read.values())
    result["plain_folder"] = {**plain_folder_rows(option, again), "publishes": repeats + 2}
    result["torn_reads"] = torn_reads(option, again, repeats)
    if name == "tokenledger-publish":
        result["torn_plain_reads"] = torn_reads(option, again, repeats, plain=True)
    later = FIRST_DAY + timedelta(days=repeats + 2)
    option.publish(later, "before-writers")
    option.publish(later + timedelta(days=1), "before-writers")
    result["different_days"] = two_writers(server, option, (later, later + timedelta(days=1)), rounds)
    result["same_day"] = two_writers(server, option, (later, later), rounds)
    return result


# --- the report -----------------------------------------------------------------------------------------------

def requests_text(kinds: dict[str, int]) -> str:
    return f"{sum(kinds.values())} (" + ", ".join(f"{k} {v}" for k, v in kinds.items()) + ")"


def writers_text(found: dict) -> str:
    parts = []
    for r in found["rounds"]:
        said = []
        for w in r["writers"]:
            if w.get("error"):
                said.append(f"raised {w['error'][:160]}")
            elif w["failed_tables"]:
                said.append(f"{len(w['failed_tables'])} tables failed ({w['failed_tables'][0][:200]})")
            else:
                said.append("ok" + (f", {w['retries']} retries" if w["retries"] else ""))
        whole = "whole" if all(r["whole"].values()) else "MIXED: tables " + ", ".join(
            f"{n} by {w}" for found in r["tables_by_writer"].values() for w, n in found.items())
        parts.append(f"{' / '.join(said)}; {r['commit_puts']} commit writes ({r['commits_once']} without retries); "
                     f"{whole}")
    return "<br>".join(parts)


def markdown(results: dict) -> str:
    lines = [f"{results['files']} ({results['tables']} tables of {results['sizes_kb']} KB + 5 side files), "
             f"{results['repeats']} repeats, {results['rounds']} rounds of two writers; "
             + ", ".join(f"{k} {v}" for k, v in results["versions"].items()), "",
             "| option | publish a day, median s | re-publish it | requests: publish | re-publish | consistent "
             "read of the day: s, requests | plain folder reader of a day published N times: rows (current) |",
             "| --- | ---: | ---: | --- | --- | --- | --- |"]
    for name, m in results["options"].items():
        if "skipped" in m or "error" in m:
            lines.append(f"| {name} | {'skipped: ' + m['skipped'] if 'skipped' in m else 'failed: ' + m['error']} "
                         "| | | | | |")
            continue
        plain = m["plain_folder"]
        folder = plain.get("note") or (f"N={plain['publishes']}: pyarrow {plain['pyarrow_rows']}, DuckDB "
                                       f"{plain['duckdb_rows']} ({plain['current_rows']}) in {plain['files']} files")
        lines.append(f"| {name} | {m['publish_s']:.2f} | {m['republish_s']:.2f} | "
                     f"{requests_text(m['publish_requests'])} | {requests_text(m['republish_requests'])} | "
                     f"{m['read_s']:.2f}, {requests_text(m['read_requests'])} | {folder} |")
    lines += ["", "| option | two writers, different days | two writers, the same day | reads of every table "
              "during re-publishes: mixing two versions / reads |", "| --- | --- | --- | --- |"]
    for name, m in results["options"].items():
        if "publish_s" in m:
            torn = [f"{t['mixed']} / {t['reads']}{label}" for key, label in
                    (("torn_reads", ""), ("torn_plain_reads", " (folders under exports/)")) if (t := m.get(key))]
            lines.append(f"| {name} | {writers_text(m['different_days'])} | {writers_text(m['same_day'])} | "
                         f"{'<br>'.join(torn)} |")
    return "\n".join(lines)


def versions() -> dict[str, str]:
    import importlib.metadata

    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "-"

    return {n: version(n) for n in ("duckdb", "pyarrow", "boto3", "moto", "deltalake", "pyiceberg", "sqlalchemy")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=len(PUBLISHED_TABLES) + len(CORE_TABLES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of two writers at once, per case")
    parser.add_argument("--options", default=",".join(OPTIONS))
    parser.add_argument("--out", type=Path, help="the results as JSON")
    args = parser.parse_args()
    chosen = tables(args.tables)
    results: dict[str, Any] = {"tables": len(chosen), "files": len(chosen) + 5, "repeats": args.repeats,
                               "rounds": args.rounds, "sizes_kb": f"{SIZES_KB[0]}-{SIZES_KB[1]}",
                               "versions": versions(), "options": {}}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MOTO_RECORDER_FILEPATH"] = f"{tmp}/moto-recording.jsonl"  # the server's, else in its cwd
        with S3Server.start() as server:
            os.environ.update(server.env())
            run(server, Path(tmp), chosen, args, results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))
    print(markdown(results))


def run(server: S3Server, tmp: Path, chosen: list[Table], args: argparse.Namespace, results: dict) -> None:
    for name in args.options.split(","):
        reason = unavailable(name)
        if reason:
            print(f"{name}: skipped, {reason}", flush=True)
            results["options"][name] = {"skipped": reason}
            continue
        try:
            results["options"][name] = measure(server, name, tmp, len(chosen), args.repeats, args.rounds)
        except Exception as exc:  # noqa: BLE001 - one option failing is reported, the others still run
            results["options"][name] = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"}
        print(f"{name}: {json.dumps(results['options'][name], default=str)[:600]}", flush=True)


if __name__ == "__main__":
    main()
