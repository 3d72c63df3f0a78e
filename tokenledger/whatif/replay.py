"""The prefix-cache what-if: the input a day's requests (or a trace's) would have found cached under another cache
size, scope or routing, and what that is worth (issue 16; docs/adr/README.md, "Prefix-cache what-if").

A replay runs over `whatif_requests` (one row per request with its prefix block hashes, in arrival order per
unit: a deployment, or a trace) for the scenarios of `whatif_scenario_units`, and writes `whatif_results` (unit,
scenario, cached_tokens, and how: method, sampling_rate, sampled_accesses). The infinite cache is a set computation
in DuckDB, a run of hours at a time (sql/whatif/whatif_first_sightings.sql, sql/whatif/whatif_infinite.sql); an LRU
cache is
replayed by tokenledger/whatif/lru.py (compiled) over the requests' block accesses, the requests streamed from DuckDB in
arrival order a batch at a time, one pass per scope and routing for every size at once: exactly, or over a SHARDS
sample when the unit holds more block accesses than config/whatif.yaml's sampling.budget_accesses
(`sampling_plans`). Nothing holds a day's requests in memory.
"""

from __future__ import annotations

import math
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa

from tokenledger.accounting.day import attach_inputs
from tokenledger.catalog import TRACES
from tokenledger.contracts import load_contract, validation_query
from tokenledger.errors import ConfigError, InputFileError
from tokenledger.ingest.landing import landing_files
from tokenledger.ingest.readers import check_some_records, jsonl_lines, read_error
from tokenledger.ingest.sources import GATEWAY_FORMATS, _jsonl_text_relation
from tokenledger.storage import lake
from tokenledger.storage.duck import memory_limit_bytes, register_arrow, run_sql, sql_path, statement, used_params
from tokenledger.storage.lake import DayWindow, attach_day
from tokenledger.storage.layout import HomeLayout

# tokenledger.whatif.lru is imported by the functions that replay: it loads numba (about a second), which a step
# that reads no trace and replays nothing, and loading the definitions, need not pay.
if TYPE_CHECKING:
    from tokenledger.whatif.lru import Sampling

TRACE_FORMATS = {k: v for k, v in GATEWAY_FORMATS.items() if v == "jsonl"}
_EMPTY_LINE = "empty line: no record"  # sql/ingest/gateway_lines.sql: a blank line in a trace is skipped, not an error


# The day's requests are sorted with their hash lists in runs of hours of at most this many block accesses per
# byte of DuckDB's memory limit (about 34 million at 4 GB: a 200k-request day is one run, the 10M-request day's
# hours of ~23 million accesses one each, as all of the 100M-request day's hours of ~230 million). Each run is a
# statement and a file, ~10 ms of fixed cost: an hour each cost a 1,500-request day 0.25 s of its ~3 s.
SLAB_ACCESSES_PER_LIMIT_BYTE = 1 / 128
# The LRU replay reads a day's requests from DuckDB in Arrow batches of about this many block accesses (numba is
# imported only where a replay runs: tokenledger/whatif/lru.py, ~0.3 s).
CHUNK_ACCESSES = 1 << 20
# A sampled unit's blocks found in at least this share of a sample of SHARED_SAMPLE_REQUESTS of its requests are
# replayed whole (sql/whatif/whatif_shared_blocks.sql; docs/adr/0084-lru-caches-of-large-days-are-sampled.md).
SHARED_SHARE = 0.001
SHARED_SAMPLE_REQUESTS = 50_000
# The infinite cache counted in the LRU pass's stream holds a set of every block seen, 8 bytes a slot, at most 70%
# full: the 10M-request day's 71 million distinct blocks take ~1 GiB. Above this share of DuckDB's memory limit the
# sets are dropped and DuckDB counts it, a run of hours at a time, in bounded memory (`_replay_infinite`).
INFINITE_MEMORY_SHARE = 1 / 3


def replay(con: duckdb.DuckDBPyConnection, scratch: Path, chunk_accesses: int = CHUNK_ACCESSES,
           runs: list[Path] | None = None) -> int:
    """Replay `whatif_requests` through every scenario of `whatif_scenario_units` into `whatif_results` (the
    infinite cache's first sightings written to files in `scratch`); returns the number of (unit, scenario)
    results. `runs`: the files whatif_requests reads, in order, each a run of consecutive hours (None: it is one
    run), which the infinite cache takes one at a time. Each result says how it was found: `exact`, or `shards`
    with its sampling rate, and the block accesses replayed (`sampling_plans`).

    The infinite cache of a scope and routing whose LRU scenarios stream every unit it covers is counted in that
    stream (tokenledger/whatif/lru.py's InfiniteCache: a set of the blocks seen, compiled), unless its sets would pass
    INFINITE_MEMORY_SHARE of DuckDB's memory limit; else, and when no LRU scenario streams them, by DuckDB
    (`_replay_infinite`). Both give the same figure (tests/test_whatif.py)."""
    accesses = dict(con.execute("SELECT u.unit_id, s.block_accesses FROM whatif_simulated AS s JOIN whatif_units "
                                "AS u USING (unit)").fetchall())
    names = dict(con.execute("SELECT unit_id, unit FROM whatif_units").fetchall())
    results: list[tuple[str, str, int, str, float, int]] = []
    bounds: dict[tuple[str, str | None], dict[str, int]] = {}
    lru = con.execute("SELECT u.unit_id, s.scope, s.routing, s.unit, s.scenario, s.cache_blocks "
                      "FROM whatif_scenario_units AS s JOIN whatif_units AS u USING (unit) "
                      "WHERE s.note IS NULL AND s.cache = 'lru'").fetchall()
    infinite = con.execute("SELECT u.unit_id, s.scope, s.routing, s.unit, s.scenario FROM whatif_scenario_units AS s "
                           "JOIN whatif_units AS u USING (unit) WHERE s.note IS NULL AND s.cache = 'infinite'"
                           ).fetchall()
    streamed = {key: {r[0] for r in lru if (r[1], r[2]) == key} for key in {(r[1], r[2]) for r in lru}}
    in_stream = {key for key in {(r[1], r[2]) for r in infinite}
                 if {r[0] for r in infinite if (r[1], r[2]) == key} <= streamed.get(key, set())}
    stream_cap = int(memory_limit_bytes(con) * INFINITE_MEMORY_SHARE)
    plans = sampling_plans(con, sorted({r[0] for r in lru}))
    for scope, routing in sorted({(r[1], r[2]) for r in lru}, key=lambda k: (k[0], k[1] or "")):
        scenarios = [r for r in lru if (r[1], r[2]) == (scope, routing)]
        sizes: dict[int, set[int]] = {}
        for unit_id, *_, blocks in scenarios:
            sizes.setdefault(unit_id, set()).add(int(blocks))
        cap = stream_cap if (scope, routing) in in_stream else None
        cached, replayed, counted = _replay_lru(con, scope, routing, sizes, chunk_accesses, plans, cap)
        if counted is not None:
            bounds[(scope, routing)] = {names[unit_id]: tokens for unit_id, tokens in counted.items()}
        elif (scope, routing) in {(r[1], r[2]) for r in infinite}:  # no stream for it, or its sets grew too large
            bounds[(scope, routing)] = _replay_infinite(con, scope, routing, runs, scratch)
        bound = bounds.get((scope, routing), {})
        for unit_id, _, _, unit, scenario, blocks in scenarios:
            plan = plans.get(unit_id)
            tokens = cached.get((unit_id, int(blocks)), 0.0)
            if plan is not None and names[unit_id] in bound:
                # LRU never caches more than the infinite cache (a stack algorithm): an estimate above the exact
                # bound is sampling error, and the bound is closer to the truth.
                tokens = min(tokens, bound[names[unit_id]])
            results.append((unit, scenario, round(tokens), "exact" if plan is None else "shards",
                            1.0 if plan is None else plan.rate, replayed.get(unit_id, 0)))
    for scope, routing in {(r[1], r[2]) for r in infinite} - set(bounds):
        bounds[(scope, routing)] = _replay_infinite(con, scope, routing, runs, scratch)
    results += [(unit, scenario, bounds[(scope, routing)].get(unit, 0), "exact", 1.0, int(accesses.get(unit_id) or 0))
                for unit_id, scope, routing, unit, scenario in infinite]
    fields = [("unit", pa.string()), ("scenario", pa.string()), ("cached_tokens", pa.int64()),
              ("method", pa.string()), ("sampling_rate", pa.float64()), ("sampled_accesses", pa.int64())]
    table = pa.table({name: pa.array([r[i] for r in results], kind) for i, (name, kind) in enumerate(fields)})
    register_arrow(con, "_whatif_results", table)
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE whatif_results AS SELECT * FROM _whatif_results")
    finally:
        con.unregister("_whatif_results")
    return len(results)


def sampling_plans(con: duckdb.DuckDBPyConnection, unit_ids: list[int]) -> dict[int, Sampling]:
    """How the LRU scenarios of each unit with more block accesses than the budget (config/whatif.yaml,
    sampling.budget_accesses) are replayed: a SHARDS sample at the rate 1 / ceil(accesses / budget), keeping whole
    the blocks in at least SHARED_SHARE of a sample of the unit's requests (sql/whatif/whatif_shared_blocks.sql). A unit
    within the budget has no plan: it is replayed exactly."""
    from tokenledger.whatif.lru import Sampling

    budget = int(con.execute("SELECT budget_accesses FROM cfg_whatif_sampling").fetchall()[0][0])
    over = con.execute("SELECT u.unit_id, s.requests_simulated, s.block_accesses FROM whatif_simulated AS s "
                       "JOIN whatif_units AS u USING (unit) WHERE list_contains($ids::INTEGER[], u.unit_id) "
                       "AND s.block_accesses > $budget ORDER BY u.unit_id",
                       {"ids": unit_ids, "budget": budget}).fetchall()
    plans = {}
    for unit_id, requests, accesses in over:
        stride = max(1, requests // SHARED_SAMPLE_REQUESTS)
        least = max(1, math.ceil(SHARED_SHARE * (requests // stride)))
        shared = con.execute(statement("whatif_shared_blocks"), {"unit_id": unit_id, "stride": stride,
                                                                 "least": least}).fetchnumpy()["hash"]
        plans[unit_id] = Sampling(every=-(-int(accesses) // budget), shared=np.asarray(shared, dtype=np.int64))
    return plans


def _replay_infinite(con: duckdb.DuckDBPyConnection, scope: str, routing: str | None, runs: list[Path] | None,
                     scratch: Path) -> dict[str, int]:
    """Cached tokens per unit of the infinite cache for one scope and routing, a run at a time: the run's first
    sightings not sighted in the runs before (sql/whatif/whatif_first_sightings.sql) to a file in scratch, then the
    run's requests' cached tokens (sql/whatif/whatif_infinite.sql), added over the runs. Memory holds one run's distinct
    blocks and requests, never the day's: aggregated whole, the 10M-request day's largest deployment (31M distinct
    blocks) took 2.1 GB of RSS, taken in runs of an hour ~0.6 GB (the earlier runs' hashes are probed, never
    held)."""
    scratch.mkdir(parents=True, exist_ok=True)
    views = [f"SELECT * FROM read_parquet({sql_path(run)})" for run in runs] if runs else [
        "SELECT * FROM whatif_requests"]
    files = [scratch / f"whatif_first_sightings-{index:03d}.parquet" for index in range(len(views))]
    cached: dict[int, int] = {}
    try:
        for index, (view, file) in enumerate(zip(views, files, strict=True)):
            con.execute(f"CREATE OR REPLACE TEMP VIEW whatif_run AS {view}")
            con.execute("CREATE OR REPLACE TEMP VIEW whatif_seen AS " + (
                f"SELECT unit_id, cache_part, hash FROM read_parquet([{', '.join(sql_path(f) for f in files[:index])}])"
                if index else "SELECT NULL::INTEGER AS unit_id, NULL::INTEGER AS cache_part, NULL::BIGINT AS hash "
                              "WHERE false"))
            lake.write_query(con, statement("whatif_first_sightings"), file, {"scope": scope, "routing": routing},
                             scratch=True)
            con.execute("CREATE OR REPLACE TEMP VIEW whatif_run_sightings AS SELECT * FROM "
                        f"read_parquet({sql_path(file)})")
            for unit_id, tokens in run_sql(con, "whatif_infinite").fetchall():
                cached[unit_id] = cached.get(unit_id, 0) + int(tokens)
    finally:
        for name in ("whatif_run_sightings", "whatif_seen", "whatif_run"):
            con.execute(f"DROP VIEW IF EXISTS {name}")
        for file in files:
            file.unlink(missing_ok=True)
    names = dict(con.execute("SELECT unit_id, unit FROM whatif_units").fetchall())
    return {names[unit_id]: tokens for unit_id, tokens in cached.items()}


def _replay_lru(con: duckdb.DuckDBPyConnection, scope: str, routing: str | None, sizes: dict[int, set[int]],
                chunk_accesses: int, plans: dict[int, Sampling], infinite_cap: int | None = None
                ) -> tuple[dict[tuple[int, int], float], dict[int, int], dict[int, int] | None]:
    """Cached tokens per (unit_id, cache size in blocks) for one scope and routing, every size in one pass, and the
    block accesses replayed per unit: exactly, or a unit of `plans` sampled (estimated tokens,
    tokenledger/whatif/lru.py).
    With `infinite_cap` (bytes), also the infinite cache's cached tokens per unit, counted exactly over every block
    of the same stream (tokenledger/whatif/lru.py's InfiniteCache; the sample concerns the LRU caches only), or None
    when its sets would pass the cap (the caller asks DuckDB instead, `_replay_infinite`).

    The requests are read in the order whatif_requests was written (no sort: DuckDB keeps the files' order in a
    scan without ORDER BY): a day's hour files one after the other, each by unit and arrival, so every unit's
    requests arrive in order, hour after hour. They come in Arrow batches of whole requests of about
    `chunk_accesses` block accesses, which the compiled replay reads in place (a request's hashes are a slice of
    the batch's values). A unit's caches (one shared, or one per replica) are replayed side by side, each batch's
    requests split by cache in arrival order; a cache's recency list is carried from one batch to the next. The
    replay runs on a thread of its own while DuckDB reads the next batches (at most two waiting, so memory stays
    bounded), the infinite caches' sets on another. A request out of order stops the replay (never a wrong
    figure)."""
    from tokenledger.whatif.lru import InfiniteCache, LruCache, cached_tokens

    params = {"scope": scope, "routing": routing, "unit_ids": sorted(sizes)}
    text = statement("whatif_lru_requests")
    # A relation, not an executed result: DuckDB streams its batches instead of copying the whole result first.
    reader = con.sql(text, params=used_params(text, params)).to_arrow_reader(max(1, chunk_accesses // 512))
    caches: dict[tuple[int, int], LruCache] = {}  # by (unit_id, cache_part)
    infinite: dict[tuple[int, int], InfiniteCache] | None = None if infinite_cap is None else {}
    held: dict[int, int] = {}  # the replay thread's: the bytes of each infinite cache's set
    dropped = [False]  # set by the replay thread when the sets would pass infinite_cap
    last_seq: dict[tuple[int, int], int] = {}
    waiting: deque[list[Future]] = deque()

    def batch_work(batch: pa.RecordBatch) -> list[tuple[LruCache, InfiniteCache | None, np.ndarray]]:
        units, parts = (batch.column(c).to_numpy().astype(np.int64) for c in ("unit_id", "cache_part"))
        seq = batch.column("seq").to_numpy()
        work = []
        bounds = np.r_[0, np.flatnonzero(units[1:] != units[:-1]) + 1, len(units)]
        for r0, r1 in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):  # a unit's requests
            unit_id = int(units[r0])
            for cache_part in np.unique(parts[r0:r1]).tolist():  # each cache's requests, still in arrival order
                chosen = r0 + np.flatnonzero(parts[r0:r1] == cache_part)
                key = (unit_id, int(cache_part))
                order = seq[chosen]
                if order[0] <= last_seq.get(key, 0) or bool((order[1:] <= order[:-1]).any()):
                    raise RuntimeError(f"whatif_requests is not in arrival order for unit {unit_id} (cache "
                                       f"{cache_part}): the LRU replay needs each unit's requests written in seq order")
                last_seq[key] = int(order[-1])
                if key not in caches:
                    caches[key] = LruCache(np.array(sorted(sizes[unit_id])), plans.get(unit_id))
                    if infinite is not None:
                        infinite[key] = InfiniteCache()
                work.append((caches[key], None if infinite is None else infinite.get(key), chosen))
        return work

    def arrays(batch: pa.RecordBatch) -> tuple[np.ndarray, ...]:
        """A batch's hash lists (offsets, values) and per-request tokens, read in place."""
        hashes = batch.column("hashes")
        return (hashes.offsets.to_numpy().astype(np.int64),
                hashes.values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
                *(batch.column(c).to_numpy().astype(np.int64) for c in ("input_tokens", "kv_block_tokens")))

    def count_batch(batch: pa.RecordBatch, work: list[tuple[LruCache, InfiniteCache | None, np.ndarray]]) -> None:
        """The infinite caches' part of a batch, on a thread of its own (the sets are the replay's other half)."""
        offsets, values, input_tokens, block_tokens = arrays(batch)
        for _, seen, requests in work:
            if seen is None or dropped[0]:
                continue
            seen.replay(offsets, values, input_tokens, block_tokens, requests)
            held[id(seen)] = seen.nbytes
            if infinite_cap is not None and sum(held.values()) > infinite_cap:
                dropped[0] = True  # the sets would take too much memory: DuckDB counts it instead
                for other in list(infinite.values()) if infinite is not None else []:
                    other.release()

    def replay_batch(batch: pa.RecordBatch, work: list[tuple[LruCache, InfiniteCache | None, np.ndarray]]) -> None:
        offsets, values, input_tokens, block_tokens = arrays(batch)
        verdicts: dict[int, np.ndarray] = {}  # the sample's verdict on the batch's blocks, once per sampling plan
        for cache, _, requests in work:
            kept = None
            if cache.sampling is not None:
                kept = verdicts.get(id(cache.sampling))
                if kept is None:
                    kept = verdicts[id(cache.sampling)] = cache.sampling.kept(values)
            cache.replay(offsets, values, input_tokens, block_tokens, requests, kept)

    with (ThreadPoolExecutor(1, thread_name_prefix="tokenledger-lru") as pool,
          ThreadPoolExecutor(1, thread_name_prefix="tokenledger-infinite") as sets):
        for batch in reader:
            if batch.num_rows:
                work = batch_work(batch)
                waiting.append([pool.submit(replay_batch, batch, work)] + (
                    [sets.submit(count_batch, batch, work)] if infinite is not None else []))
            while len(waiting) > 2:
                for future in waiting.popleft():
                    future.result()
        while waiting:
            for future in waiting.popleft():
                future.result()
    totals: dict[tuple[int, int], float] = {}
    replayed: dict[int, int] = {}
    for unit_id in {u for u, _ in caches}:
        unit_caches = [c for (u, _), c in caches.items() if u == unit_id]
        for size, tokens in cached_tokens(unit_caches).items():
            totals[(unit_id, size)] = tokens
        replayed[unit_id] = sum(c.accesses for c in unit_caches)
    counted = None
    if infinite is not None and not dropped[0]:
        counted = {}
        for (unit_id, _), seen in infinite.items():
            counted[unit_id] = counted.get(unit_id, 0) + seen.cached_tokens
    return totals, replayed, counted


# --- a day -----------------------------------------------------------------------------------------------------

def replay_day(con: duckdb.DuckDBPyConnection, scratch: Path, window: DayWindow,
               chunk_accesses: int = CHUNK_ACCESSES) -> int:
    """Replay the day's requests (`day_requests`, `day_deployments`, config loaded) through every scenario: creates
    whatif_units, whatif_requests (files in scratch, one per hour), whatif_scenario_units, whatif_results and
    whatif_figures (sql/whatif/whatif_figures.sql, what both what-if tables share); returns the number of requests
    replayed."""
    con.execute("CREATE OR REPLACE TEMP TABLE whatif_units AS " + statement("whatif_day_units"))
    scratch.mkdir(parents=True, exist_ok=True)
    # The replica of a routing key (sql/whatif/replica_of.sql), used by sql/whatif/whatif_day_rows.sql.
    run_sql(con, "md5_mod")
    run_sql(con, "replica_of")
    files, replayed = _write_day_requests(con, scratch, window)
    _replay_files(con, files, chunk_accesses)
    return replayed


def _write_day_requests(con: duckdb.DuckDBPyConnection, scratch: Path, window: DayWindow
                        ) -> tuple[list[Path], int]:
    """The day's requests to replay, numbered and sorted by unit and arrival, as one file per run of consecutive
    hours in scratch (read in order, they are in the order the LRU replay needs within every unit); returns the
    files and their rows.

    The day's rows (sql/whatif/whatif_day_rows.sql, a view over the day's file) are counted per unit and hour once, then
    each run of hours is read from the day's file by its bounds on received_at, numbered and sorted on its own
    (sql/whatif/whatif_day_requests.sql): memory and spill hold a run's hash lists, not a day's. One sort of the whole
    day spilled a peak of ~50 GB for the 100M-request day's 5.5 billion block ids. DuckDB decodes only the run's
    rows of the hash lists (on the 10M-request day an hour's in 0.38 s, the whole day's in 2.4 s), so the day's
    rows are not first written out by hour (with it, this took that day 63 s instead of 43 s). A run is as many
    hours as hold at most `slab_accesses(con)` block accesses (one hour when an hour alone holds more): a small
    day is one file and one sort, a large one a file an hour."""
    con.execute("CREATE OR REPLACE TEMP VIEW whatif_day_rows AS " + statement("whatif_day_rows"))
    con.execute("CREATE OR REPLACE TEMP TABLE whatif_seq_offsets AS " + statement("whatif_seq_offsets"))
    accesses = dict(con.execute("SELECT hour, sum(accesses) FROM whatif_seq_offsets GROUP BY hour").fetchall())
    hours = sorted(accesses)
    slabs = hour_runs([(hour, int(accesses[hour])) for hour in hours], slab_accesses(con)) or [[0]]
    files, rows = [], 0
    for slab in slabs:
        files.append(scratch / f"whatif_requests-{slab[0]:02d}.parquet")
        rows += lake.write_query(con, statement("whatif_day_requests"), files[-1], {
            "first_hour": slab[0], "last_hour": slab[-1], "run_start": window.start + timedelta(hours=slab[0]),
            "run_end": window.start + timedelta(hours=slab[-1] + 1)})
    return files, rows


def slab_accesses(con: duckdb.DuckDBPyConnection) -> int:
    """At most how many block accesses the what-if sorts in one statement (a run of hours, `hour_runs`)."""
    return max(1, int(memory_limit_bytes(con) * SLAB_ACCESSES_PER_LIMIT_BYTE))


def hour_runs(hours: list[tuple[int, int]], limit: int) -> list[list[int]]:
    """The day's hours (hour, block accesses), in order, grouped into runs of consecutive hours of at most `limit`
    accesses together; an hour above the limit alone is a run of its own."""
    runs: list[list[int]] = []
    held = 0
    for hour, accesses in hours:
        if runs and held + accesses <= limit:
            runs[-1].append(hour)
            held += accesses
        else:
            runs.append([hour])
            held = accesses
    return runs


def _replay_files(con: duckdb.DuckDBPyConnection, files: list[Path], chunk_accesses: int) -> None:
    """The view whatif_requests over `files` (in their order, each a run of consecutive hours), then every
    scenario's replay and figures."""
    con.execute("CREATE OR REPLACE TEMP VIEW whatif_requests AS SELECT * FROM read_parquet("
                f"[{', '.join(sql_path(p) for p in files)}], hive_partitioning = false)")
    con.execute("CREATE OR REPLACE TEMP TABLE whatif_scenario_units AS " + statement("whatif_scenario_units"))
    con.execute("CREATE OR REPLACE TEMP TABLE whatif_simulated AS " + statement("whatif_simulated"))
    replay(con, files[0].parent, chunk_accesses, files)
    con.execute("CREATE OR REPLACE TEMP TABLE whatif_figures AS " + statement("whatif_figures"))


def build_cache_whatif_daily(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                             scratch: Path) -> dict[str, Any]:
    """infra.cache_whatif_daily for the day (config loaded): the day's requests with block hashes replayed through
    every scenario, valued at the day's unit costs (finance.cost_per_mtok_daily)."""
    attach_inputs(con, layout, window)
    attach_day(con, layout, window, "day_costs", "finance", "cost_per_mtok_daily")
    replayed = replay_day(con, scratch, window)
    target = lake.day_file(layout.lake, "infra", "cache_whatif_daily", window.day)
    rows = lake.write_query(con, statement("cache_whatif_daily"), target, window.params())
    return {"rows": rows, "replayed_requests": replayed}


# --- traces ----------------------------------------------------------------------------------------------------

def traces_dir(layout: HomeLayout) -> Path:
    return layout.raw / "traces"


def traces_file(layout: HomeLayout) -> Path:
    """The one file of infra.cache_whatif_traces: a trace has no day."""
    return layout.lake / TRACES.schema / TRACES.name / lake.DATA_FILE


def _stage_traces(con: duckdb.DuckDBPyConnection, layout: HomeLayout, scratch: Path) -> list[Path]:
    """Type every line of every trace file by data_contracts/inputs/trace_request.odcs.yaml into scratch; a line that
    breaks a rule stops the replay naming file, line and rule (a trace is an input to study, not a day to publish
    with a quarantine)."""
    root = traces_dir(layout)
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    declared = {r[0] for r in con.execute("SELECT trace FROM cfg_whatif_trace").fetchall()}
    undeclared = [f.name for f in folders if f.name not in declared]
    if undeclared:
        raise ConfigError(
            f"{root}: trace folder(s) {', '.join(undeclared)} have no entry under traces: in "
            f"{layout.config / 'whatif.yaml'}, so their block size is unknown. Add one per trace, for example "
            f"`traces: {{{undeclared[0]}: {{kv_block_tokens: 512}}}}` (Mooncake's traces use 512), and re-run.")
    table = load_contract("trace_request").table()
    staged = []
    for folder in folders:
        for index, file in enumerate(landing_files(folder, TRACE_FORMATS, "trace")):
            target = scratch / "traces" / folder.name / f"{index:06d}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            passthrough = [f"'{folder.name}' AS trace", "$file AS source_file", "source_line",
                           "line_problem IS NULL AS is_record"]
            with jsonl_lines(con, file.path) as (cur, lines):
                query = validation_query(table, _jsonl_text_relation(table, lines), passthrough, gate="line_problem",
                                         kinds=True)
                try:
                    lake.write_query(cur, query, target, {"file": file.path.name})
                except duckdb.Error as exc:
                    raise read_error(file.path, "JSON Lines", exc) from None
            check_some_records(con, target, file.path, "trace")
            broken = con.execute(f"SELECT source_line, reason FROM read_parquet({sql_path(target)}) "
                                 f"WHERE reason IS NOT NULL AND reason <> '{_EMPTY_LINE}' ORDER BY source_line "
                                 "LIMIT 5").fetchall()
            if broken:
                lines_text = "\n".join(f"  {file.path} line {line}: {reason}" for line, reason in broken)
                raise InputFileError(f"{file.path} breaks the trace_request contract "
                                     f"(data_contracts/inputs/trace_request.odcs.yaml):\n{lines_text}\nFix or remove "
                                     "these lines (every line is one request), then re-run.")
            staged.append(target)
    return staged


def build_cache_whatif_traces(con: duckdb.DuckDBPyConnection, layout: HomeLayout, scratch: Path) -> dict[str, Any]:
    """infra.cache_whatif_traces (config loaded): every trace of raw/traces/ replayed through every scenario."""
    staged = _stage_traces(con, layout, scratch)
    columns = ", ".join(["trace", "source_file", "source_line"] + load_contract("trace_request").table().column_names)
    if staged:
        files = ", ".join(sql_path(p) for p in staged)
        con.execute(f"CREATE OR REPLACE TEMP VIEW staged_traces AS SELECT {columns} FROM read_parquet([{files}]) "
                    "WHERE reason IS NULL")
    else:
        con.execute("CREATE OR REPLACE TEMP VIEW staged_traces AS SELECT NULL::VARCHAR AS trace, NULL::VARCHAR AS "
                    "source_file, NULL::BIGINT AS source_line, NULL::DOUBLE AS timestamp, NULL::BIGINT AS "
                    "input_length, NULL::BIGINT AS output_length, NULL::BIGINT[] AS hash_ids, NULL::VARCHAR AS "
                    "session_id WHERE false")
    con.execute("CREATE OR REPLACE TEMP TABLE whatif_units AS " + statement("whatif_trace_units"))
    scratch.mkdir(parents=True, exist_ok=True)
    run_sql(con, "md5_mod")  # the replica of a routing key (sql/whatif/replica_of.sql), used by
    run_sql(con, "replica_of")  # sql/whatif/whatif_trace_requests.sql
    requests = scratch / "whatif_trace_requests.parquet"
    replayed = lake.write_query(con, statement("whatif_trace_requests"), requests)
    _replay_files(con, [requests], CHUNK_ACCESSES)
    rows = lake.write_query(con, statement("cache_whatif_traces"), traces_file(layout))
    return {"rows": rows, "replayed_requests": replayed, "traces": len({p.parent for p in staged})}
