"""One day of gateway request logs: traffic, latencies, outcomes, duplicates and bad rows, written to files.

The day is built entirely from random streams keyed by (seed, day, ...), so day D is the same whether one day
or a month is generated. Files are written through DuckDB from one Arrow table:

* ``gw-a``: ``.jsonl.gz`` per 6-hour chunk, ``received_at`` in UTC with ``Z``; its last chunk is a plain
  ``.jsonl`` (not yet compressed) that also holds the bad rows JSON cannot be parsed into.
* ``gw-b``: ``.jsonl.gz`` per 6-hour chunk, ``received_at`` written with a ``+08:00`` offset.
* ``gw-c``: one ``.parquet`` for the day, typed (timestamptz, int64 tokens, double latencies).
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from .fleet import mean_work_rate, replicas_per_minute
from .latency import fluid_queue, request_latencies
from .outcomes import BAD_STATUS, ERROR_TYPES, OK, STATUSES, apply_outcomes
from .prefix import mix64, prefix_block_hashes
from .scenario import (
    BAD_ROW_KINDS,
    BURSTS,
    CHUNK_HOURS,
    DEPLOYMENTS,
    GATEWAY_NODES,
    MINUTES_PER_DAY,
    MISSING_DEPLOYMENT_SHARE,
    MS_PER_DAY,
    PRODUCTION_OUTCOMES,
    STREAMS,
    TENANTS,
    WEEKDAY_FACTOR,
    Deployment,
    OutcomeRates,
    diurnal_per_minute,
    rng_for,
)
from .workload import Batch, daily_per_minute, stream_batch

MODELS = tuple(d.model for d in DEPLOYMENTS)
DEPLOYMENT_IDS = tuple(d.deployment_id for d in DEPLOYMENTS)
KV_BLOCK_TOKENS = np.array([d.kv_block_tokens for d in DEPLOYMENTS], dtype=np.int64)
_SESSION_KEY_OFFSET = np.uint64(1 << 63)  # keeps session keys disjoint from request keys
MAX_PARTS = 1 << 11  # day_key's bits 52-62


@dataclass(frozen=True)
class BadRow:
    """A deliberately invalid row: where it is (path relative to home, 1-based line or row) and why."""

    day: date
    file: str
    line: int
    kind: str
    request_id: str | None


@dataclass(frozen=True)
class DaySummary:
    day: date
    requests: int  # distinct valid requests
    rows_written: int  # requests + duplicate copies + bad rows
    duplicate_rows: int
    bad_rows: tuple[BadRow, ...]
    files: tuple[Path, ...]

    @staticmethod
    def merge(parts: list[DaySummary]) -> DaySummary:
        """The summary of a day written in parts."""
        return DaySummary(day=parts[0].day, requests=sum(p.requests for p in parts),
                          rows_written=sum(p.rows_written for p in parts),
                          duplicate_rows=sum(p.duplicate_rows for p in parts),
                          bad_rows=tuple(b for p in parts for b in p.bad_rows),
                          files=tuple(f for p in parts for f in p.files))


def day_key(day: date, index: np.ndarray, part: int = 0) -> np.ndarray:
    """A key unique to (part, day, index): the day's ordinal (below 2**20) in bits 32-51, the part in bits 52-62
    (0 for a day generated whole, so its keys are those of a one-part day)."""
    if not 0 <= part < MAX_PARTS:
        raise ValueError(f"part {part} is outside 0..{MAX_PARTS - 1}")
    return (np.uint64(part) << np.uint64(52)) | (np.uint64(day.toordinal()) << np.uint64(32)) | index.astype(np.uint64)


def _part_keys(part: int) -> tuple[str, ...]:
    """What a part adds to its random streams' keys: nothing for part 0, so a day generated whole is unchanged."""
    return () if part == 0 else (f"part-{part}",)


# ------------------------------------------------------------------------------------------------ traffic


def load_shape(seed: int, day: date, dep: Deployment) -> np.ndarray:
    """Relative arrival intensity per minute: diurnal x weekday factor x this deployment's bursts."""
    rng = rng_for(seed, day, dep.deployment_id, "bursts")
    diurnal = diurnal_per_minute()
    bursts = np.ones(MINUTES_PER_DAY)
    n = rng.poisson(BURSTS.per_day)
    starts = rng.choice(MINUTES_PER_DAY, size=n, p=diurnal / diurnal.sum())
    lengths = rng.integers(BURSTS.min_minutes, BURSTS.max_minutes + 1, size=n)
    factors = rng.uniform(BURSTS.min_factor, BURSTS.max_factor, size=n)
    for s, length, f in zip(starts, lengths, factors, strict=True):
        bursts[s : s + length] = np.maximum(bursts[s : s + length], f)
    return diurnal * bursts * WEEKDAY_FACTOR[day.weekday()]


@dataclass
class Traffic:
    """All requests of one day (or load test) after outcomes, columns aligned."""

    batch: Batch
    deployment: np.ndarray  # index into DEPLOYMENTS
    session_key: np.ndarray  # uint64 key of the session (0 = none)
    status: np.ndarray
    output: np.ndarray
    cached: np.ndarray
    cache_write: np.ndarray
    queue: np.ndarray
    ttft: np.ndarray
    e2e: np.ndarray
    itl: np.ndarray
    http_status: np.ndarray
    error_type: np.ndarray

    def __len__(self) -> int:
        return len(self.status)

    def take(self, idx: np.ndarray) -> Traffic:
        cols = {k: v[idx] for k, v in self.__dict__.items() if k != "batch"}
        return Traffic(batch=self.batch.take(idx), **cols)

    @staticmethod
    def concat(parts: list[Traffic]) -> Traffic:
        cols = {
            k: np.concatenate([getattr(p, k) for p in parts]) for k in Traffic.__annotations__ if k != "batch"
        }
        return Traffic(batch=Batch.concat([p.batch for p in parts]), **cols)


def serve(
    rng: np.random.Generator,
    dep_index: int,
    batch: Batch,
    session_key: np.ndarray,
    demand: np.ndarray,
    capacity: np.ndarray,
    rates: OutcomeRates,
) -> Traffic:
    """Run one deployment's requests through the fluid queue, the latency model and the outcome model."""
    dep = DEPLOYMENTS[dep_index]
    load = fluid_queue(demand, capacity, dep.latency.max_wait_s)
    lat = request_latencies(
        rng, dep.latency, load, batch.t_ms, batch.input_tokens, batch.cached, batch.output
    )
    o = apply_outcomes(rng, rates, lat, batch.output, batch.cached, batch.cache_write)
    return Traffic(
        batch=batch,
        deployment=np.full(len(batch), dep_index, dtype=np.int8),
        session_key=session_key,
        status=o.status,
        output=o.output,
        cached=o.cached,
        cache_write=o.cache_write,
        queue=o.queue,
        ttft=o.ttft,
        e2e=o.e2e,
        itl=o.itl,
        http_status=o.http_status,
        error_type=o.error_type,
    )


def day_traffic(start: date, day: date, requests_per_day: int, seed: int, part: int = 0) -> Traffic:
    """Every request of ``day`` (of its ``part``, a slice of the day's traffic with streams of its own), in no
    particular order."""
    parts = []
    for di, dep in enumerate(DEPLOYMENTS):
        shape = load_shape(seed, day, dep)
        batches, keys = [], []
        for si, stream in enumerate(STREAMS):
            if stream.deployment_id != dep.deployment_id:
                continue
            b = stream_batch(
                rng_for(seed, day, stream.name, *_part_keys(part)),
                stream,
                daily_per_minute(requests_per_day * stream.share, shape),
            )
            batches.append(b)
            skey = (
                day_key(day, (np.uint64(si) << np.uint64(24)) | b.session.astype(np.uint64), part)
                + _SESSION_KEY_OFFSET
            )
            keys.append(np.where(b.session >= 0, mix64(skey), np.uint64(0)))
        reps = replicas_per_minute(dep, start, day, requests_per_day).astype(float)
        # Replicas' worth of work arriving each minute: the volume's expected work along the day's shape.
        demand = mean_work_rate(dep.deployment_id, requests_per_day) * shape
        rng = rng_for(seed, day, dep.deployment_id, "serve", *_part_keys(part))
        parts.append(
            serve(rng, di, Batch.concat(batches), np.concatenate(keys), demand, reps, PRODUCTION_OUTCOMES)
        )
    return Traffic.concat(parts)


# ------------------------------------------------------------------------------------------------ files

CHUNKS = 24 // CHUNK_HOURS
_IS_PARQUET = np.array([fmt == "parquet" for *_, fmt in GATEWAY_NODES])
#: First file index of each node: a JSON node has one file per chunk, the Parquet node one per day.
_NODE_FIRST_FILE = np.concatenate([[0], np.cumsum(np.where(_IS_PARQUET, 1, CHUNKS))[:-1]])
NODE_OFFSET_H = np.array([offset or 0 for _, _, offset, _ in GATEWAY_NODES], dtype=np.int8)
NODE_INDEX = {name: i for i, (name, *_) in enumerate(GATEWAY_NODES)}
PLAIN_FILE = int(_NODE_FIRST_FILE[NODE_INDEX["gw-a"]]) + CHUNKS - 1  # gw-a's last chunk, left uncompressed
BAD_KIND = {kind: i for i, (kind, _) in enumerate(BAD_ROW_KINDS)}


def file_index(node: np.ndarray, t_ms: np.ndarray) -> np.ndarray:
    """Index into :func:`file_names` of the file a row goes to (its node, and its chunk for JSON nodes)."""
    chunk = t_ms // (CHUNK_HOURS * 3_600_000)
    return (_NODE_FIRST_FILE[node] + np.where(_IS_PARQUET[node], 0, chunk)).astype(np.int8)


def file_names(day: date, part: int = 0) -> list[str]:
    """The day's gateway files (of its ``part``: ``gw-a-p03-...`` for part 3), in :func:`file_index` order."""
    stamp = day.strftime("%Y%m%d") if part == 0 else f"p{part:02d}-{day.strftime('%Y%m%d')}"
    names = []
    for node, _, _, fmt in GATEWAY_NODES:
        if fmt == "parquet":
            names.append(f"{node}-{stamp}.parquet")
        else:
            names += [f"{node}-{stamp}-{c * CHUNK_HOURS:02d}.jsonl.gz" for c in range(CHUNKS)]
    names[PLAIN_FILE] = names[PLAIN_FILE].removesuffix(".gz")
    return names


def _dict_array(
    codes: np.ndarray, values: tuple[str, ...], null: np.ndarray | None = None
) -> pa.DictionaryArray:
    idx = pa.array(codes.astype(np.int32), mask=null)
    return pa.DictionaryArray.from_arrays(idx, pa.array(values, pa.string()))


def _float(a: np.ndarray) -> pa.Array:
    return pa.array(a, pa.float64(), mask=np.isnan(a))


def _unit(uid: np.ndarray) -> np.ndarray:
    """A uniform [0, 1) number derived from the request id (stable per request, independent of order)."""
    return (mix64(uid) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def to_arrow(
    tr: Traffic,
    day0_ms: int,
    uid: np.ndarray,
    uid_null: np.ndarray,
    node: np.ndarray,
    file: np.ndarray,
    bad: np.ndarray,
    hashes: pa.Array | None = None,
) -> pa.Table:
    """Arrow table of the rows to write, in order; ids and timestamps become strings later, in SQL. Without
    ``hashes`` (prefix_block_hashes) the rows carry none."""
    b = tr.batch
    dep_null = np.zeros(len(tr), dtype=bool)
    for dep_id, share in MISSING_DEPLOYMENT_SHARE.items():
        dep_null |= (tr.deployment == DEPLOYMENT_IDS.index(dep_id)) & (_unit(uid) < share)
    return pa.table(
        {
            "ord": np.arange(len(tr), dtype=np.int64),
            "file": file,
            "bad": bad,
            "offset_h": NODE_OFFSET_H[node],
            "t_ms": b.t_ms + day0_ms,
            "uid": pa.array(uid, pa.uint64(), mask=uid_null),
            "model": _dict_array(tr.deployment, MODELS),
            "deployment_id": _dict_array(tr.deployment, DEPLOYMENT_IDS, dep_null),
            "tenant_id": _dict_array(b.tenant, TENANTS),
            "session_key": pa.array(tr.session_key, pa.uint64(), mask=tr.session_key == 0),
            "status": _dict_array(tr.status, STATUSES),
            "input_tokens": b.input_tokens,
            "cached_input_tokens": tr.cached,
            "cache_write_tokens": tr.cache_write,
            "output_tokens": tr.output,
            "ttft_ms": _float(tr.ttft),
            "e2e_ms": _float(tr.e2e),
            "queue_ms": _float(tr.queue),
            "itl_max_ms": _float(tr.itl),
            "http_status": pa.array(tr.http_status, pa.int32(), mask=tr.http_status == 0),
            "error_type": _dict_array(tr.error_type, ERROR_TYPES, tr.error_type < 0),
            "prefix_block_hashes": pa.nulls(len(tr), pa.large_list(pa.int64())) if hashes is None else hashes,
        }
    )


_TS_FMT = "%Y-%m-%dT%H:%M:%S.%g"
_ROWS_SQL = f"""
CREATE OR REPLACE TABLE rows AS
SELECT
  ord, file, bad, t_ms,
  CASE WHEN uid IS NULL THEN NULL ELSE printf('req_%016x', uid) END AS request_id,
  CASE
    WHEN bad = {BAD_KIND["unparseable_received_at"]} THEN strftime(epoch_ms(t_ms), '%Y-%m-%dT25:%M:%S.%gZ')
    WHEN offset_h = 0 THEN strftime(epoch_ms(t_ms), '{_TS_FMT}Z')
    ELSE strftime(epoch_ms(t_ms + offset_h * 3600000), '{_TS_FMT}') || printf('+%02d:00', offset_h)
  END AS received_at,
  model::VARCHAR AS model,
  deployment_id::VARCHAR AS deployment_id,
  tenant_id::VARCHAR AS tenant_id,
  CASE WHEN session_key IS NULL THEN NULL ELSE printf('ses_%016x', session_key) END AS session_id,
  status::VARCHAR AS status,
  input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
  ttft_ms, e2e_ms, queue_ms, itl_max_ms, http_status,
  error_type::VARCHAR AS error_type,
  prefix_block_hashes::BIGINT[] AS prefix_block_hashes
FROM arrow_rows
"""
CONTRACT_COLUMNS = (
    "request_id, received_at, model, deployment_id, tenant_id, session_id, status, input_tokens, "
    "cached_input_tokens, cache_write_tokens, output_tokens, ttft_ms, e2e_ms, queue_ms, itl_max_ms, "
    "http_status, error_type, prefix_block_hashes"
)
_PARQUET_COLUMNS = CONTRACT_COLUMNS.replace("received_at", "timezone('UTC', epoch_ms(t_ms)) AS received_at")
_STRUCT = ", ".join(f"{c.strip()} := {c.strip()}" for c in CONTRACT_COLUMNS.split(","))
_PLAIN_LINE = f"""CASE bad
    WHEN {BAD_KIND["invalid_json"]} THEN left(j, length(j) // 2)
    WHEN {BAD_KIND["non_numeric_output_tokens"]} THEN
      regexp_replace(j, '"output_tokens":[0-9]+', '"output_tokens":"unknown"')
    ELSE j END"""


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory connection with settings that keep output byte-identical between runs."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = true")
    return con


def _gzip(plain: Path, target: Path) -> None:
    """Compress `plain` into `target` (gzip level 1, no name or time in the header), then remove `plain`."""
    try:
        with plain.open("rb") as src, target.open("wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) as out:
            shutil.copyfileobj(src, out, 1 << 20)
    finally:
        plain.unlink(missing_ok=True)


def write_files(
    con: duckdb.DuckDBPyConnection, table: pa.Table, folder: Path, names: list[str]
) -> list[Path]:
    """Write every file of the day from ``table`` (columns of :func:`to_arrow`), rows in ``ord`` order."""
    folder.mkdir(parents=True, exist_ok=True)
    con.register("arrow_rows", table)
    con.execute(_ROWS_SQL)
    con.unregister("arrow_rows")
    paths = []
    for i, name in enumerate(names):
        path = folder / name
        where = f"FROM rows WHERE file = {i}"
        src = f"{where} ORDER BY ord"
        if name.endswith(".parquet"):
            sql = f"COPY (SELECT {_PARQUET_COLUMNS} {src}) TO '{path}' (FORMAT PARQUET, COMPRESSION ZSTD)"
        elif name.endswith(".gz"):
            # Written plain, then gzipped here at level 1: DuckDB's gzip (its only level) took ~1 s of every
            # 20 MB file, 5.7 s of a 200k-request day's 7.3 s; level 1 takes a fifth of that, and the same lines
            # come out of it. mtime 0 and no name in the header: the same seed gives the same bytes.
            plain = folder / f".{name}.plain"
            con.execute(f"COPY (SELECT {CONTRACT_COLUMNS} {src}) TO '{plain}' (FORMAT JSON)")
            _gzip(plain, path)
            paths.append(path)
            continue
        else:
            # Lines are built in SQL (to_json formats like COPY ... FORMAT JSON) so that the two kinds of bad
            # row JSON cannot express can be spliced in; CSV without quoting writes them verbatim.
            sql = (
                f"COPY (SELECT {_PLAIN_LINE} AS line FROM (SELECT ord, bad, to_json(struct_pack({_STRUCT}))"
                f"::VARCHAR AS j {where}) ORDER BY ord) TO '{path}' "
                "(FORMAT CSV, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\t')"
            )
        con.execute(sql)
        paths.append(path)
    con.execute("DROP TABLE rows")
    return paths


# ------------------------------------------------------------------------------------------------ one day


def generate_day(
    home: Path, start: date, day: date, requests_per_day: int, seed: int, bad_rows_per_day: int, part: int = 0
) -> DaySummary:
    """Generate and write the gateway logs of ``day``; with ``part`` > 0, one more slice of it (see
    :func:`tokenledger.generate.generate_landing_zone`'s ``parts``): ``requests_per_day`` requests served by a fleet
    sized to them, with request and session ids, prefix hashes, random streams and file names of its own."""
    tr = day_traffic(start, day, requests_per_day, seed, part)
    order = np.lexsort((tr.deployment, tr.batch.t_ms))
    tr = tr.take(order)
    n = len(tr)
    uid = mix64(day_key(day, np.arange(n, dtype=np.uint64), part))
    rng = rng_for(seed, day, "files", *_part_keys(part))
    node = rng.choice(len(GATEWAY_NODES), size=n, p=[w for _, w, _, _ in GATEWAY_NODES]).astype(np.int64)

    # Duplicates: the same request logged again by another node, finishing a little later.
    dup = np.flatnonzero((rng.random(n) < PRODUCTION_OUTCOMES.duplicate) & ~np.isnan(tr.e2e))
    dup_tr = tr.take(dup)
    dup_tr.e2e = np.round(dup_tr.e2e + rng.uniform(1.0, 40.0, len(dup)), 1)
    dup_node = (node[dup] + rng.integers(1, len(GATEWAY_NODES), len(dup))) % len(GATEWAY_NODES)

    # Bad rows: corrupted copies of valid rows with fresh ids, one kind after another.
    kinds = [BAD_ROW_KINDS[i % len(BAD_ROW_KINDS)] for i in range(bad_rows_per_day)]
    ok_rows = np.flatnonzero((tr.status == OK) & (tr.output >= 2) & ~np.isnan(tr.itl))
    if len(ok_rows) == 0:
        kinds = []  # nothing to corrupt (an empty day)
    src = rng.choice(ok_rows, size=len(kinds), replace=len(ok_rows) < len(kinds)) if kinds else ok_rows[:0]
    bad_tr = tr.take(src)
    bad_kind = np.array([BAD_KIND[k] for k, _ in kinds], dtype=np.int8)
    bad_node = np.array([NODE_INDEX.get(target, NODE_INDEX["gw-a"]) for _, target in kinds], dtype=np.int64)
    plain = np.array([target == "plain" for _, target in kinds], dtype=bool)
    late_chunk_ms = (CHUNKS - 1) * CHUNK_HOURS * 3_600_000
    bad_tr.batch.t_ms = np.where(
        plain, late_chunk_ms + rng.integers(0, MS_PER_DAY - late_chunk_ms, len(kinds)), bad_tr.batch.t_ms
    )
    _corrupt(bad_tr, bad_kind, rng)
    bad_uid = mix64(day_key(day, np.arange(n, n + len(kinds), dtype=np.uint64), part))

    all_tr = Traffic.concat([tr, dup_tr, bad_tr])
    all_uid = np.concatenate([uid, uid[dup], bad_uid])
    all_node = np.concatenate([node, dup_node, bad_node])
    all_bad = np.concatenate([np.full(n + len(dup), -1, dtype=np.int8), bad_kind])
    sub = np.concatenate([np.zeros(n), np.ones(len(dup)), np.full(len(kinds), 2)])
    order = np.lexsort((np.arange(len(all_tr)), sub, all_tr.batch.t_ms))
    all_tr = all_tr.take(order)
    all_uid, all_node, all_bad = all_uid[order], all_node[order], all_bad[order]
    uid_null = all_bad == BAD_KIND["missing_request_id"]
    file = file_index(all_node, all_tr.batch.t_ms)

    day0_ms = int(datetime.combine(day, time(0), tzinfo=UTC).timestamp() * 1000)
    b = all_tr.batch
    hashes = prefix_block_hashes(day, b.input_tokens, KV_BLOCK_TOKENS[all_tr.deployment], b.stream, b.stream_prefix,
                                 all_tr.session_key, b.session_prefix, all_uid, all_bad < 0, part)
    table = to_arrow(all_tr, day0_ms, all_uid, uid_null, all_node, file, all_bad, hashes)
    names = file_names(day, part)
    folder = home / "raw" / "gateway" / f"dt={day.isoformat()}"
    con = connect()
    paths = write_files(con, table, folder, names)
    con.close()

    bad_rows = []
    for pos in np.flatnonzero(all_bad >= 0):
        f = int(file[pos])
        kind = BAD_ROW_KINDS[all_bad[pos]][0]
        bad_rows.append(
            BadRow(
                day=day,
                file=str(paths[f].relative_to(home)),
                line=int(np.count_nonzero(file[:pos] == f)) + 1,
                kind=kind,
                request_id=None if uid_null[pos] else f"req_{int(all_uid[pos]):016x}",
            )
        )
    return DaySummary(
        day=day,
        requests=n,
        rows_written=len(all_tr),
        duplicate_rows=len(dup),
        bad_rows=tuple(bad_rows),
        files=tuple(paths),
    )


def _corrupt(tr: Traffic, kind: np.ndarray, rng: np.random.Generator) -> None:
    """Break each row the way its kind says (the kinds handled in SQL only need their marker)."""
    b = tr.batch
    k = BAD_KIND
    neg = kind == k["negative_input_tokens"]
    b.input_tokens = np.where(neg, -b.input_tokens, b.input_tokens)
    above = kind == k["cached_above_input"]
    tr.cached = np.where(above, b.input_tokens + rng.integers(1, 500, len(kind)), tr.cached)
    tr.e2e = np.where(kind == k["e2e_below_ttft"], np.round(tr.ttft * 0.5, 1), tr.e2e)
    tr.status = np.where(kind == k["unknown_status"], BAD_STATUS, tr.status).astype(np.int8)
